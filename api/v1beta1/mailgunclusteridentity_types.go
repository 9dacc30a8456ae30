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

// MailgunClusterIdentitySpec is one Mailgun account and sending domain that
// MailgunClusters in the allowed namespaces may send their request emails
// through.
type MailgunClusterIdentitySpec struct {
	// secretRef names the Secret, in the operator's namespace, whose api_key
	// key holds the Mailgun private API key. Only the operator's namespace
	// is read, so that a team cannot point an identity at another team's
	// Secret.
	// +required
	SecretRef SecretReference `json:"secretRef"`

	// domain is the Mailgun sending domain, e.g. mg.example.com.
	// +required
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`self.matches(r"^([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")`,message="spec.domain must be a domain name such as mg.example.com"
	Domain string `json:"domain"`

	// apiBase is deprecated: the Mailgun API base URL of the account's
	// region now lives in key api_base of the Secret, next to the API key
	// (https://api.mailgun.net/v3, US, when the key is absent), so that
	// the key is only ever sent where whoever wrote the Secret chose. If
	// set, it must equal the Secret's API base, or the identity is not
	// used. Plain http is allowed only for a loopback address (a local
	// stand-in), and the path must end in the API version, e.g. /v3.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule=`isURL(self) && url(self).getHostname() != "" && (self.startsWith("https://") || self.matches(r"^http://(localhost|127\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}|\[::1\])(:[0-9]{1,5})?(/.*)?$"))`,message="spec.apiBase must be an https URL such as https://api.eu.mailgun.net/v3 (plain http only for a loopback address)"
	// +kubebuilder:validation:XValidation:rule=`self.matches(r"/v[0-9]+/?$")`,message="spec.apiBase must end in the API version, such as https://api.eu.mailgun.net/v3"
	APIBase string `json:"apiBase,omitempty"`

	// sender is the From address of the request emails, e.g.
	// "Cluster requests <clusters@mg.example.com>". Defaults to
	// "Cluster API Mailgun Provider <cluster-api@DOMAIN>".
	// +optional
	// +kubebuilder:validation:MaxLength=320
	// +kubebuilder:validation:XValidation:rule=`!self.matches(r"[\x00-\x1f\x7f]")`,message="spec.sender must be a single-line email address"
	Sender string `json:"sender,omitempty"`

	// recipient receives the request emails sent with this identity.
	// Defaults to the operator-wide recipient (key mail_recipient of the
	// operator's Mailgun ConfigMap).
	// +optional
	// +kubebuilder:validation:MaxLength=320
	// +kubebuilder:validation:XValidation:rule=`!self.matches(r"[\x00-\x1f\x7f]")`,message="spec.recipient must be a single-line email address"
	Recipient string `json:"recipient,omitempty"`

	// allowedNamespaces says which namespaces' MailgunClusters may use this
	// identity. Omitted, no namespace may; {} allows every namespace. A
	// namespace is allowed if it is in list or matches selector.
	// +optional
	AllowedNamespaces *AllowedNamespaces `json:"allowedNamespaces,omitempty"`
}

// SecretReference names a Secret in the operator's namespace.
type SecretReference struct {
	// name is the name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`self.matches(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")`,message="spec.secretRef.name must be a Secret name (lower-case letters, digits, '-' and '.')"
	Name string `json:"name"`
}

// AllowedNamespaces selects namespaces by name and by label.
type AllowedNamespaces struct {
	// list names namespaces that may use the identity. An empty list is
	// refused: omit allowedNamespaces to allow none, or set it to {} to
	// allow all.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	List []string `json:"list,omitempty"`

	// selector selects, by their labels, namespaces that may use the
	// identity. An empty selector ({}) selects none (as in CAPA): only
	// allowedNamespaces {} allows every namespace.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// MailgunClusterIdentityReference names the identity a MailgunCluster
// sends with.
type MailgunClusterIdentityReference struct {
	// kind is the kind of the identity; MailgunClusterIdentity is the only
	// one so far (the field leaves room for others, as in CAPA and CAPV).
	// +optional
	// +kubebuilder:default=MailgunClusterIdentity
	// +kubebuilder:validation:Enum=MailgunClusterIdentity
	Kind string `json:"kind,omitempty"`

	// name is the name of the MailgunClusterIdentity.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`self.matches(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")`,message="spec.identityRef.name must be the name of a MailgunClusterIdentity (lower-case letters, digits, '-' and '.')"
	Name string `json:"name"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=mailgunclusteridentities,scope=Cluster,shortName=mgci,categories=cluster-api
// +kubebuilder:storageversion
// The contract label maps Cluster API's v1beta2 contract to this version,
// as on every CRD of a provider. No clusterctl move labels: identities and
// their Secrets are the management cluster's configuration, like the
// operator-wide settings, and are set up on a move's target before the
// move (docs/install-clusterctl.md).
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta1"}
// +kubebuilder:printcolumn:name="Domain",type="string",JSONPath=".spec.domain",description="Mailgun sending domain"
// +kubebuilder:printcolumn:name="Secret",type="string",JSONPath=".spec.secretRef.name",description="Secret holding the API key, in the operator's namespace"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// MailgunClusterIdentity is a Mailgun account, sending domain and sender
// that MailgunClusters in the allowed namespaces name in spec.identityRef.
type MailgunClusterIdentity struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the identity.
	// +required
	Spec MailgunClusterIdentitySpec `json:"spec"`
}

// +kubebuilder:object:root=true

// MailgunClusterIdentityList contains a list of MailgunClusterIdentity.
type MailgunClusterIdentityList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MailgunClusterIdentity `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &MailgunClusterIdentity{}, &MailgunClusterIdentityList{})
}
