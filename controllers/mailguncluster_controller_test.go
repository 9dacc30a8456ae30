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
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/contract"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/config"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/operator"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/mailgunfake"
)

func TestSendsOneEmailForAnOwnedMailgunCluster(t *testing.T) {
	h := newHarness(t)
	h.startManager()
	_, created := h.createOwned("happy")

	mc := h.waitForAccepted("happy", 30*time.Second)

	emails := h.emailsFor("happy")
	if len(emails) != 1 {
		t.Fatalf("got %d emails, want exactly 1", len(emails))
	}
	e := emails[0]
	wantID := fmt.Sprintf("<mailguncluster.%s@%s>", created.UID, testDomain)
	for _, c := range []struct{ field, got, want string }{
		{"message ID", e.ID, wantID},
		{"subject", e.Subject, "[Urgent] New Cluster requested"},
		{"body", e.Text, "Hello! One cluster please.\n\nThree control plane nodes, please.\n"},
		{"from", e.From, "Cluster API Mailgun Provider <cluster-api@mg.example.com>"},
		{"to", strings.Join(e.To, ","), testRecipient},
		{"reply-to", e.ReplyTo, "alice@example.com"},
		{"status.messageID", mc.Status.MessageID, wantID},
		{"accepted annotation", mc.Annotations[infrav1.AcceptedMessageIDAnnotation], wantID},
		{"message-id annotation", mc.Annotations[infrav1.MessageIDAnnotation], wantID},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.field, c.got, c.want)
		}
	}
	if _, pending := mc.Annotations[infrav1.SendAttemptedAtAnnotation]; pending {
		t.Errorf("send-attempted-at annotation still present after the email was recorded")
	}
	if !ptr.Deref(mc.Status.Initialization.Provisioned, false) {
		t.Errorf("status.initialization.provisioned is not true")
	}
	if !conditions.IsTrue(mc, infrav1.ReadyCondition) || !conditions.IsFalse(mc, infrav1.PausedCondition) {
		t.Errorf("conditions = %+v, want Ready=True and Paused=False", mc.Status.Conditions)
	}
	if mc.Status.ObservedGeneration != mc.Generation {
		t.Errorf("observedGeneration = %d, want %d", mc.Status.ObservedGeneration, mc.Generation)
	}
	if !hasFinalizer(mc) {
		t.Errorf("finalizer %s missing", infrav1.ClusterFinalizer)
	}
	h.eventually(10*time.Second, "an EmailSent event", func() (bool, string) {
		for _, e := range h.events("happy") {
			if e.Reason == infrav1.EmailSentCondition && e.Type == corev1.EventTypeNormal {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(h.events("happy")))
	})

	for _, m := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"capmg_emails_sent_total", nil, 1},
		{"capmg_email_send_duration_seconds", map[string]string{"result": "accepted"}, 1},
		{"capmg_email_send_failures_total", nil, 0},
	} {
		if got := h.metric(m.name, m.labels); got != m.want {
			t.Errorf("metric %s%v = %v, want %v", m.name, m.labels, got, m.want)
		}
	}

	// Later reconciles (the resync of a restart included) send nothing more.
	h.stopManager()
	h.startManager()
	h.consistently(2*time.Second, "exactly one email", func() (bool, string) {
		n := len(h.emailsFor("happy"))
		return n == 1, fmt.Sprintf("%d emails", n)
	})
}

// Each reconcile builds its Mailgun client from the current settings; the
// connections to Mailgun must still be shared, or every email costs a new
// connection (and TLS handshake) and leaves an idle one behind.
func TestMailgunConnectionsAreReused(t *testing.T) {
	h := newHarness(t)
	h.startManager(func(o *operator.Options) { o.Concurrency = 2 })
	const n = 6
	for i := range n {
		h.createOwned(fmt.Sprintf("conn-%d", i))
	}
	for i := range n {
		h.waitForAccepted(fmt.Sprintf("conn-%d", i), 30*time.Second)
	}
	// Two workers plus the credentials check's domain lookup.
	if got := h.fake.Connections(); got > 3 {
		t.Errorf("%d emails with 2 workers opened %d connections to Mailgun, want at most 3", n, got)
	}
}

