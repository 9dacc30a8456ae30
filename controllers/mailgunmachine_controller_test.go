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

package controllers_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/mailgunfake"
)

// bootstrapCanary stands for the join token and CA key a bootstrap Secret
// holds: it must never reach an email, event or log.
const bootstrapCanary = "canary-join-token-7c1e0b9d"

// newBootstrapSecret is a bootstrap data Secret holding the canary, as a
// bootstrap provider writes it.
func newBootstrapSecret(ns, name string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data:       map[string][]byte{"value": []byte("#cloud-config\njoin: " + bootstrapCanary)},
	}
}

// dataSecretPatch sets a bootstrap config's data Secret, as its provider
// does: a merge patch of status, since Cluster API's controllers write the
// config too and an update from an older read would conflict.
func dataSecretPatch(name string) client.Patch {
	return client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"status":{"dataSecretName":%q,"initialization":{"dataSecretCreated":true}}}`, name))
}

// machineFixture is a Cluster whose MailgunCluster is provisioned (set by
// hand, as Cluster API would), and the bootstrap Secret of its machines.
type machineFixture struct {
	*harness
	cluster *clusterv1.Cluster
}

func newMachineFixture(t *testing.T) *machineFixture {
	return machineFixtureIn(newHarness(t))
}

// machineFixtureIn makes the fixture's Cluster prod, its MailgunCluster and
// the bootstrap Secret worker-0-bootstrap in h's namespace.
func machineFixtureIn(h *harness) *machineFixture {
	h.t.Helper()
	cluster, _ := h.createOwned("prod")
	if err := h.c.Create(h.ctx, newBootstrapSecret(h.ns, "worker-0-bootstrap")); err != nil {
		h.t.Fatalf("creating the bootstrap Secret: %v", err)
	}
	return &machineFixture{harness: h, cluster: cluster}
}

// setClusterStatus sets what Cluster API's Cluster controller would.
func (f *machineFixture) setClusterStatus(infra, controlPlane bool) {
	f.t.Helper()
	// A merge patch of status: with Cluster API's Cluster controller
	// running, an update from an older read would conflict.
	patch := []byte(fmt.Sprintf(`{"status":{"initialization":{"infrastructureProvisioned":%t,"controlPlaneInitialized":%t}}}`, infra, controlPlane))
	if err := f.c.Status().Patch(f.ctx, f.cluster.DeepCopy(), client.RawPatch(types.MergePatchType, patch)); err != nil {
		f.t.Fatalf("patching Cluster status: %v", err)
	}
}

func newMailgunMachine(ns, name string) *infrav1.MailgunMachine {
	return &infrav1.MailgunMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: "prod"}},
		Spec:       infrav1.MailgunMachineSpec{Priority: infrav1.PriorityUrgent, Request: "16 GiB of memory, please."},
	}
}

// newMachine is a worker Machine of the Cluster prod naming the
// MailgunMachine mmName.
func newMachine(ns, name, mmName string, dataSecret *string) *clusterv1.Machine {
	return &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			clusterv1.ClusterNameLabel: "prod", clusterv1.MachineDeploymentNameLabel: "prod-md-0",
		}},
		Spec: clusterv1.MachineSpec{
			ClusterName:   "prod",
			Version:       "v1.36.0",
			FailureDomain: "rack-1",
			// The bootstrap provider's config; the test sets its data
			// Secret as that provider would.
			Bootstrap: clusterv1.Bootstrap{DataSecretName: dataSecret, ConfigRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "KubeadmConfig", Name: name,
			}},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "MailgunMachine", Name: mmName},
		},
	}
}

// machineOwner is the owner reference Cluster API's Machine controller sets
// on the Machine's infrastructure.
func machineOwner(m *clusterv1.Machine) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: m.Name, UID: m.UID}
}

// createMachine creates a worker Machine of the Cluster naming the
// existing MailgunMachine mmName, and makes it the MailgunMachine's owner,
// as Cluster API's Machine controller does.
func (f *machineFixture) createMachine(name, mmName string, dataSecret *string) *clusterv1.Machine {
	f.t.Helper()
	m := newMachine(f.ns, name, mmName, dataSecret)
	if err := f.c.Create(f.ctx, m); err != nil {
		f.t.Fatalf("creating Machine: %v", err)
	}
	f.patchMachineObj(mmName, func(mm *infrav1.MailgunMachine) {
		mm.OwnerReferences = append(mm.OwnerReferences, machineOwner(m))
	})
	return m
}

func (f *machineFixture) getMachineObj(name string) *infrav1.MailgunMachine {
	f.t.Helper()
	mm := &infrav1.MailgunMachine{}
	if err := f.c.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: name}, mm); err != nil {
		f.t.Fatalf("getting MailgunMachine %s: %v", name, err)
	}
	return mm
}

func (f *machineFixture) patchMachineObj(name string, mutate func(*infrav1.MailgunMachine)) {
	f.t.Helper()
	mm := f.getMachineObj(name)
	base := mm.DeepCopy()
	mutate(mm)
	if err := f.c.Patch(f.ctx, mm, client.MergeFrom(base)); err != nil {
		f.t.Fatalf("patching MailgunMachine %s: %v", name, err)
	}
}

// waitForMachineReason waits until the MailgunMachine's Ready condition has
// reason, and returns it.
func (f *machineFixture) waitForMachineReason(name, reason string) *infrav1.MailgunMachine {
	f.t.Helper()
	var mm *infrav1.MailgunMachine
	f.eventually(20*time.Second, fmt.Sprintf("Ready reason %s on MailgunMachine %s", reason, name), func() (bool, string) {
		mm = f.getMachineObj(name)
		c := conditions.Get(mm, infrav1.ReadyCondition)
		if c == nil {
			return false, "no Ready condition"
		}
		return c.Reason == reason && c.Message != "", fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
	})
	return mm
}

func (f *machineFixture) machineEmails(name string) []mailgunfake.Message {
	return f.fake.MessagesWithVariable(mailer.VarMachine, f.ns+"/"+name)
}

// TestMailgunMachineWaitsForClusterAPIThenSendsOnce walks a worker's
// MailgunMachine through every wait Cluster API imposes, in order, with no
// email until the Machine's bootstrap data exists; then exactly one email,
// which names the provider ID the MailgunMachine records and where the
// bootstrap data is, and holds none of it.
func TestMailgunMachineWaitsForClusterAPIThenSendsOnce(t *testing.T) {
	f := newMachineFixture(t)
	f.startManager()
	f.waitForAccepted("prod", 20*time.Second)

	if err := f.c.Create(f.ctx, newMailgunMachine(f.ns, "worker-0")); err != nil {
		t.Fatalf("creating MailgunMachine: %v", err)
	}
	f.waitForMachineReason("worker-0", infrav1.WaitingForMachineReason)
	machine := f.createMachine("prod-md-0-abc", "worker-0", nil)
	f.waitForMachineReason("worker-0", infrav1.WaitingForClusterInfrastructureReason)
	f.setClusterStatus(true, false)
	f.waitForMachineReason("worker-0", infrav1.WaitingForControlPlaneInitializedReason)
	f.setClusterStatus(true, true)
	f.waitForMachineReason("worker-0", infrav1.WaitingForBootstrapDataReason)
	if n := len(f.machineEmails("worker-0")); n != 0 {
		t.Fatalf("%d emails sent before the bootstrap data exists, want 0", n)
	}
	base := machine.DeepCopy()
	machine.Spec.Bootstrap.DataSecretName = ptr.To("worker-0-bootstrap")
	if err := f.c.Patch(f.ctx, machine, client.MergeFrom(base)); err != nil {
		t.Fatalf("setting the bootstrap data: %v", err)
	}

	mm := f.waitForMachineReason("worker-0", infrav1.EmailAcceptedReason)
	f.eventually(10*time.Second, "provisioned and messageID", func() (bool, string) {
		mm = f.getMachineObj("worker-0")
		return ptr.Deref(mm.Status.Initialization.Provisioned, false) && mm.Status.MessageID != "", fmt.Sprintf("status %+v", mm.Status)
	})
	if want := "mailgun://" + string(mm.UID); mm.Spec.ProviderID != want {
		t.Errorf("spec.providerID = %q, want %q", mm.Spec.ProviderID, want)
	}
	if mm.Status.FailureDomain != "rack-1" {
		t.Errorf("status.failureDomain = %q, want the Machine's rack-1", mm.Status.FailureDomain)
	}
	for kind, want := range map[string]float64{"MailgunMachine": 1, "MailgunCluster": 1} {
		if got := f.metric("capmg_emails_sent_total", map[string]string{"kind": kind}); got != want {
			t.Errorf("capmg_emails_sent_total{kind=%q} = %v, want %v", kind, got, want)
		}
	}
	emails := f.machineEmails("worker-0")
	if len(emails) != 1 {
		t.Fatalf("%d emails for the MailgunMachine, want 1", len(emails))
	}
	text := emails[0].Subject + "\n" + emails[0].Text
	for _, want := range []string{"worker", f.ns + "/prod", "prod-md-0", "v1.36.0", "rack-1", mm.Spec.ProviderID,
		f.ns + "/worker-0-bootstrap", "16 GiB of memory, please."} {
		if !strings.Contains(text, want) {
			t.Errorf("the email does not name %q:\n%s", want, text)
		}
	}

	// Cluster API's later writes (labels, annotations) send nothing more.
	f.patchMachineObj("worker-0", func(mm *infrav1.MailgunMachine) { mm.Labels["touched"] = "yes" })
	f.consistently(2*time.Second, "one email", func() (bool, string) {
		n := len(f.machineEmails("worker-0"))
		return n == 1, fmt.Sprintf("%d emails", n)
	})

	// Deleting sends nothing and lets the object go.
	if err := f.c.Delete(f.ctx, f.getMachineObj("worker-0")); err != nil {
		t.Fatalf("deleting: %v", err)
	}
	f.eventually(10*time.Second, "the MailgunMachine gone", func() (bool, string) {
		err := f.c.Get(f.ctx, types.NamespacedName{Namespace: f.ns, Name: "worker-0"}, &infrav1.MailgunMachine{})
		return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
	})
	if n := len(f.machineEmails("worker-0")); n != 1 {
		t.Errorf("%d emails after deletion, want 1", n)
	}
	f.noBootstrapDataLeaked()
	f.noErrorLogged()
}

// noBootstrapDataLeaked fails the test if the bootstrap data reached an
// email, an event or the log.
func (f *machineFixture) noBootstrapDataLeaked() {
	f.t.Helper()
	for _, m := range f.fake.Messages() {
		if strings.Contains(m.Subject+m.Text+fmt.Sprint(m.Variables), bootstrapCanary) {
			f.t.Errorf("an email holds the bootstrap data: %s", m.Text)
		}
	}
	events := &eventsv1.EventList{}
	if err := f.c.List(f.ctx, events, client.InNamespace(f.ns)); err != nil {
		f.t.Fatalf("listing events: %v", err)
	}
	for _, e := range events.Items {
		if strings.Contains(e.Note, bootstrapCanary) {
			f.t.Errorf("an event holds the bootstrap data: %s", e.Note)
		}
	}
	if strings.Contains(f.logs.String(), bootstrapCanary) {
		f.t.Error("the operator logged the bootstrap data")
	}
}

// TestCopiedMailgunMachineSendsNothing: a MailgunMachine created with
// another one's provider ID (kubectl get -o yaml | kubectl create) names
// that machine; it says so and sends nothing, even with all Cluster API
// prerequisites met.
func TestCopiedMailgunMachineSendsNothing(t *testing.T) {
	f := newMachineFixture(t)
	f.setClusterStatus(true, true)
	f.startManager()
	copied := newMailgunMachine(f.ns, "copy")
	copied.Spec.ProviderID = "mailgun://0b7c6f64-2f2a-4c8e-9b1e-3f4a5b6c7d8e"
	if err := f.c.Create(f.ctx, copied); err != nil {
		t.Fatalf("creating MailgunMachine: %v", err)
	}
	f.createMachine("prod-md-0-copy", "copy", ptr.To("worker-0-bootstrap"))
	f.waitForMachineReason("copy", infrav1.ProviderIDCopiedReason)
	f.consistently(2*time.Second, "no email", func() (bool, string) {
		n := len(f.machineEmails("copy"))
		return n == 0, fmt.Sprintf("%d emails", n)
	})
	f.noErrorLogged()
}

// TestMailgunMachineRefusesBadInput: the apiserver refuses, with a message
// naming the field, a provider ID changed or removed, fields of the email
// changed after the claim, and templates carrying a provider ID or a send
// record.
func TestMailgunMachineRefusesBadInput(t *testing.T) {
	h := newHarness(t)
	mm := newMailgunMachine(h.ns, "m")
	if err := h.c.Create(h.ctx, mm); err != nil {
		t.Fatalf("creating MailgunMachine: %v", err)
	}
	claimed := mm.DeepCopy()
	claimed.Spec.ProviderID = "mailgun://" + string(mm.UID)
	if err := h.c.Update(h.ctx, claimed); err != nil {
		t.Fatalf("setting the provider ID once: %v", err)
	}
	refused := func(what, field string, err error) {
		t.Helper()
		if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: got %v, want Invalid naming %s", what, err, field)
		}
	}
	for _, c := range []struct {
		what, field string
		mutate      func(*infrav1.MailgunMachine)
	}{
		{"changed provider ID", "spec.providerID", func(m *infrav1.MailgunMachine) {
			m.Spec.ProviderID = "mailgun://00000000-0000-0000-0000-000000000000"
		}},
		{"removed provider ID", "spec.providerID", func(m *infrav1.MailgunMachine) { m.Spec.ProviderID = "" }},
		{"changed priority", "spec.priority", func(m *infrav1.MailgunMachine) { m.Spec.Priority = infrav1.PriorityBusinessCritical }},
		{"changed request", "spec.request", func(m *infrav1.MailgunMachine) { m.Spec.Request = "more memory" }},
	} {
		m := claimed.DeepCopy()
		c.mutate(m)
		refused(c.what, c.field, h.c.Update(h.ctx, m))
	}
	bad := newMailgunMachine(h.ns, "bad")
	bad.Spec.ProviderID = "aws:///i-123"
	refused("foreign provider ID", "spec.providerID", h.c.Create(h.ctx, bad))

	for _, c := range []struct {
		what, field string
		mutate      func(*infrav1.MailgunMachineTemplate)
	}{
		{"template with a provider ID", "spec.template.spec.providerID", func(tm *infrav1.MailgunMachineTemplate) {
			tm.Spec.Template.Spec.ProviderID = "mailgun://0b7c6f64-2f2a-4c8e-9b1e-3f4a5b6c7d8e"
		}},
		{"template with a send record", "spec.template.metadata.annotations", func(tm *infrav1.MailgunMachineTemplate) {
			tm.Spec.Template.ObjectMeta.Annotations = map[string]string{infrav1.AcceptedMessageIDAnnotation: "<x@mg.example.com>"}
		}},
	} {
		tm := &infrav1.MailgunMachineTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "t"},
			Spec:       infrav1.MailgunMachineTemplateSpec{Template: infrav1.MailgunMachineTemplateResource{Spec: infrav1.MailgunMachineSpec{Priority: infrav1.PriorityUrgent}}},
		}
		c.mutate(tm)
		refused(c.what, c.field, h.c.Create(h.ctx, tm))
	}

	// A valid template is accepted, and so is a changed one in the
	// server-side dry-run ClusterClass rotates templates with.
	tm := &infrav1.MailgunMachineTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: infrav1.GroupVersion.String(), Kind: "MailgunMachineTemplate"},
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "workers"},
		Spec:       infrav1.MailgunMachineTemplateSpec{Template: infrav1.MailgunMachineTemplateResource{Spec: infrav1.MailgunMachineSpec{Priority: infrav1.PriorityUrgent}}},
	}
	if err := h.c.Create(h.ctx, tm.DeepCopy()); err != nil {
		t.Fatalf("creating a valid MailgunMachineTemplate: %v", err)
	}
	tm.Spec.Template.Spec.Request = "bigger machines"
	if err := h.c.Patch(h.ctx, tm, client.Apply, client.DryRunAll, client.ForceOwnership, client.FieldOwner("capi-topology")); err != nil { //nolint:staticcheck // ClusterClass's own call
		t.Errorf("a changed template in a server-side dry-run apply: %v", err)
	}
}
