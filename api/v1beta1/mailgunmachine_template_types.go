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
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// MailgunMachineTemplateSpec holds the template of the MailgunMachines a
// MachineDeployment, MachineSet or control plane creates.
//
// There is no immutability rule: ClusterClass rotates a machine template by
// a server-side dry-run apply of its new version, which such a rule would
// refuse. Create a new template and point the owner at it instead of
// editing one in use.
type MailgunMachineTemplateSpec struct {
	// template is the MailgunMachine to create for each Machine.
	// +required
	Template MailgunMachineTemplateResource `json:"template"`
}

// MailgunMachineTemplateResource is the MailgunMachine a template creates.
// Each MailgunMachine gets its own provider ID and send record, so a
// template may carry neither.
// +kubebuilder:validation:XValidation:rule="!has(self.spec.providerID)",message="spec.template.spec.providerID must not be set: the operator sets each MailgunMachine's own"
// +kubebuilder:validation:XValidation:rule="!has(self.metadata) || !has(self.metadata.annotations) || !self.metadata.annotations.exists(k, k.startsWith('mailgun.infrastructure.cluster.x-k8s.io/'))",message="spec.template.metadata.annotations must not hold mailgun.infrastructure.cluster.x-k8s.io/ annotations: they are each MailgunMachine's own send record"
type MailgunMachineTemplateResource struct {
	// metadata holds labels and annotations for the created MailgunMachines.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec is the spec of the created MailgunMachines.
	// +required
	Spec MailgunMachineSpec `json:"spec"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=mailgunmachinetemplates,scope=Namespaced,shortName=mgmt,categories=cluster-api
// +kubebuilder:storageversion
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta1","clusterctl.cluster.x-k8s.io="}
// +kubebuilder:printcolumn:name="Priority",type="string",JSONPath=".spec.template.spec.priority",description="How urgently machines from this template are needed"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// MailgunMachineTemplate is the template of MailgunMachines for
// MachineDeployments, MachineSets and ClusterClasses.
type MailgunMachineTemplate struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the template.
	// +required
	Spec MailgunMachineTemplateSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// MailgunMachineTemplateList contains a list of MailgunMachineTemplate.
type MailgunMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MailgunMachineTemplate `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &MailgunMachineTemplate{}, &MailgunMachineTemplateList{})
}