func TestWaitsForTheOwnerCluster(t *testing.T) {
	h := newHarness(t)
	h.startManager()
	mc := newMailgunCluster(h.ns, "orphan")
	if err := h.c.Create(h.ctx, mc); err != nil {
		t.Fatalf("creating MailgunCluster: %v", err)
	}
	got := h.waitForReason("orphan", infrav1.WaitingForClusterReason, 20*time.Second)
	if !conditions.IsFalse(got, infrav1.ReadyCondition) {
		t.Errorf("Ready should be False while waiting for the Cluster")
	}
	h.consistently(time.Second, "no email without an owner Cluster", func() (bool, string) {
		return len(h.fake.Messages()) == 0, "an email was sent"
	})

	// Cluster API sets the owner reference once a Cluster refers to it.
	cluster := h.createCluster("orphan")
	got = h.get("orphan")
	ownedBy(got, cluster)
	if err := h.c.Update(h.ctx, got); err != nil {
		t.Fatalf("setting owner reference: %v", err)
	}
	h.waitForAccepted("orphan", 20*time.Second)
	if n := len(h.emailsFor("orphan")); n != 1 {
		t.Errorf("got %d emails, want 1", n)
	}
}

func TestHonoursPause(t *testing.T) {
	tests := []struct {
		name string
		// viaCluster pauses through Cluster.spec.paused, else through the
		// annotation on the MailgunCluster.
		viaCluster bool
	}{
		{name: "cluster spec.paused", viaCluster: true},
		{name: "paused annotation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.startManager()
			cluster := h.createCluster("paused", func(c *clusterv1.Cluster) { c.Spec.Paused = ptr.To(tt.viaCluster) })
			mc := newMailgunCluster(h.ns, "paused")
			ownedBy(mc, cluster)
			if !tt.viaCluster {
				mc.Annotations = map[string]string{clusterv1.PausedAnnotation: "true"}
			}
			if err := h.c.Create(h.ctx, mc); err != nil {
				t.Fatalf("creating MailgunCluster: %v", err)
			}
			h.eventually(20*time.Second, "Paused=True", func() (bool, string) {
				got := h.get("paused")
				return conditions.IsTrue(got, infrav1.PausedCondition), fmt.Sprintf("%+v", got.Status.Conditions)
			})
			h.consistently(time.Second, "no email while paused", func() (bool, string) {
				return len(h.fake.Messages()) == 0, "an email was sent"
			})

			if tt.viaCluster {
				patchObj(h, cluster, func() { cluster.Spec.Paused = ptr.To(false) })
			} else {
				mc := h.get("paused")
				patchObj(h, mc, func() { delete(mc.Annotations, clusterv1.PausedAnnotation) })
			}
			got := h.waitForAccepted("paused", 20*time.Second)
			if !conditions.IsFalse(got, infrav1.PausedCondition) {
				t.Errorf("Paused should be False after unpausing")
			}
		})
	}
}

func TestDeletionRemovesTheFinalizer(t *testing.T) {
	h := newHarness(t)
	h.startManager()
	h.createOwned("doomed")
	mc := h.waitForAccepted("doomed", 20*time.Second)

	if err := h.c.Delete(h.ctx, mc); err != nil {
		t.Fatalf("deleting: %v", err)
	}
	h.eventually(20*time.Second, "the MailgunCluster to be gone", func() (bool, string) {
		err := h.c.Get(h.ctx, client.ObjectKeyFromObject(mc), &infrav1.MailgunCluster{})
		return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
	})
	if n := len(h.emailsFor("doomed")); n != 1 {
		t.Errorf("got %d emails, want 1", n)
	}
}

