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
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/config"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/metrics"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/send"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/sendprotocol"
)

// TestPauseAfterTheClaimWithholdsTheSend: clusterctl move pauses the
// Cluster, waits for objects carrying clusterctl's block-move annotation,
// then copies. A reconcile that read the Cluster unpaused writes its claim
// with the block, but re-reads the Cluster and (without leader election, as
// here; see TestFenceReadsOnlyWhatTheLeaseDoesNotCover) the object right
// before sending: paused now, by either, it does not send (the copy may be
// made without the claim, and the target would send too). Paused, the
// reconciler drops the unsent claim and the block, and starts no send, so
// the move goes on.
func TestPauseAfterTheClaimWithholdsTheSend(t *testing.T) {
	for _, tc := range []struct {
		name string
		// clusterPaused: clusterctl pauses the Cluster after the
		// reconcile read it, before the claim.
		clusterPaused bool
		// objectPaused: the MailgunCluster gets the paused annotation
		// right after the claim (set before, it would fail the claim's
		// locked write).
		objectPaused bool
	}{
		{name: "the Cluster's spec.paused", clusterPaused: true},
		{name: "the MailgunCluster's paused annotation", objectPaused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The debug lines say why a send was withheld.
			var logged []string
			ctx := ctrl.LoggerInto(context.Background(), funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{Verbosity: 1}))
			cluster, mc := ownedMailgunCluster("moving")
			m := &countingMailer{}
			var funcs *interceptor.Funcs
			if tc.objectPaused {
				funcs = afterTheClaim(func(ann map[string]string) { ann[clusterv1.PausedAnnotation] = "true" })
			}
			c, r := withFakeClient(t, m, fixedSettings{}, funcs, cluster, mc)
			stale := &infrav1.MailgunCluster{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(mc), stale); err != nil {
				t.Fatal(err)
			}
			if tc.clusterPaused {
				cluster.Spec.Paused = ptr.To(true)
				if err := c.Update(ctx, cluster); err != nil {
					t.Fatal(err)
				}
			}
			s := send.NewScope(stale, c)
			res, err := r.EnsureSent(ctx, s, nil, clusterEmail(s.Object))
			if _, err2 := r.Finish(ctx, s, res, err); err2 != nil {
				t.Fatal(err2)
			}
			got := &infrav1.MailgunCluster{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(mc), got); err != nil {
				t.Fatal(err)
			}
			if m.sends.Load() != 0 {
				t.Fatalf("%d sends after the pause, want none", m.sends.Load())
			}
			if !slices.ContainsFunc(logged, func(l string) bool { return strings.Contains(l, "not sending") && strings.Contains(l, "paused") }) {
				t.Fatalf("no line says the fence withheld the send for the pause: %q", logged)
			}
			if got.Annotations[infrav1.SendAttemptedAtAnnotation] == "" || got.Annotations[clusterctlv1.BlockMoveAnnotation] == "" {
				t.Fatalf("annotations %v: want the claim written with the block on clusterctl move", got.Annotations)
			}

			// Paused, the reconciler resolves the attempt once the withheld
			// send's hold ends: known unsent, dropped.
			for range 3 {
				res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(mc)})
				if err != nil {
					t.Fatal(err)
				}
				if res.RequeueAfter <= 0 || res.RequeueAfter > 5*time.Second {
					break
				}
				time.Sleep(res.RequeueAfter)
			}
			if err := c.Get(ctx, client.ObjectKeyFromObject(mc), got); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{infrav1.SendAttemptedAtAnnotation, clusterctlv1.BlockMoveAnnotation} {
				if v, ok := got.Annotations[k]; ok {
					t.Errorf("annotation %s=%q is still there: the move would wait for it", k, v)
				}
			}
			if m.sends.Load() != 0 || m.lookups.Load() != 0 {
				t.Errorf("%d sends and %d lookups while paused, want none: the claim is known unsent", m.sends.Load(), m.lookups.Load())
			}
		})
	}
}

