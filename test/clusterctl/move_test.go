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

package clusterctl_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctlclient "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/logbuf"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/mailgunfake"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/poll"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/testenv"
)

const (
	moveDomain    = "mg.move.example.com"
	moveAPIKey    = "key-move-1f2e3d4c5b6a" //nolint:gosec // G101: a made-up key for the Mailgun fake
	moveRecipient = "requests@example.com"
	moveNamespace = "team-a"
)

// managementCluster is one control plane prepared as clusterctl init
// leaves it, with our operator running against it.
type managementCluster struct {
	name       string
	env        *testenv.Env
	kubeconfig string
	logs       *logbuf.Buffer
}

func startManagementCluster(ctx context.Context, t *testing.T, name string, fake *mailgunfake.Server) *managementCluster {
	t.Helper()
	env, err := testenv.Start()
	if err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	m := &managementCluster{name: name, env: env}
	if m.kubeconfig, err = env.WriteKubeconfig(t.TempDir(), name); err != nil {
		t.Fatal(err)
	}
	if err := testenv.PrepareForClusterctl(ctx, m.kubeconfig, testenv.CoreProvider(), testenv.InfrastructureProvider()); err != nil {
		t.Fatalf("preparing %s for clusterctl: %v", name, err)
	}
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: moveNamespace}}); err != nil {
		t.Fatal(err)
	}
	m.logs = testenv.RunOperator(ctx, t, name, env.Config, testenv.Settings(moveDomain, moveAPIKey, moveRecipient, fake.APIBase()))
	return m
}

// TestMoveKeepsTheEmailRecord moves a cluster whose emails were sent (the
// cluster's and a machine's) from one management cluster to another with
// clusterctl's own move (the code of `clusterctl move`, v1.14.2), with the
// operator running on both: no second email, the moved MailgunCluster is
// Ready with the same message ID, the moved MailgunMachine keeps its
// provider ID and record, and neither operator logs an error.
func TestMoveKeepsTheEmailRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two control planes: run by make test, not make test-unit")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	fake := mailgunfake.Start(moveDomain, moveAPIKey)
	defer fake.Close()
	source := startManagementCluster(ctx, t, "source", fake)
	target := startManagementCluster(ctx, t, "target", fake)

	cluster, mc := source.createCluster(ctx, t, "prod")
	sentID := waitReady(ctx, t, source, "prod")
	mm := source.createMachine(ctx, t, cluster, "prod-worker-0")
	if err := testenv.StandInControlPlane(ctx, source.env.Client, cluster); err != nil {
		t.Fatal(err)
	}

	move(ctx, t, source, target)

	movedMM := &infrav1.MailgunMachine{}
	if err := target.env.Client.Get(ctx, client.ObjectKeyFromObject(mm), movedMM); err != nil {
		t.Fatalf("the MailgunMachine was not moved: %v", err)
	}
	if movedMM.Spec.ProviderID != mm.Spec.ProviderID || movedMM.Annotations[infrav1.AcceptedMessageIDAnnotation] != mm.Status.MessageID {
		t.Errorf("the moved MailgunMachine has provider ID %q and record %q, want %q and %q",
			movedMM.Spec.ProviderID, movedMM.Annotations[infrav1.AcceptedMessageIDAnnotation], mm.Spec.ProviderID, mm.Status.MessageID)
	}

	if got := waitReady(ctx, t, target, "prod"); got != sentID {
		t.Errorf("the moved MailgunCluster records %q, want the email sent before the move, %q", got, sentID)
	}
	if ok, state := poll.Until(ctx, 30*time.Second, 200*time.Millisecond, func() (bool, string) {
		err := source.env.Client.Get(ctx, client.ObjectKeyFromObject(mc), &infrav1.MailgunCluster{})
		return apierrors.IsNotFound(err), fmt.Sprintf("source MailgunCluster: %v", err)
	}); !ok {
		t.Errorf("the source still has the MailgunCluster: %s", state)
	}
	// Give the target's operator time to act on the moved object.
	time.Sleep(2 * time.Second)
	if n := len(fake.MessagesWithVariable(mailer.VarCluster, moveNamespace+"/prod")); n != 1 {
		t.Errorf("%d emails, want the one sent before the move", n)
	}
	if n := len(fake.MessagesWithVariable(mailer.VarMachine, moveNamespace+"/prod-worker-0")); n != 1 {
		t.Errorf("%d machine emails, want the one sent before the move", n)
	}
	noErrorLogged(t, source, target)
}