func TestMailgunFailures(t *testing.T) {
	tests := []struct {
		name string
		// setup prepares the failure before the MailgunCluster is created.
		setup func(h *harness)
		// reason is the EmailSent reason while it fails.
		reason string
		// fix ends the failure; nil means it is terminal.
		fix func(h *harness)
		// maxSends bounds the send requests while failing, to catch hot loops.
		maxSends int
	}{
		{
			name:   "invalid API key",
			setup:  func(h *harness) { h.env[config.EnvAPIKey] = "key-wrong" },
			reason: infrav1.InvalidCredentialsReason,
			fix: func(h *harness) {
				// Fixing the Secret applies without a restart.
				createSecret(h, testAPIKey)
			},
			maxSends: 4,
		},
		{
			name:     "sandbox recipient not authorised",
			setup:    func(h *harness) { h.fake.AuthorizeRecipients("someone-else@example.com") },
			reason:   infrav1.RecipientNotAuthorizedReason,
			fix:      func(h *harness) { h.fake.AuthorizeRecipients(testRecipient) },
			maxSends: 4,
		},
		{
			name: "rejected message",
			setup: func(h *harness) {
				h.fake.FailSends(mailgunfake.StatusFault(400, "'to' parameter is not a valid address"))
			},
			reason:   infrav1.MessageRejectedReason,
			maxSends: 1,
		},
		{
			name: "rate limited with reset",
			setup: func(h *harness) {
				h.fake.FailSends(mailgunfake.Fault{Kind: mailgunfake.Status, Status: http.StatusTooManyRequests,
					Body: `{"message":"too many requests"}`, Header: http.Header{"Retry-After": {"2"}}})
			},
			reason:   infrav1.RateLimitedReason,
			fix:      func(*harness) {},
			maxSends: 1,
		},
		{
			name: "server errors",
			setup: func(h *harness) {
				h.failWhileMailgunDown()
				h.mailgunDown.Store(true)
			},
			reason: infrav1.MailgunUnavailableReason,
			fix:    func(h *harness) { h.mailgunDown.Store(false) },
			// A 5xx may mean the message was queued: it is looked up
			// (with backoff) and never sent again blindly.
			maxSends: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			tt.setup(h)
			h.startManager()
			h.createOwned("failing")

			mc := h.waitForReason("failing", tt.reason, 20*time.Second)
			if !conditions.IsFalse(mc, infrav1.ReadyCondition) || conditions.GetReason(mc, infrav1.ReadyCondition) != tt.reason {
				t.Errorf("Ready should be False with reason %s: %+v", tt.reason, mc.Status.Conditions)
			}
			if strings.Contains(conditions.GetMessage(mc, infrav1.EmailSentCondition), testAPIKey) {
				t.Errorf("condition message reveals the API key")
			}
			h.eventually(10*time.Second, "a warning event", func() (bool, string) {
				for _, e := range h.events("failing") {
					if e.Type == corev1.EventTypeWarning && e.Reason == tt.reason {
						return true, ""
					}
				}
				return false, "none yet"
			})
			// Every send request so far failed; the metric counts each.
			h.eventually(5*time.Second, "the failure metric to count every failed send", func() (bool, string) {
				sends, _ := h.fake.Requests()
				failures := h.metric("capmg_email_send_failures_total", nil)
				return float64(sends) == failures, fmt.Sprintf("%d send requests, capmg_email_send_failures_total %v", sends, failures)
			})
			if tt.fix == nil {
				h.consistently(2*time.Second, "no retry of a rejected message", func() (bool, string) {
					sends, _ := h.fake.Requests()
					return sends <= tt.maxSends && len(h.fake.Messages()) == 0, fmt.Sprintf("%d send requests", sends)
				})
				return
			}
			if sends, _ := h.fake.Requests(); sends > tt.maxSends {
				t.Errorf("%d send requests while failing, want at most %d: retrying too eagerly", sends, tt.maxSends)
			}
			tt.fix(h)
			h.waitForAccepted("failing", 30*time.Second)
			if n := len(h.emailsFor("failing")); n != 1 {
				t.Errorf("got %d emails, want exactly 1", n)
			}
		})
	}
}

