//go:build faults

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

package faults

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/testenv"
)

// sendObject is what the suite checks of an object the operator sends an
// email for. MailgunClusters and MailgunMachines go through one send path
// and keep the same promises, so every check runs over both kinds from one
// list.
type sendObject struct {
	kind, name string
	// cluster is the name of the object's Cluster.
	cluster string
	// variable is the Mailgun variable that names the object in its emails.
	variable    string
	annotations map[string]string
	messageID   string
	conditions  []metav1.Condition
}

// recorded reports whether the object is Ready with its accepted email
// recorded in status and in its send record alike.
func (o sendObject) recorded() bool {
	return meta.IsStatusConditionTrue(o.conditions, infrav1.ReadyCondition) && o.messageID != "" &&
		o.annotations[infrav1.AcceptedMessageIDAnnotation] == o.messageID
}

// listSendObjects returns the MailgunClusters and MailgunMachines in ns.
func listSendObjects(ctx context.Context, t *testing.T, c client.Client, ns string) []sendObject {
	t.Helper()
	clusters := &infrav1.MailgunClusterList{}
	if err := c.List(ctx, clusters, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	machines := &infrav1.MailgunMachineList{}
	if err := c.List(ctx, machines, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := make([]sendObject, 0, len(clusters.Items)+len(machines.Items))
	for _, mc := range clusters.Items {
		out = append(out, sendObject{kind: "MailgunCluster", name: mc.Name, cluster: mc.Name, variable: mailer.VarCluster,
			annotations: mc.Annotations, messageID: mc.Status.MessageID, conditions: mc.Status.Conditions})
	}
	for _, mm := range machines.Items {
		out = append(out, sendObject{kind: "MailgunMachine", name: mm.Name, cluster: mm.Labels[clusterv1.ClusterNameLabel], variable: mailer.VarMachine,
			annotations: mm.Annotations, messageID: mm.Status.MessageID, conditions: mm.Status.Conditions})
	}
	return out
}

// objects creates what the operator sends for, as Cluster API and a user
// would: Clusters with their MailgunClusters, and control-plane Machines
// with their MailgunMachines, ready to send once created.
type objects struct {
	ctx context.Context
	t   *testing.T
	c   client.Client
	ns  string
}

// cluster creates a Cluster and its MailgunCluster name, whose annotations
// are record (a copied send record, or nil). The Cluster's infrastructure
// counts as provisioned at once, as Cluster API would say after the email,
// so that machines need not wait for it.
func (o objects) cluster(name string, record map[string]string) {
	o.t.Helper()
	cluster := testenv.ClusterFor(o.ns, name)
	if err := o.c.Create(o.ctx, cluster); err != nil {
		o.t.Fatal(err)
	}
	mc := &infrav1.MailgunCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: o.ns, Name: name, Annotations: record,
			OwnerReferences: []metav1.OwnerReference{testenv.OwnerRef(cluster)}},
		Spec: infrav1.MailgunClusterSpec{Priority: infrav1.PriorityUrgent, Request: "cluster " + name, Requester: "ops@example.com"},
	}
	if err := o.c.Create(o.ctx, mc); err != nil {
		o.t.Fatal(err)
	}
	cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	if err := o.c.Status().Update(o.ctx, cluster); err != nil {
		o.t.Fatal(err)
	}
}

// machine creates, in the Cluster cluster, a control-plane Machine whose
// bootstrap data is set and the MailgunMachine name it owns, whose
// annotations are record.
func (o objects) machine(cluster, name string, record map[string]string) {
	o.t.Helper()
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: o.ns, Name: name, Labels: map[string]string{
			clusterv1.ClusterNameLabel: cluster, clusterv1.MachineControlPlaneLabel: "",
		}},
		Spec: clusterv1.MachineSpec{
			ClusterName: cluster,
			Version:     "v1.36.0",
			Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To(name + "-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "MailgunMachine", Name: name,
			},
		},
	}
	if err := o.c.Create(o.ctx, m); err != nil {
		o.t.Fatal(err)
	}
	mm := &infrav1.MailgunMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: o.ns, Name: name, Annotations: record,
			Labels: map[string]string{clusterv1.ClusterNameLabel: cluster},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: m.Name, UID: m.UID,
			}}},
		Spec: infrav1.MailgunMachineSpec{Priority: infrav1.PriorityUrgent, Request: "machine " + name},
	}
	if err := o.c.Create(o.ctx, mm); err != nil {
		o.t.Fatal(err)
	}
}
