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

package controllers

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
)

// TestMachineNotReadyFollowsClusterAPIsOrder: each prerequisite Cluster API
// provides holds the send back with its own reason, in the order it comes.
func TestMachineNotReadyFollowsClusterAPIsOrder(t *testing.T) {
	mm := &infrav1.MailgunMachine{ObjectMeta: metav1.ObjectMeta{Name: "mm"}}
	machine := func(mutate ...func(*clusterv1.Machine)) *clusterv1.Machine {
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Spec: clusterv1.MachineSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "MailgunMachine", Name: "mm"},
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("m-bootstrap")},
		}}
		for _, f := range mutate {
			f(m)
		}
		return m
	}
	cluster := func(infra, controlPlane bool) *clusterv1.Cluster {
		c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c"}}
		c.Status.Initialization.InfrastructureProvisioned = ptr.To(infra)
		c.Status.Initialization.ControlPlaneInitialized = ptr.To(controlPlane)
		return c
	}
	noData := func(m *clusterv1.Machine) { m.Spec.Bootstrap.DataSecretName = nil }
	controlPlaneMachine := func(m *clusterv1.Machine) { m.Labels = map[string]string{clusterv1.MachineControlPlaneLabel: ""} }
	for _, c := range []struct {
		name       string
		machine    *clusterv1.Machine
		cluster    *clusterv1.Cluster
		infraFound bool
		clusterAPI bool
		want       string
	}{
		{"no Cluster API", nil, nil, false, false, infrav1.WaitingForClusterAPIReason},
		{"no Machine", nil, cluster(true, true), true, true, infrav1.WaitingForMachineReason},
		{"another infrastructure", machine(func(m *clusterv1.Machine) { m.Spec.InfrastructureRef.Name = "other" }), cluster(true, true), true, true,
			infrav1.NotMachineInfrastructureReason},
		{"no Cluster", machine(), nil, false, true, infrav1.WaitingForClusterReason},
		{"infrastructure not provisioned", machine(), cluster(false, false), true, true, infrav1.WaitingForClusterInfrastructureReason},
		{"MailgunCluster missing", machine(), cluster(true, true), false, true, infrav1.WaitingForClusterInfrastructureReason},
		{"worker before the control plane", machine(noData), cluster(true, false), true, true, infrav1.WaitingForControlPlaneInitializedReason},
		{"worker without bootstrap data", machine(noData), cluster(true, true), true, true, infrav1.WaitingForBootstrapDataReason},
		{"control plane machine without bootstrap data", machine(noData, controlPlaneMachine), cluster(true, false), true, true,
			infrav1.WaitingForBootstrapDataReason},
		{"Machine being deleted", machine(func(m *clusterv1.Machine) { m.DeletionTimestamp = ptr.To(metav1.Now()) }), cluster(true, true), true, true,
			infrav1.WaitingForMachineReason},
		{"everything there", machine(), cluster(true, false), true, true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			reason, msg := machineNotReady(mm, c.machine, c.cluster, c.infraFound, c.clusterAPI)
			if reason != c.want || (reason != "" && msg == "") {
				t.Errorf("got %q (%q), want %q with a message", reason, msg, c.want)
			}
		})
	}
}

// TestClusterAPIServedNeedsEveryKind: the CRDs of one Cluster API install
// become served one by one; a controller that watches Machines must wait
// until Machines are served too, or its watch fails (with an error in the
// log) when Clusters came first.
func TestClusterAPIServedNeedsEveryKind(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(clusterv1.GroupVersion.WithKind("Cluster"), meta.RESTScopeNamespace)
	if served, err := clusterAPIServed(mapper, clusterGroupKind); !served || err != nil {
		t.Errorf("Cluster alone: served=%v err=%v, want served", served, err)
	}
	if served, err := clusterAPIServed(mapper, clusterGroupKind, machineGroupKind); served || err != nil {
		t.Errorf("Cluster and Machine, only Cluster served: served=%v err=%v, want not served", served, err)
	}
	mapper.Add(clusterv1.GroupVersion.WithKind("Machine"), meta.RESTScopeNamespace)
	if served, err := clusterAPIServed(mapper, clusterGroupKind, machineGroupKind); !served || err != nil {
		t.Errorf("both served: served=%v err=%v, want served", served, err)
	}
}

// TestClaimKeepsAMovedMachinesProviderID: clusterctl move and a restore
// give a MailgunMachine a new UID; a claim made after (a dropped pending
// attempt, a resend) keeps the provider ID it has, which the apiserver
// refuses to change, rather than write one from the new UID.
func TestClaimKeepsAMovedMachinesProviderID(t *testing.T) {
	mm := &infrav1.MailgunMachine{ObjectMeta: metav1.ObjectMeta{UID: "new-uid"}}
	mailgunMachineKind.Claimed(mm)
	if mm.Spec.ProviderID != "mailgun://new-uid" {
		t.Errorf("first claim: provider ID %q, want mailgun://new-uid", mm.Spec.ProviderID)
	}
	mm.Spec.ProviderID = "mailgun://old-uid"
	mailgunMachineKind.Claimed(mm)
	if mm.Spec.ProviderID != "mailgun://old-uid" {
		t.Errorf("claim after a move: provider ID %q, want the kept mailgun://old-uid", mm.Spec.ProviderID)
	}
}

// TestMachineDeletedEventSaysWhatToTakeDown: the Deleted event names the
// machine and the accepted email that requested it, also while a resend is
// pending; says when Mailgun confirmed no email; and never shows an empty
// message ID.
func TestMachineDeletedEventSaysWhatToTakeDown(t *testing.T) {
	mm := func(pending string) *infrav1.MailgunMachine {
		m := &infrav1.MailgunMachine{Spec: infrav1.MailgunMachineSpec{ProviderID: "mailgun://uid-1"}}
		if pending != "" {
			m.Annotations = map[string]string{infrav1.MessageIDAnnotation: pending}
		}
		return m
	}
	for _, c := range []struct {
		name               string
		mm                 *infrav1.MailgunMachine
		recorded, accepted string
		want               []string
	}{
		{"accepted", mm("<a@x>"), "<a@x>", "<a@x>", []string{"decommission machine mailgun://uid-1", `"<a@x>"`}},
		{"resend pending", mm("<r@x>"), "", "<b@x>", []string{"decommission machine mailgun://uid-1", `(request email "<b@x>")`, `resend "<r@x>"`}},
		{"claimed, not confirmed", mm("<p@x>"), "", "", []string{"before Mailgun confirmed", `"<p@x>"`, "mailgun://uid-1"}},
		{"never claimed", mm(""), "", "", []string{"before its request email was sent", "no machine was requested"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := machineDeletedMessage(c.mm, c.recorded, c.accepted)
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("message %q does not say %q", got, w)
				}
			}
			if strings.Contains(got, `""`) {
				t.Errorf("message %q shows an empty message ID", got)
			}
		})
	}
}