func TestEventsUnavailableDoesNotResendBlindly(t *testing.T) {
	h := newHarness(t)
	h.fake.FailSends(mailgunfake.Fault{Kind: mailgunfake.AcceptAndDropReply})
	var eventsDown atomic.Bool
	eventsDown.Store(true)
	h.fake.SetFaultFunc(func(endpoint string) *mailgunfake.Fault {
		if endpoint == "events" && eventsDown.Load() {
			f := mailgunfake.StatusFault(503, "events unavailable")
			return &f
		}
		return nil
	})
	h.startManager()
	h.createOwned("undecided")

	h.waitForReason("undecided", infrav1.MailgunUnavailableReason, 20*time.Second)
	got := h.get("undecided")
	if msg := conditions.GetMessage(got, infrav1.EmailSentCondition); !strings.Contains(msg, "earlier send attempt") {
		t.Errorf("EmailSent message %q should say the earlier attempt could not be checked", msg)
	}
	h.consistently(2*time.Second, "no resend while the outcome cannot be decided", func() (bool, string) {
		sends, _ := h.fake.Requests()
		return sends == 1, fmt.Sprintf("%d send requests", sends)
	})
	eventsDown.Store(false)
	h.waitForAccepted("undecided", 30*time.Second)
	if n := len(h.emailsFor("undecided")); n != 1 {
		t.Errorf("got %d emails, want exactly 1", n)
	}
}

func TestMissingConfigurationRecoversWithoutRestart(t *testing.T) {
	h := newHarness(t)
	h.env = map[string]string{config.EnvAPIBase: h.fake.APIBase()}
	h.startManager()
	h.createOwned("unconfigured")

	mc := h.waitForReason("unconfigured", infrav1.MailgunNotConfiguredReason, 20*time.Second)
	msg := conditions.GetMessage(mc, infrav1.EmailSentCondition)
	for _, want := range []string{
		`key "mailgun_domain" of ConfigMap ` + h.ns + "/" + config.DefaultConfigMapName,
		`key "api_key" of Secret ` + h.ns + "/" + config.DefaultSecretName,
		`key "mail_recipient"`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("condition message %q does not say %q", msg, want)
		}
	}

	createSecret(h, testAPIKey)
	cm := newConfigMap(h.ns, map[string]string{
		config.ConfigMapDomainKey: testDomain, config.ConfigMapRecipientKey: testRecipient,
		config.ConfigMapAPIBaseKey: h.fake.APIBase(),
	})
	if err := setSettings(h, cm); err != nil {
		t.Fatalf("creating ConfigMap: %v", err)
	}
	h.waitForAccepted("unconfigured", 20*time.Second)
}

func TestRecordedEmailSurvivesMove(t *testing.T) {
	// clusterctl move recreates objects with their metadata but without
	// status; the annotation is what prevents a second email.
	h := newHarness(t)
	h.startManager()
	cluster := h.createCluster("moved")
	mc := newMailgunCluster(h.ns, "moved")
	ownedBy(mc, cluster)
	const earlierID = "<mailguncluster.old-uid@mg.example.com>"
	mc.Annotations = map[string]string{
		infrav1.MessageIDAnnotation:         earlierID,
		infrav1.AcceptedMessageIDAnnotation: earlierID,
		// Same namespace and name: the same object, moved.
		infrav1.SentForAnnotation: h.ns + "/moved",
	}
	if err := h.c.Create(h.ctx, mc); err != nil {
		t.Fatalf("creating MailgunCluster: %v", err)
	}
	got := h.waitForAccepted("moved", 20*time.Second)
	if got.Status.MessageID != earlierID {
		t.Errorf("status.messageID = %q, want the moved record %q", got.Status.MessageID, earlierID)
	}
	if sends, _ := h.fake.Requests(); sends != 0 {
		t.Errorf("%d send requests for an object whose email was already sent", sends)
	}
}

