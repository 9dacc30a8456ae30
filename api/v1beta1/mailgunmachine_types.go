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
	// MachineFinalizer lets the controller observe the deletion of a
	// MailgunMachine before the apiserver removes it.
	MachineFinalizer = "infrastructure.cluster.x-k8s.io/mailgunmachine"

	// ProviderIDPrefix starts every provider ID this operator writes:
	// mailgun://<MailgunMachine UID>.
	ProviderIDPrefix = "mailgun://"
)

// MailgunMachineSpec describes the machine being requested by email. The
// fields that go into the email are fixed once the operator set
// spec.providerID, which it does right before the first send attempt.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.providerID) || self.priority == oldSelf.priority",message="spec.priority cannot change once spec.providerID is set: the request email may have been sent; create a new MailgunMachine to request another machine"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.providerID) || (has(self.request) == has(oldSelf.request) && (!has(self.request) || self.request == oldSelf.request))",message="spec.request cannot change once spec.providerID is set: the request email may have been sent; create a new MailgunMachine to request another machine"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.providerID) || (has(self.providerID) && self.providerID == oldSelf.providerID)",message="spec.providerID is set once, by the operator, and cannot be changed or removed"
type MailgunMachineSpec struct {
	// priority is how urgently the machine is needed; it is shown in the
	// subject of the request email.
	// +required
	Priority Priority `json:"priority"`

	// request is free text added to the request email: what the machine
	// needs beyond what Cluster API says (size, placement, ...). Tabs and
	// newlines are allowed; other control characters are not.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule="!self.matches('[\\\\x00-\\\\x08\\\\x0b\\\\x0c\\\\x0e-\\\\x1f\\\\x7f]')",message="spec.request must not contain control characters other than tab, CR and LF"
	Request string `json:"request,omitempty"`

	// providerID identifies the machine to Cluster API, which matches it
	// to the Node whose kubelet was started with the same provider ID. The
	// operator sets it, as mailgun://<this MailgunMachine's UID>, with the
	// first send attempt; the email asks the builder to use it. Leave it
	// unset.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule=`self.matches(r"^mailgun://[0-9a-f-]{36}$")`,message="spec.providerID is set by the operator, as mailgun://<MailgunMachine UID>; leave it unset"
	ProviderID string `json:"providerID,omitempty"`
}

// MailgunMachineStatus is the observed state of a MailgunMachine.
// +kubebuilder:validation:MinProperties=1
type MailgunMachineStatus struct {
	// conditions describe the state of the MailgunMachine: Ready,
	// EmailSent, EmailDelivered and Paused.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// initialization reports the Cluster API provisioning milestones.
	// +optional
	Initialization MailgunMachineInitializationStatus `json:"initialization,omitempty,omitzero"`

	// messageID is the ID Mailgun assigned to the request email once it
	// accepted it.
	// +optional
	// +kubebuilder:validation:MaxLength=998
	MessageID string `json:"messageID,omitempty"`

	// failureDomain is the failure domain the machine was requested in:
	// its Machine's spec.failureDomain.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	FailureDomain string `json:"failureDomain,omitempty"`

	// observedGeneration is the generation the controller last reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// MailgunMachineInitializationStatus is the Cluster API v1beta2 contract's
// initialization status.
// +kubebuilder:validation:MinProperties=1
type MailgunMachineInitializationStatus struct {
	// provisioned is true once Mailgun accepted the request email; Cluster
	// API then reads spec.providerID.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=mailgunmachines,scope=Namespaced,shortName=mgm,categories=cluster-api
// +kubebuilder:storageversion
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta1","clusterctl.cluster.x-k8s.io="}
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster to which this MailgunMachine belongs"
// +kubebuilder:printcolumn:name="Machine",type="string",JSONPath=".metadata.ownerReferences[?(@.kind==\"Machine\")].name",description="Machine that owns this MailgunMachine"
// +kubebuilder:printcolumn:name="Priority",type="string",JSONPath=".spec.priority",description="How urgently the machine is needed"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status",description="Whether the request email was accepted by Mailgun"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].reason",priority=1,description="Why the MailgunMachine is (not) ready"
// +kubebuilder:printcolumn:name="Provider ID",type="string",JSONPath=".spec.providerID",priority=1,description="Provider ID the machine's kubelet must be started with"
// +kubebuilder:printcolumn:name="Message ID",type="string",JSONPath=".status.messageID",description="Mailgun message ID of the request email"
// +kubebuilder:printcolumn:name="Delivery",type="string",JSONPath=".status.conditions[?(@.type==\"EmailDelivered\")].reason",description="Delivery of the request email: DeliveryPending, Delivered, DeliveryFailed, ..."
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// MailgunMachine asks for a machine of a Cluster API cluster by sending an
// email through Mailgun.
type MailgunMachine struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the requested machine.
	// +required
	Spec MailgunMachineSpec `json:"spec"`

	// status is the observed state.
	// +optional
	Status MailgunMachineStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the conditions, for Cluster API's condition utilities.
func (m *MailgunMachine) GetConditions() []metav1.Condition {
	return m.Status.Conditions
}

// SetConditions sets the conditions, for Cluster API's condition utilities.
func (m *MailgunMachine) SetConditions(conditions []metav1.Condition) {
	m.Status.Conditions = conditions
}

// +kubebuilder:object:root=true

// MailgunMachineList contains a list of MailgunMachine.
type MailgunMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MailgunMachine `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &MailgunMachine{}, &MailgunMachineList{})
}