// createMachine gives the Cluster a worker Machine and its MailgunMachine,
// as Cluster API would (its infrastructure provisioned, the Machine's
// bootstrap data set), and waits for the MailgunMachine's email.
func (m *managementCluster) createMachine(ctx context.Context, t *testing.T, cluster *clusterv1.Cluster, name string) *infrav1.MailgunMachine {
	t.Helper()
	c := m.env.Client
	cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	cluster.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	if err := c.Status().Update(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{clusterv1.ClusterNameLabel: cluster.Name}
	machine := &clusterv1.Machine{
		// Cluster API's Machine controller makes the Cluster own a Machine
		// that nothing else owns; move carries what the Cluster owns.
		ObjectMeta: metav1.ObjectMeta{Namespace: moveNamespace, Name: name, Labels: labels, OwnerReferences: []metav1.OwnerReference{testenv.OwnerRef(cluster)}},
		Spec: clusterv1.MachineSpec{
			ClusterName: cluster.Name,
			Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To(name + "-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "MailgunMachine", Name: name,
			},
		},
	}
	if err := c.Create(ctx, machine); err != nil {
		t.Fatal(err)
	}
	mm := &infrav1.MailgunMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: moveNamespace, Name: name, Labels: labels, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: name, UID: machine.UID,
		}}},
		Spec: infrav1.MailgunMachineSpec{Priority: infrav1.PriorityUrgent},
	}
	if err := c.Create(ctx, mm); err != nil {
		t.Fatal(err)
	}
	if ok, state := poll.Until(ctx, 30*time.Second, 200*time.Millisecond, func() (bool, string) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(mm), mm); err != nil {
			return false, err.Error()
		}
		return mm.Status.MessageID != "" && mm.Spec.ProviderID != "", fmt.Sprintf("conditions %+v", mm.Status.Conditions)
	}); !ok {
		t.Fatalf("the MailgunMachine's email was not accepted: %s", state)
	}
	// The builder started the machine with the provider ID and its Node
	// joined: clusterctl moves only clusters whose machines have Nodes.
	machine.Spec.ProviderID = mm.Spec.ProviderID
	if err := c.Update(ctx, machine); err != nil {
		t.Fatal(err)
	}
	machine.Status.NodeRef = clusterv1.MachineNodeReference{Name: name}
	if err := c.Status().Update(ctx, machine); err != nil {
		t.Fatal(err)
	}
	return mm
}