// TestEmailFieldsAreImmutable: the fields that go into the email are
// frozen from creation, whatever status says (it may be lost, e.g. by
// clusterctl move); spec.controlPlaneEndpoint stays settable, as Cluster
// API's contract needs.
func TestEmailFieldsAreImmutable(t *testing.T) {
	h := newHarness(t)
	h.startManager()
	h.createOwned("frozen")
	h.waitForAccepted("frozen", 20*time.Second)
	// No status at all: nothing was sent for it yet.
	unsent := newMailgunCluster(h.ns, "unsent")
	if err := h.c.Create(h.ctx, unsent); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		field  string
		mutate func(*infrav1.MailgunCluster)
	}{
		{"spec.priority", func(mc *infrav1.MailgunCluster) { mc.Spec.Priority = infrav1.PriorityBusinessCritical }},
		{"spec.request", func(mc *infrav1.MailgunCluster) { mc.Spec.Request = "Actually, make it five nodes." }},
		{"spec.requester", func(mc *infrav1.MailgunCluster) { mc.Spec.Requester = "bob@example.com" }},
	}
	for _, name := range []string{"frozen", "unsent"} {
		for _, tt := range tests {
			t.Run(name+"/"+tt.field, func(t *testing.T) {
				mc := h.get(name)
				tt.mutate(mc)
				err := h.c.Update(h.ctx, mc)
				if want := tt.field + " is immutable"; err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("update: err = %v, want %q", err, want)
				}
			})
		}
	}
	// The endpoint and metadata stay editable.
	mc := h.get("frozen")
	patchObj(h, mc, func() {
		mc.Labels = map[string]string{"team": "platform"}
		mc.Spec.ControlPlaneEndpoint = infrav1.APIEndpoint{Host: "10.0.0.10", Port: 6443}
	})
	if n := len(h.emailsFor("frozen")); n != 1 {
		t.Errorf("%d emails after editing the endpoint, want 1", n)
	}
}