// afterTheClaim lets the first write of a claim land, then changes the
// object's annotations with change, as another writer would right after it.
func afterTheClaim(change func(ann map[string]string)) *interceptor.Funcs {
	var once sync.Once
	return &interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		if err := c.Patch(ctx, obj, patch, opts...); err != nil {
			return err
		}
		var err error
		if obj.GetAnnotations()[infrav1.SendAttemptedAtAnnotation] != "" {
			once.Do(func() {
				live := obj.DeepCopyObject().(client.Object)
				if err = c.Get(ctx, client.ObjectKeyFromObject(obj), live); err == nil {
					ann := live.GetAnnotations()
					change(ann)
					live.SetAnnotations(ann)
					err = c.Update(ctx, live)
				}
			})
		}
		return err
	}}
}

// TestClusterGoneAfterTheClaimWithholdsTheSend: clusterctl move deletes the
// source's Cluster after copying; a reconcile that read it before re-reads
// it right before sending, finds it gone, and does not send.
func TestClusterGoneAfterTheClaimWithholdsTheSend(t *testing.T) {
	ctx := context.Background()
	cluster, mc := ownedMailgunCluster("moved")
	m := &countingMailer{}
	c, r := withFakeClient(t, m, fixedSettings{}, nil, cluster, mc)
	stale := &infrav1.MailgunCluster{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(mc), stale); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	s := send.NewScope(stale, c)
	res, err := r.EnsureSent(ctx, s, nil, clusterEmail(s.Object))
	if _, err := r.Finish(ctx, s, res, err); err != nil {
		t.Fatal(err)
	}
	if n := m.sends.Load(); n != 0 {
		t.Errorf("%d sends after the Cluster was deleted, want none", n)
	}
}

// TestKnownAcceptanceIsRecordedWhateverTheSettings: when the write that
// records an acceptance fails, the accepted ID waits in memory; if the
// settings become unusable meanwhile, it is still recorded (not held back
// behind a settings condition, and lost at the next restart).
func TestKnownAcceptanceIsRecordedWhateverTheSettings(t *testing.T) {
	ctx := context.Background()
	cluster, mc := ownedMailgunCluster("accepted")
	m := &countingMailer{}
	settings := &toggledSettings{}
	var failedRecord atomic.Bool
	funcs := &interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		if obj.GetAnnotations()[infrav1.AcceptedMessageIDAnnotation] != "" && failedRecord.CompareAndSwap(false, true) {
			return errors.New("injected: the record write fails")
		}
		return c.Patch(ctx, obj, patch, opts...)
	}}
	c, r := withFakeClient(t, m, settings, funcs, cluster, mc)
	key := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(mc)}
	if _, err := r.Reconcile(ctx, key); err == nil || !failedRecord.Load() || m.sends.Load() != 1 {
		t.Fatalf("first reconcile: %v after %d sends; want the record write to fail after one send", err, m.sends.Load())
	}
	settings.unusable.Store(true)
	if _, err := r.Reconcile(ctx, key); err != nil {
		t.Fatal(err)
	}
	got := &infrav1.MailgunCluster{}
	if err := c.Get(ctx, key.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	if got.Annotations[infrav1.AcceptedMessageIDAnnotation] != "<accepted@mg.example.com>" || !conditions.IsTrue(got, infrav1.ReadyCondition) || m.sends.Load() != 1 {
		t.Errorf("annotations %v, Ready %+v, %d sends: want the accepted email recorded, Ready, one send",
			got.Annotations, conditions.Get(got, infrav1.ReadyCondition), m.sends.Load())
	}
}

// ownedMailgunCluster is a Cluster and the MailgunCluster it owns and names
// as its infrastructure.
func ownedMailgunCluster(name string) (*clusterv1.Cluster, *infrav1.MailgunCluster) {
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: "uid-cluster-" + types.UID(name)},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "MailgunCluster", Name: name}}}
	mc := &infrav1.MailgunCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: "uid-" + types.UID(name),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: name, UID: cluster.UID}}},
		Spec: infrav1.MailgunClusterSpec{Priority: infrav1.PriorityUrgent, Request: "r", Requester: "ops@example.com"}}
	return cluster, mc
}

