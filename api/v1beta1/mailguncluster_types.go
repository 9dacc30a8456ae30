/*
Copyright 2026 The cluster-api-provider-mailgun Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// ClusterFinalizer lets the controller observe the deletion of a
	// MailgunCluster before the apiserver removes it.
	ClusterFinalizer = "infrastructure.cluster.x-k8s.io/mailguncluster"

	// MessageIDAnnotation holds the Message-Id the controller sends the
	// request email with. It is chosen once, written before the first send
	// attempt, and travels with the object (clusterctl move keeps metadata but
	// not status), so every later attempt and lookup uses the same ID.
	MessageIDAnnotation = "mailgun.infrastructure.cluster.x-k8s.io/message-id"

	// SendAttemptedAtAnnotation records (RFC 3339, nanoseconds) when a send attempt whose
	// outcome is not yet known started. While it is present the controller
	// looks the message up in Mailgun before it sends again.
	SendAttemptedAtAnnotation = "mailgun.infrastructure.cluster.x-k8s.io/send-attempted-at"

	// SendDomainAnnotation is the Mailgun domain the pending send attempt
	// (SendAttemptedAtAnnotation) was made with: Mailgun's events are per
	// domain, so only that domain's events can tell whether it was accepted.
	SendDomainAnnotation = "mailgun.infrastructure.cluster.x-k8s.io/send-domain"

	// AcceptedMessageIDAnnotation is the durable record that Mailgun accepted
	// the request email; its value is the ID Mailgun returned. Once set, the
	// controller never sends for this object again.
	AcceptedMessageIDAnnotation = "mailgun.infrastructure.cluster.x-k8s.io/accepted-message-id"

	// ResendRequestAnnotation is set by a user to ask for a new email: each
	// new value is one new request, sent at most once.
	ResendRequestAnnotation = "mailgun.infrastructure.cluster.x-k8s.io/resend-request"

	// ResendHandledAnnotation holds the last resend request the controller
	// took on.
	ResendHandledAnnotation = "mailgun.infrastructure.cluster.x-k8s.io/resend-handled"

	// MessageIDHistoryAnnotation lists, comma-separated and oldest first,
	// the IDs of earlier accepted emails replaced by resends.
	MessageIDHistoryAnnotation = "mailgun.infrastructure.cluster.x-k8s.io/message-id-history"

	// SentForAnnotation binds the send record (the annotations above) to the
	// object it was written for, as "<namespace>/<name>". clusterctl move and
	// a restore keep both, so the record still counts and nothing is sent
	// again; a copy under another name or namespace (GitOps, a restore into
	// a new namespace) does not match, drops the copied record and sends its
	// own email.
	SentForAnnotation = "mailgun.infrastructure.cluster.x-k8s.io/sent-for"
)

// Priority says how urgently the requester needs the cluster.
// +kubebuilder:validation:Enum=Urgent;ExtremelyUrgent;BusinessCritical
type Priority string

const (
	// PriorityUrgent is for clusters needed soon.
	PriorityUrgent Priority = "Urgent"
	// PriorityExtremelyUrgent is for clusters needed very soon.
	PriorityExtremelyUrgent Priority = "ExtremelyUrgent"
	// PriorityBusinessCritical is for clusters the business cannot wait for.
	PriorityBusinessCritical Priority = "BusinessCritical"
)

// MailgunClusterSpec describes the cluster being requested by email.
type MailgunClusterSpec struct {
	// priority is how urgently the cluster is needed; it is shown in the
	// subject of the request email. Immutable, like every field that goes
	// into the email.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.priority is immutable: it is part of the request email; create a new MailgunCluster to request another cluster"
	Priority Priority `json:"priority"`

	// request is the free-text body of the request: what the cluster is for
	// and what it needs. Tabs and newlines are allowed; other control
	// characters are not.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="!self.matches('[\\\\x00-\\\\x08\\\\x0b\\\\x0c\\\\x0e-\\\\x1f\\\\x7f]')",message="spec.request must not contain control characters other than tab, CR and LF"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.request is immutable: it is the body of the request email; create a new MailgunCluster to request another cluster"
	Request string `json:"request"`

	// requester identifies who asked for the cluster: an email address
	// (used as the Reply-To of the request email) or, for manifests written
	// for earlier versions, a bare domain name.
	// +required
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=254
	// +kubebuilder:validation:XValidation:rule=`self.matches(r"^([A-Za-z0-9!#$%&'*+/=?^_{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_{|}~-]+)*@)?([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")`,message="spec.requester must be an email address such as alice@example.com (or, in manifests written for earlier versions, a domain name)"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.requester is immutable: it is the Reply-To of the request email; create a new MailgunCluster to request another cluster"
	Requester string `json:"requester"`

	// identityRef names the MailgunClusterIdentity (Mailgun account, domain,
	// sender) to send the request email with. Omitted, the operator-wide
	// settings are used. The identity must allow this MailgunCluster's
	// namespace. It may be changed until the email is accepted (e.g. to fix
	// a refused reference); afterwards a change sends nothing, but delivery
	// tracking and resend requests use the identity then named.
	// +optional
	IdentityRef *MailgunClusterIdentityReference `json:"identityRef,omitempty"`

	// controlPlaneEndpoint is the endpoint of the requested cluster's control
	// plane. Whoever builds the cluster fills it in; Cluster API copies it to
	// the Cluster once set.
	// +optional
	ControlPlaneEndpoint APIEndpoint `json:"controlPlaneEndpoint,omitempty,omitzero"`
}

// APIEndpoint is a reachable Kubernetes API endpoint.
// +kubebuilder:validation:MinProperties=1
type APIEndpoint struct {
	// host is the hostname or IP address the API server serves on.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule=`self.matches(r"^[A-Za-z0-9.:\[\]_-]+$")`,message="spec.controlPlaneEndpoint.host must be a hostname or an IP address"
	Host string `json:"host,omitempty"`

	// port is the port the API server serves on.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`
}

// IsZero reports whether the endpoint is unset.
func (e APIEndpoint) IsZero() bool {
	return e.Host == "" && e.Port == 0
}

// MailgunClusterStatus is the observed state of a MailgunCluster.
// +kubebuilder:validation:MinProperties=1
type MailgunClusterStatus struct {
	// conditions describe the state of the MailgunCluster: Ready, EmailSent,
	// EmailDelivered and Paused.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// initialization reports the Cluster API provisioning milestones.
	// +optional
	Initialization MailgunClusterInitializationStatus `json:"initialization,omitempty,omitzero"`

	// messageID is the ID Mailgun assigned to the request email once it
	// accepted it.
	// +optional
	// +kubebuilder:validation:MaxLength=998
	MessageID string `json:"messageID,omitempty"`

	// observedGeneration is the generation the controller last reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// MailgunClusterInitializationStatus is the Cluster API v1beta2 contract's
// initialization status.
// +kubebuilder:validation:MinProperties=1
type MailgunClusterInitializationStatus struct {
	// provisioned is true once Mailgun accepted the request email, which is
	// all the infrastructure this provider creates.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=mailgunclusters,scope=Namespaced,shortName=mgc,categories=cluster-api
// +kubebuilder:storageversion
// The contract label maps Cluster API's v1beta2 contract to this version.
// clusterctl's label lets clusterctl move find the kind however the CRD was
// installed: clusterctl init adds it, OLM installs the CRD as shipped.
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta1","clusterctl.cluster.x-k8s.io="}
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster to which this MailgunCluster belongs"
// +kubebuilder:printcolumn:name="Priority",type="string",JSONPath=".spec.priority",description="How urgently the cluster is needed"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status",description="Whether the request email was accepted by Mailgun"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].reason",priority=1,description="Why the MailgunCluster is (not) ready"
// +kubebuilder:printcolumn:name="Message ID",type="string",JSONPath=".status.messageID",description="Mailgun message ID of the request email"
// +kubebuilder:printcolumn:name="Delivery",type="string",JSONPath=".status.conditions[?(@.type==\"EmailDelivered\")].reason",description="Delivery of the request email: DeliveryPending, Delivered, DeliveryFailed, ..."
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// MailgunCluster asks for a cluster by sending an email through Mailgun.
type MailgunCluster struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the requested cluster.
	// +required
	Spec MailgunClusterSpec `json:"spec"`

	// status is the observed state.
	// +optional
	Status MailgunClusterStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the conditions, for Cluster API's condition utilities.
func (c *MailgunCluster) GetConditions() []metav1.Condition {
	return c.Status.Conditions
}

// SetConditions sets the conditions, for Cluster API's condition utilities.
func (c *MailgunCluster) SetConditions(conditions []metav1.Condition) {
	c.Status.Conditions = conditions
}

// +kubebuilder:object:root=true

// MailgunClusterList contains a list of MailgunCluster.
type MailgunClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MailgunCluster `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &MailgunCluster{}, &MailgunClusterList{})
}