func TestInvalidObjectsAreRejected(t *testing.T) {
	h := newHarness(t)
	h.startManager()
	tests := []struct {
		name   string
		mutate func(*infrav1.MailgunCluster)
		want   string
	}{
		{"unknown priority", func(m *infrav1.MailgunCluster) { m.Spec.Priority = "Whenever" }, `supported values: "Urgent", "ExtremelyUrgent", "BusinessCritical"`},
		{"missing priority", func(m *infrav1.MailgunCluster) { m.Spec.Priority = "" }, "spec.priority"},
		{"empty request", func(m *infrav1.MailgunCluster) { m.Spec.Request = "" }, "spec.request"},
		{"oversized request", func(m *infrav1.MailgunCluster) { m.Spec.Request = strings.Repeat("x", 4097) }, "may not be more than 4096"},
		{"control character in request", func(m *infrav1.MailgunCluster) { m.Spec.Request = "hi\x07there" }, "must not contain control characters"},
		{"header injection in requester", func(m *infrav1.MailgunCluster) {
			m.Spec.Requester = "alice@example.com\r\nBcc: everyone@example.com"
		}, "spec.requester must be an email address"},
		{"requester with spaces", func(m *infrav1.MailgunCluster) { m.Spec.Requester = "alice at example" }, "spec.requester must be an email address"},
		{"requester with two @", func(m *infrav1.MailgunCluster) { m.Spec.Requester = "a@b@example.com" }, "spec.requester must be an email address"},
		{"endpoint port out of range", func(m *infrav1.MailgunCluster) {
			m.Spec.ControlPlaneEndpoint = infrav1.APIEndpoint{Host: "10.0.0.1", Port: 70000}
		}, "spec.controlPlaneEndpoint.port"},
		{"endpoint host injection", func(m *infrav1.MailgunCluster) {
			m.Spec.ControlPlaneEndpoint = infrav1.APIEndpoint{Host: "a\nb", Port: 6443}
		}, "spec.controlPlaneEndpoint.host must be a hostname or an IP address"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cluster := h.createCluster(fmt.Sprintf("bad-%d", i))
			mc := newMailgunCluster(h.ns, cluster.Name)
			ownedBy(mc, cluster)
			tt.mutate(mc)
			err := h.c.Create(h.ctx, mc)
			if err == nil {
				t.Fatalf("create succeeded, want it rejected")
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want an Invalid error mentioning %q", err, tt.want)
			}
			humanMessage(t, err)
		})
	}
	valid := []struct {
		name      string
		requester string
	}{
		{"address requester", "first.last+capi@sub.example.co.uk"},
		{"domain requester (manifests of earlier versions)", "example.com"},
	}
	for i, tt := range valid {
		t.Run(tt.name, func(t *testing.T) {
			mc := newMailgunCluster(h.ns, fmt.Sprintf("good-%d", i))
			mc.Spec.Requester = tt.requester
			mc.Spec.Request = "line one\nline two\twith a tab"
			if err := h.c.Create(h.ctx, mc); err != nil {
				t.Errorf("create: %v", err)
			}
		})
	}
	wrongTypes := []struct {
		name  string
		spec  map[string]any
		field string
	}{
		{"port as a string", map[string]any{"priority": "Urgent", "request": "x", "requester": "a@example.com",
			"controlPlaneEndpoint": map[string]any{"host": "h", "port": "6443"}}, "spec.controlPlaneEndpoint.port"},
		{"priority as a number", map[string]any{"priority": 1, "request": "x", "requester": "a@example.com"}, "spec.priority"},
		{"request as a list", map[string]any{"priority": "Urgent", "request": []any{"x"}, "requester": "a@example.com"}, "spec.request"},
		{"no spec", nil, "spec"},
	}
	for i, tt := range wrongTypes {
		t.Run(tt.name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": infrav1.GroupVersion.String(), "kind": "MailgunCluster",
				"metadata": map[string]any{"name": fmt.Sprintf("typed-%d", i), "namespace": h.ns},
			}}
			if tt.spec != nil {
				u.Object["spec"] = tt.spec
			}
			err := h.c.Create(h.ctx, u)
			if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.field) {
				t.Errorf("err = %v, want an Invalid error naming %s", err, tt.field)
			}
			humanMessage(t, err)
		})
	}
	if n := len(h.fake.Messages()); n != 0 {
		t.Errorf("%d emails sent for invalid or unowned objects", n)
	}

	// The operator is unaffected: a valid, owned object still gets its email.
	h.createOwned("valid-after-invalid")
	h.waitForAccepted("valid-after-invalid", 20*time.Second)
}

// humanMessage fails if the apiserver's message shows a raw regular
// expression, or a "<nil>" field where our own rules (CEL) failed. The
// apiserver adds "<nil>: ... some validation rules were not checked" by
// itself after a schema error that stops CEL (wrong type, missing field,
// unsupported enum value, too long); that sentence is not ours to change.
func humanMessage(t *testing.T, err error) {
	t.Helper()
	msg := err.Error()
	if strings.Contains(msg, "should match '") {
		t.Errorf("the message shows a regular expression: %v", err)
	}
	if strings.Contains(msg, "<nil>") && !strings.Contains(msg, "some validation rules were not checked") {
		t.Errorf("the message names no field: %v", err)
	}
}

func createSecret(h *harness, key string) {
	h.t.Helper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: config.DefaultSecretName},
		StringData: map[string]string{config.SecretAPIKeyKey: key},
	}
	if err := setSettings(h, s); err != nil {
		h.t.Fatalf("creating Secret: %v", err)
	}
}

// setSettings writes a settings object whole, as a user does with kubectl
// apply: the operator may have created it (empty) when it started.
func setSettings(h *harness, obj client.Object) error {
	existing := obj.DeepCopyObject().(client.Object)
	err := h.c.Get(h.ctx, client.ObjectKeyFromObject(obj), existing)
	if apierrors.IsNotFound(err) {
		return h.c.Create(h.ctx, obj)
	}
	if err != nil {
		return err
	}
	obj.SetResourceVersion(existing.GetResourceVersion())
	return h.c.Update(h.ctx, obj)
}

