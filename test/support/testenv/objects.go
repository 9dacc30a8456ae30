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

package testenv

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
)

// ClusterFor returns a Cluster API Cluster whose infrastructureRef names the
// MailgunCluster of the same name.
func ClusterFor(namespace, name string) *clusterv1.Cluster {
	return &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "MailgunCluster", Name: name,
		}},
	}
}

// OwnerRef is the owner reference Cluster API's Cluster controller sets on
// the infrastructure object of a created cluster; suites that do not run
// that controller set it themselves.
func OwnerRef(cluster *clusterv1.Cluster) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: cluster.Name, UID: cluster.UID,
	}
}