// TestMoveWaitsForAHeldSend moves a cluster while its email's outcome is
// not known: Mailgun queued it but answered 503, and its events lag. The
// source's claim carries clusterctl's block-move annotation, so the move
// (clusterctl's own code) waits; the paused source keeps looking the
// message up, records it and lifts the block; the copy then carries the
// accepted record, not a pending claim, and there is one email.
func TestMoveWaitsForAHeldSend(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two control planes: run by make test, not make test-unit")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	fake := mailgunfake.Start(moveDomain, moveAPIKey)
	defer fake.Close()
	fake.FailSends(mailgunfake.Fault{Kind: mailgunfake.AcceptAndFail, Status: 503, Body: `{"message":"internal error"}`})
	fake.SetEventLag(8 * time.Second)
	source := startManagementCluster(ctx, t, "source", fake)
	target := startManagementCluster(ctx, t, "target", fake)

	cluster, mc := source.createCluster(ctx, t, "held")
	if ok, state := poll.Until(ctx, 30*time.Second, 100*time.Millisecond, func() (bool, string) {
		got := &infrav1.MailgunCluster{}
		if err := source.env.Client.Get(ctx, client.ObjectKeyFromObject(mc), got); err != nil {
			return false, err.Error()
		}
		_, blocked := got.Annotations[clusterctlv1.BlockMoveAnnotation]
		return blocked && got.Annotations[infrav1.SendAttemptedAtAnnotation] != "" && len(fake.Messages()) == 1,
			fmt.Sprintf("annotations %v, %d messages", got.Annotations, len(fake.Messages()))
	}); !ok {
		t.Fatalf("no held send with a block on clusterctl move: %s", state)
	}
	if err := testenv.StandInControlPlane(ctx, source.env.Client, cluster); err != nil {
		t.Fatal(err)
	}

	move(ctx, t, source, target)
	moved := &infrav1.MailgunCluster{}
	if err := target.env.Client.Get(ctx, client.ObjectKeyFromObject(mc), moved); err != nil {
		t.Fatal(err)
	}
	if moved.Annotations[infrav1.AcceptedMessageIDAnnotation] == "" {
		t.Errorf("the copy carries %v: want the accepted record, the move having waited for the held send", moved.Annotations)
	}
	if id := waitReady(ctx, t, target, "held"); id != fake.Messages()[0].ID {
		t.Errorf("the moved MailgunCluster records %q, want the held email %q", id, fake.Messages()[0].ID)
	}
	// Give the target's operator time to act on the moved object.
	time.Sleep(2 * time.Second)
	if n := len(fake.MessagesWithVariable(mailer.VarCluster, moveNamespace+"/held")); n != 1 {
		t.Errorf("%d emails, want 1", n)
	}
	noErrorLogged(t, source, target)
}

// createCluster creates a Cluster and the MailgunCluster it owns, name.
func (m *managementCluster) createCluster(ctx context.Context, t *testing.T, name string) (*clusterv1.Cluster, *infrav1.MailgunCluster) {
	t.Helper()
	cluster := testenv.ClusterFor(moveNamespace, name)
	if err := m.env.Client.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	mc := &infrav1.MailgunCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: moveNamespace, Name: name, OwnerReferences: []metav1.OwnerReference{testenv.OwnerRef(cluster)}},
		Spec:       infrav1.MailgunClusterSpec{Priority: infrav1.PriorityUrgent, Request: "Three nodes, please.", Requester: "alice@example.com"},
	}
	if err := m.env.Client.Create(ctx, mc); err != nil {
		t.Fatal(err)
	}
	return cluster, mc
}

// move runs clusterctl's own move of moveNamespace from source to target.
func move(ctx context.Context, t *testing.T, source, target *managementCluster) {
	t.Helper()
	cc, err := clusterctlclient.New(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := cc.Move(ctx, clusterctlclient.MoveOptions{
		FromKubeconfig: clusterctlclient.Kubeconfig{Path: source.kubeconfig},
		ToKubeconfig:   clusterctlclient.Kubeconfig{Path: target.kubeconfig},
		Namespace:      moveNamespace,
	}); err != nil {
		t.Fatalf("clusterctl move: %v", err)
	}
}

// noErrorLogged fails the test for every error line an operator logged.
func noErrorLogged(t *testing.T, clusters ...*managementCluster) {
	t.Helper()
	for _, m := range clusters {
		for _, line := range m.logs.ErrorLines() {
			t.Errorf("%s's operator logged an error: %s", m.name, line)
		}
	}
}

// waitReady waits until the MailgunCluster is Ready and returns its
// recorded message ID.
func waitReady(ctx context.Context, t *testing.T, m *managementCluster, name string) string {
	t.Helper()
	var id string
	if ok, state := poll.Until(ctx, 60*time.Second, 200*time.Millisecond, func() (bool, string) {
		mc := &infrav1.MailgunCluster{}
		if err := m.env.Client.Get(ctx, client.ObjectKey{Namespace: moveNamespace, Name: name}, mc); err != nil {
			return false, err.Error()
		}
		id = mc.Status.MessageID
		c := conditions.Get(mc, infrav1.ReadyCondition)
		return conditions.IsTrue(mc, infrav1.ReadyCondition) && id != "", fmt.Sprintf("Ready %+v, messageID %q", c, id)
	}); !ok {
		t.Fatalf("%s/%s in %s not Ready: %s", moveNamespace, name, m.name, state)
	}
	return id
}