func newConfigMap(ns string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: config.DefaultConfigMapName},
		Data:       data,
	}
}

func patchObj(h *harness, obj client.Object, mutate func()) {
	h.t.Helper()
	base := obj.DeepCopyObject().(client.Object)
	mutate()
	if err := h.c.Patch(h.ctx, obj, client.MergeFrom(base)); err != nil {
		h.t.Fatalf("patching %s: %v", types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}, err)
	}
}

func hasFinalizer(mc *infrav1.MailgunCluster) bool {
	for _, f := range mc.Finalizers {
		if f == infrav1.ClusterFinalizer {
			return true
		}
	}
	return false
}

func TestCRDFollowsTheClusterAPIContract(t *testing.T) {
	h := newHarness(t)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	name := contract.CalculateCRDName(infrav1.GroupVersion.Group, "MailgunCluster")
	if err := h.c.Get(h.ctx, types.NamespacedName{Name: name}, crd); err != nil {
		t.Fatalf("getting CRD %s (the name Cluster API derives): %v", name, err)
	}
	if got := crd.Labels["cluster.x-k8s.io/v1beta2"]; got != "v1beta1" {
		t.Errorf("contract label cluster.x-k8s.io/v1beta2 = %q, want v1beta1", got)
	}
	if crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
		t.Errorf("scope = %s, want Namespaced", crd.Spec.Scope)
	}
	if !slices.Contains(crd.Spec.Names.Categories, "cluster-api") || !slices.Contains(crd.Spec.Names.ShortNames, "mgc") {
		t.Errorf("names = %+v, want category cluster-api and short name mgc", crd.Spec.Names)
	}
	var columns []string
	for _, v := range crd.Spec.Versions {
		if v.Name != "v1beta1" {
			continue
		}
		if v.Subresources == nil || v.Subresources.Status == nil {
			t.Errorf("v1beta1 has no status subresource")
		}
		for _, c := range v.AdditionalPrinterColumns {
			columns = append(columns, c.Name)
		}
	}
	for _, want := range []string{"Cluster", "Priority", "Ready", "Message ID", "Age"} {
		if !slices.Contains(columns, want) {
			t.Errorf("printer columns %v lack %q", columns, want)
		}
	}
}

func TestWatchFilterSkipsUnlabelledObjects(t *testing.T) {
	h := newHarness(t)
	h.startManager(func(o *operator.Options) { o.WatchFilterValue = "team-a" })
	h.createOwned("unlabelled")
	h.createOwned("labelled", func(mc *infrav1.MailgunCluster) {
		mc.Labels = map[string]string{clusterv1.WatchLabel: "team-a"}
	})
	h.waitForAccepted("labelled", 20*time.Second)
	h.consistently(time.Second, "no email for the unlabelled object", func() (bool, string) {
		n := len(h.emailsFor("unlabelled"))
		return n == 0, fmt.Sprintf("%d emails", n)
	})
	if got := h.get("unlabelled"); len(got.Status.Conditions) != 0 {
		t.Errorf("the unlabelled object was reconciled: %+v", got.Status.Conditions)
	}
}