// toggledSettings gives fixedSettings until unusable is set.
type toggledSettings struct{ unusable atomic.Bool }

func (s *toggledSettings) For(ctx context.Context, ns string, ref *infrav1.MailgunClusterIdentityReference) (mailer.Settings, *config.Unusable, error) {
	if s.unusable.Load() {
		return mailer.Settings{}, &config.Unusable{Reason: infrav1.MailgunNotConfiguredReason, Message: "the test took the settings away"}, nil
	}
	return fixedSettings{}.For(ctx, ns, ref)
}

// TestRestoredCopyIsNotProvisionedBeforeItsEmail: a copy restored under a
// new name with the original's annotations and status (Velero, GitOps)
// drops the copied record and starts as a new object: not provisioned, no
// message ID, no Ready, until its own email is accepted. Here Mailgun
// cannot be reached, so the copy's email is not accepted yet.
func TestRestoredCopyIsNotProvisionedBeforeItsEmail(t *testing.T) {
	ctx := context.Background()
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "copy", UID: "uid-cluster"},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "MailgunCluster", Name: "copy"}}}
	restored := &infrav1.MailgunCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "copy", UID: "uid-copy",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: "copy", UID: "uid-cluster"}},
		Annotations: map[string]string{
			infrav1.SentForAnnotation:           "ns/original",
			infrav1.MessageIDAnnotation:         "<mailguncluster.uid-original@mg.example.com>",
			infrav1.AcceptedMessageIDAnnotation: "<original@mg.example.com>",
		}},
		Spec: infrav1.MailgunClusterSpec{Priority: infrav1.PriorityUrgent, Request: "r", Requester: "ops@example.com"},
		Status: infrav1.MailgunClusterStatus{MessageID: "<original@mg.example.com>",
			Initialization: infrav1.MailgunClusterInitializationStatus{Provisioned: ptr.To(true)}}}
	send.SetEmailSent(restored, metav1.ConditionTrue, infrav1.EmailAcceptedReason, "Mailgun accepted the request email, message ID <original@mg.example.com>")
	c, r := withFakeClient(t, unreachableMailer{}, fixedSettings{}, nil, cluster, restored)
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(restored)}); err != nil {
		t.Fatal(err)
	}
	got := &infrav1.MailgunCluster{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(restored), got); err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(got.Status.Initialization.Provisioned, false) || got.Status.MessageID != "" || conditions.IsTrue(got, infrav1.ReadyCondition) {
		t.Errorf("provisioned %v, messageID %q, Ready %+v: want a copy without its own email not provisioned, without an ID, not Ready",
			got.Status.Initialization.Provisioned, got.Status.MessageID, conditions.Get(got, infrav1.ReadyCondition))
	}
}

