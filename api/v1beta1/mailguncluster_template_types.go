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

// MailgunClusterTemplateSpec holds the template of the MailgunClusters a
// ClusterClass creates.
type MailgunClusterTemplateSpec struct {
	// template is the MailgunCluster to create for each Cluster.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.template is immutable; create a new MailgunClusterTemplate and point the ClusterClass at it"
	Template MailgunClusterTemplateResource `json:"template"`
}

// MailgunClusterTemplateResource is the MailgunCluster a template creates.
type MailgunClusterTemplateResource struct {
	// metadata holds labels and annotations for the created MailgunCluster.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec is the spec of the created MailgunCluster.
	// +required
	Spec MailgunClusterSpec `json:"spec"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=mailgunclustertemplates,scope=Namespaced,shortName=mgct,categories=cluster-api
// +kubebuilder:storageversion
// The contract label maps Cluster API's v1beta2 contract to this version.
// clusterctl's label lets clusterctl move find the kind however the CRD was
// installed: clusterctl init adds it, OLM installs the CRD as shipped.
// +kubebuilder:metadata:labels={"cluster.x-k8s.io/v1beta2=v1beta1","clusterctl.cluster.x-k8s.io="}
// +kubebuilder:printcolumn:name="Priority",type="string",JSONPath=".spec.template.spec.priority",description="How urgently clusters from this template are needed"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// MailgunClusterTemplate is the template of MailgunClusters for
// ClusterClasses.
type MailgunClusterTemplate struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the template.
	// +required
	Spec MailgunClusterTemplateSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// MailgunClusterTemplateList contains a list of MailgunClusterTemplate.
type MailgunClusterTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MailgunClusterTemplate `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &MailgunClusterTemplate{}, &MailgunClusterTemplateList{})
}