func TestTemplateSpecIsImmutable(t *testing.T) {
	h := newHarness(t)
	tmpl := &infrav1.MailgunClusterTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "standard"},
		Spec: infrav1.MailgunClusterTemplateSpec{Template: infrav1.MailgunClusterTemplateResource{
			Spec: newMailgunCluster(h.ns, "x").Spec,
		}},
	}
	if err := h.c.Create(h.ctx, tmpl); err != nil {
		t.Fatalf("creating template: %v", err)
	}
	tmpl.Spec.Template.Spec.Priority = infrav1.PriorityBusinessCritical
	if err := h.c.Update(h.ctx, tmpl); err == nil || !strings.Contains(err.Error(), "spec.template is immutable") {
		t.Errorf("updating the template: err = %v, want the immutability message", err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	name := contract.CalculateCRDName(infrav1.GroupVersion.Group, "MailgunClusterTemplate")
	if err := h.c.Get(h.ctx, types.NamespacedName{Name: name}, crd); err != nil {
		t.Fatalf("getting CRD %s: %v", name, err)
	}
	if crd.Labels["cluster.x-k8s.io/v1beta2"] != "v1beta1" {
		t.Errorf("template CRD lacks the contract label: %v", crd.Labels)
	}
}

// TestOutageIsBounded: while Mailgun fails every request one way (5xx,
// 429 without a retry hint, connection refused), one MailgunCluster costs
// a bounded number of Mailgun calls, object writes and events: one backoff
// for every class, kept until an acceptance, holds although the object's
// own writes trigger reconciles, and a retry that fails as the last one did
// writes no status. (Before, a refused connection or a bare 429 cost about
// a call and three writes a second.) When Mailgun comes back it sends
// exactly once.
func TestOutageIsBounded(t *testing.T) {
	const outage, maxBackoff = 14 * time.Second, 2 * time.Second
	status := func(code int, header http.Header) func(*harness) {
		return func(h *harness) {
			h.fake.SetFaultFunc(func(string) *mailgunfake.Fault {
				if h.mailgunDown.Load() {
					return &mailgunfake.Fault{Kind: mailgunfake.Status, Status: code, Header: header, Body: `{"message":"outage"}`}
				}
				return nil
			})
		}
	}
	tests := []struct {
		name string
		// fail makes Mailgun fail while h.mailgunDown is set.
		fail func(*harness)
		// refused means the send is refused: it may be tried again, each
		// attempt a claim and its removal; else the first send may have
		// been queued and is only looked up.
		refused bool
	}{
		{name: "503", fail: status(503, nil)},
		{name: "429 without Retry-After or X-RateLimit-Reset", fail: status(429, nil), refused: true},
		{name: "429 with Retry-After 1", fail: status(429, http.Header{"Retry-After": {"1"}}), refused: true},
		{name: "connection refused", refused: true, fail: func(h *harness) {
			if err := h.fake.RefuseConnections(true); err != nil {
				h.t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			wc := &writeRecorder{}
			h.mailgunDown.Store(true)
			tt.fail(h)
			h.startManager(func(o *operator.Options) {
				o.MaxBackoff = maxBackoff
				o.WrapClient = func(c client.Client) client.Client { wc.Client = c; return wc }
			})
			h.createOwned("outage")
			time.Sleep(outage)
			sends, lookups := h.fake.Requests()
			domains := h.fake.DomainRequests()
			patches, statusWrites := int64(wc.count("mailgunclusters", "patch")), int64(wc.count("mailgunclusters/status", "update"))
			events := len(h.events("outage"))
			t.Logf("in a %s outage: %d sends, %d event lookups, %d domain checks, %d metadata patches, %d status writes, %d events",
				outage, sends, lookups, domains, patches, statusWrites, events)
			// Backoff 1s, then 2s (the cap): about outage/2s+2 attempts.
			// A refused connection reaches no handler, so count the
			// attempts by the claims written instead.
			attempts := int64(outage/maxBackoff) + 3
			calls := int64(sends + lookups + domains)
			if calls > attempts+1 || (!tt.refused && sends > 1) {
				t.Errorf("%d Mailgun calls (%d sends), want at most %d and, when a send may have been queued, 1 send", calls, sends, attempts+1)
			}
			// A claim and its removal per refused attempt; the status only
			// when the condition changes (a few times), and an event with
			// it.
			if patches > 2*attempts || statusWrites > 3 || events > 3 {
				t.Errorf("%d metadata patches, %d status writes and %d events, want at most %d, 3 and 3", patches, statusWrites, events, 2*attempts)
			}
			h.mailgunDown.Store(false)
			if err := h.fake.RefuseConnections(false); err != nil {
				t.Fatal(err)
			}
			h.waitForAccepted("outage", 30*time.Second)
			if n := len(h.emailsFor("outage")); n != 1 {
				t.Errorf("got %d emails, want exactly 1", n)
			}
			h.noErrorLogged()
		})
	}
}