// withFakeClient returns controller-runtime's fake client holding objs (its
// calls intercepted by funcs, if not nil), and a reconciler on it that
// sends through m with settings.
func withFakeClient(t *testing.T, m send.Mailer, settings send.SettingsSource, funcs *interceptor.Funcs, objs ...client.Object) (client.Client, *MailgunClusterReconciler) {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{infrav1.AddToScheme, clusterv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	var withStatus []client.Object
	for _, obj := range objs {
		if _, ok := obj.(*infrav1.MailgunCluster); ok {
			withStatus = append(withStatus, obj)
		}
	}
	b := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(withStatus...)
	if funcs != nil {
		b = b.WithInterceptorFuncs(*funcs)
	}
	c := b.Build()
	r := NewMailgunClusterReconciler(send.Sender{
		Client: c, APIReader: c, Recorder: events.NewFakeRecorder(100), Settings: settings, Metrics: metrics.New(),
		NewMailer: func(mailer.Settings) send.Mailer { return m },
		Protocol: sendprotocol.Protocol{Holder: "test", SettleTime: time.Hour, RecheckInterval: time.Minute,
			Backoff: time.Second, MaxBackoff: time.Minute, ConflictDelay: time.Second},
		Deliveries: &send.DeliveryTracker{Interval: time.Hour}, DeliveryTrackingTimeout: 24 * time.Hour,
	})
	r.clusterAPI.Store(true)
	return c, r
}

// unreachableMailer fails every call as a refused connection.
type unreachableMailer struct{}

func (unreachableMailer) Send(context.Context, mailer.Request) (string, error) {
	return "", &mailer.SendError{Class: mailer.ClassUnreachable, Message: "connection refused"}
}

func (unreachableMailer) WasAccepted(context.Context, string) (bool, error) {
	return false, &mailer.SendError{Class: mailer.ClassUnreachable, Message: "connection refused"}
}

// countingMailer accepts every send and finds nothing in its events.
type countingMailer struct{ sends, lookups atomic.Int64 }

func (m *countingMailer) Send(context.Context, mailer.Request) (string, error) {
	m.sends.Add(1)
	return "<accepted@mg.example.com>", nil
}

func (m *countingMailer) WasAccepted(context.Context, string) (bool, error) {
	m.lookups.Add(1)
	return false, nil
}

// fixedSettings gives the same usable settings to every object.
type fixedSettings struct{}

func (fixedSettings) For(context.Context, string, *infrav1.MailgunClusterIdentityReference) (mailer.Settings, *config.Unusable, error) {
	return mailer.Settings{Domain: "mg.example.com", APIKey: "key", Recipient: "requests@example.com", APIBase: "https://api.mailgun.net/v3"}, nil, nil
}

// TestPausedHooksReadTheLiveCluster: the check right before a send, for
// each kind, on the object as read live. A Cluster paused or gone since the
// reconcile read it, or a MailgunMachine whose cluster-name label was
// removed since (it then names no Cluster to check), means no send.
func TestPausedHooksReadTheLiveCluster(t *testing.T) {
	cluster, mc := ownedMailgunCluster("live")
	paused := cluster.DeepCopy()
	paused.Spec.Paused = ptr.To(true)
	machine := func(label bool) *infrav1.MailgunMachine {
		mm := &infrav1.MailgunMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "live-md-0"}}
		if label {
			mm.Labels = map[string]string{clusterv1.ClusterNameLabel: cluster.Name}
		}
		return mm
	}
	for _, tc := range []struct {
		name    string
		cluster *clusterv1.Cluster // nil: gone
		check   func(context.Context, client.Reader) (bool, error)
		want    bool
	}{
		{"MailgunCluster, Cluster running", cluster, mcPaused(mc), false},
		{"MailgunCluster, Cluster paused", paused, mcPaused(mc), true},
		{"MailgunCluster, Cluster gone", nil, mcPaused(mc), true},
		{"MailgunMachine, Cluster running", cluster, mmPaused(machine(true)), false},
		{"MailgunMachine, Cluster paused", paused, mmPaused(machine(true)), true},
		{"MailgunMachine, Cluster gone", nil, mmPaused(machine(true)), true},
		{"MailgunMachine, cluster-name label removed", cluster, mmPaused(machine(false)), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []client.Object
			if tc.cluster != nil {
				objs = append(objs, tc.cluster.DeepCopy())
			}
			c, _ := withFakeClient(t, &countingMailer{}, fixedSettings{}, nil, objs...)
			got, err := tc.check(context.Background(), c)
			if err != nil || got != tc.want {
				t.Errorf("paused = %v, %v; want %v, nil", got, err, tc.want)
			}
		})
	}
}

func mcPaused(mc *infrav1.MailgunCluster) func(context.Context, client.Reader) (bool, error) {
	return func(ctx context.Context, r client.Reader) (bool, error) { return mailgunClusterKind.Paused(ctx, r, mc) }
}

func mmPaused(mm *infrav1.MailgunMachine) func(context.Context, client.Reader) (bool, error) {
	return func(ctx context.Context, r client.Reader) (bool, error) { return mailgunMachineKind.Paused(ctx, r, mm) }
}
