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
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/config"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/operator"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/mailgunfake"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/proc"
)

func TestDeliveryTracking(t *testing.T) {
	tests := []struct {
		name    string
		events  []mailgunfake.Event
		status  metav1.ConditionStatus
		reason  string
		message string // substring of the condition message
		metric  string // capmg_email_deliveries_total result label, "" for none
		warning bool
	}{
		{
			name:   "delivered",
			events: []mailgunfake.Event{{Name: "delivered", Message: "250 2.0.0 OK"}},
			status: metav1.ConditionTrue, reason: infrav1.DeliveredReason, message: "250 2.0.0 OK", metric: "delivered",
		},
		{
			name: "delivered after a temporary failure",
			events: []mailgunfake.Event{
				{Name: "failed", Severity: "temporary", Reason: "generic", Message: "421 try again later", Code: 421},
				{Name: "delivered", Message: "250 OK"},
			},
			status: metav1.ConditionTrue, reason: infrav1.DeliveredReason, metric: "delivered",
		},
		{
			name:   "bounced",
			events: []mailgunfake.Event{{Name: "failed", Severity: "permanent", Reason: "bounce", Message: "550 5.1.1 no such user", Code: 550}},
			status: metav1.ConditionFalse, reason: infrav1.DeliveryFailedReason, message: "550 5.1.1 no such user", metric: "failed", warning: true,
		},
		{
			name:   "rejected by Mailgun",
			events: []mailgunfake.Event{{Name: "rejected", Reason: "suppress-bounce", Message: "address previously bounced"}},
			status: metav1.ConditionFalse, reason: infrav1.DeliveryRejectedReason, message: "previously bounced", metric: "rejected", warning: true,
		},
		{
			name:   "marked as spam",
			events: []mailgunfake.Event{{Name: "delivered", Message: "250 OK"}, {Name: "complained"}},
			status: metav1.ConditionTrue, reason: infrav1.ComplainedReason, metric: "complained", warning: true,
		},
		{
			name:   "still retrying",
			events: []mailgunfake.Event{{Name: "failed", Severity: "temporary", Reason: "generic", Message: "452 mailbox full", Code: 452}},
			status: metav1.ConditionUnknown, reason: infrav1.DeliveryRetryingReason, message: "452 mailbox full",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.startManager()
			h.createOwned("tracked")
			mc := h.waitForAccepted("tracked", 20*time.Second)
			if c := conditions.Get(mc, infrav1.EmailDeliveredCondition); c == nil || c.Reason != infrav1.DeliveryPendingReason {
				t.Errorf("right after acceptance EmailDelivered = %+v, want DeliveryPending", c)
			}
			for _, e := range tt.events {
				h.fake.AddEvent(mc.Status.MessageID, e)
			}
			h.eventually(20*time.Second, "EmailDelivered "+tt.reason, func() (bool, string) {
				c := conditions.Get(h.get("tracked"), infrav1.EmailDeliveredCondition)
				if c == nil {
					return false, "no condition"
				}
				return c.Reason == tt.reason && c.Status == tt.status && strings.Contains(c.Message, tt.message),
					fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
			})
			if tt.metric != "" {
				if got := h.metric("capmg_email_deliveries_total", map[string]string{"result": tt.metric}); got != 1 {
					t.Errorf("capmg_email_deliveries_total{result=%s} = %v, want 1", tt.metric, got)
				}
			}
			if tt.warning {
				h.eventually(10*time.Second, "a warning event", func() (bool, string) {
					for _, e := range h.events("tracked") {
						if e.Type == corev1.EventTypeWarning && e.Reason == tt.reason {
							return true, ""
						}
					}
					return false, "none"
				})
			}
			got := h.get("tracked")
			if !conditions.IsTrue(got, infrav1.ReadyCondition) {
				t.Errorf("delivery tracking must not change Ready: %+v", got.Status.Conditions)
			}
			if n := len(h.emailsFor("tracked")); n != 1 {
				t.Errorf("%d emails, want 1", n)
			}
		})
	}
}

// TestDeliveryTrackingCostsOneReadPerPoll: the deliveries of many accepted
// emails are followed with one read of Mailgun's events per poll interval
// for the account, not one lookup per email.
func TestDeliveryTrackingCostsOneReadPerPoll(t *testing.T) {
	const objects = 40
	h := newHarness(t)
	h.fake.SetAutoDeliver(true)
	interval := h.options().DeliveryPollInterval
	h.startManager()
	start := time.Now()
	for i := range objects {
		h.createOwned(fmt.Sprintf("many-%d", i))
	}
	h.eventually(60*time.Second, "every email delivered", func() (bool, string) {
		delivered := 0
		for i := range objects {
			if conditions.GetReason(h.get(fmt.Sprintf("many-%d", i)), infrav1.EmailDeliveredCondition) == infrav1.DeliveredReason {
				delivered++
			}
		}
		return delivered == objects, fmt.Sprintf("%d of %d delivered", delivered, objects)
	})
	polls := int(time.Since(start)/interval) + 1
	if _, reads := h.fake.Requests(); reads > polls {
		t.Errorf("%d reads of Mailgun's events for %d emails in %d poll intervals, want at most one per interval", reads, objects, polls)
	}
}

func TestDeliveryTrackingGivesUp(t *testing.T) {
	h := newHarness(t)
	h.startManager(func(o *operator.Options) { o.DeliveryTrackingTimeout = 2 * time.Second })
	h.createOwned("silent")
	h.waitForAccepted("silent", 20*time.Second)
	h.eventually(20*time.Second, "DeliveryTrackingExpired", func() (bool, string) {
		c := conditions.Get(h.get("silent"), infrav1.EmailDeliveredCondition)
		return c != nil && c.Reason == infrav1.DeliveryTrackingExpiredReason, fmt.Sprintf("%+v", c)
	})
	_, before := h.fake.Requests()
	h.consistently(time.Second, "no more event lookups", func() (bool, string) {
		_, after := h.fake.Requests()
		return after == before, fmt.Sprintf("%d lookups after giving up", after-before)
	})
}

func TestResendOnRequest(t *testing.T) {
	h := newHarness(t)
	h.startManager()
	h.createOwned("again")
	first := h.waitForAccepted("again", 20*time.Second).Status.MessageID

	request := func(value string) {
		mc := h.get("again")
		patchObj(h, mc, func() { mc.Annotations[infrav1.ResendRequestAnnotation] = value })
	}
	request("1")
	h.eventually(20*time.Second, "a second email", func() (bool, string) {
		mc := h.get("again")
		return mc.Status.MessageID != first && mc.Annotations[infrav1.AcceptedMessageIDAnnotation] == mc.Status.MessageID,
			fmt.Sprintf("status %q", mc.Status.MessageID)
	})
	mc := h.get("again")
	if got := mc.Annotations[infrav1.MessageIDHistoryAnnotation]; got != first {
		t.Errorf("history = %q, want the first message ID %q", got, first)
	}
	if c := conditions.Get(mc, infrav1.EmailDeliveredCondition); c == nil || c.Reason != infrav1.DeliveryPendingReason || !strings.Contains(c.Message, mc.Status.MessageID) {
		t.Errorf("delivery tracking should follow the new email: %+v", c)
	}

	// The same request value, reconciles and a restart send nothing more.
	h.stopManager()
	h.startManager()
	h.consistently(2*time.Second, "two emails", func() (bool, string) {
		n := len(h.emailsFor("again"))
		return n == 2, fmt.Sprintf("%d emails", n)
	})

	request("2")
	h.eventually(20*time.Second, "a third email", func() (bool, string) {
		n := len(h.emailsFor("again"))
		return n == 3 && h.get("again").Annotations[infrav1.AcceptedMessageIDAnnotation] != "", fmt.Sprintf("%d emails", n)
	})
	ids := map[string]bool{}
	for _, e := range h.emailsFor("again") {
		ids[e.ID] = true
	}
	if len(ids) != 3 {
		t.Errorf("message IDs %v are not distinct", ids)
	}
	if got := strings.Split(h.get("again").Annotations[infrav1.MessageIDHistoryAnnotation], ","); len(got) != 2 {
		t.Errorf("history %v, want the two earlier IDs", got)
	}
}

func TestCredentialsCheck(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		reason  string
		message string
	}{
		{"invalid key", map[string]string{config.EnvAPIKey: "key-wrong"}, infrav1.InvalidCredentialsReason, "401"},
		{"unknown domain or wrong region", map[string]string{config.EnvDomain: "mg.other.example.com"}, infrav1.MailgunNotConfiguredReason,
			"does not know domain \"mg.other.example.com\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			for k, v := range tt.env {
				h.env[k] = v
			}
			health := proc.FreeAddr(t)
			h.startManager(func(o *operator.Options) { o.HealthProbeBindAddress = health })
			h.createOwned("creds")
			mc := h.waitForReason("creds", tt.reason, 20*time.Second)
			if msg := conditions.GetMessage(mc, infrav1.EmailSentCondition); !strings.Contains(msg, tt.message) {
				t.Errorf("message %q does not contain %q", msg, tt.message)
			}
			if sends, _ := h.fake.Requests(); sends != 0 {
				t.Errorf("%d send requests with settings Mailgun refuses", sends)
			}
			code, body := proc.HTTPGet(health, "/readyz/"+operator.ConfigCheckName)
			if code != http.StatusInternalServerError {
				t.Errorf("readiness %s = %d %s, want 500", operator.ConfigCheckName, code, body)
			}
			if !strings.Contains(h.logs.String(), "Mailgun refused the settings") {
				t.Errorf("the log does not report the refused settings")
			}
		})
	}
}

func TestUnverifiedDomainIsReportedButNotBlocking(t *testing.T) {
	h := newHarness(t)
	h.fake.SetDomainState("unverified")
	h.startManager()
	h.createOwned("unverified")
	h.waitForAccepted("unverified", 20*time.Second)
	if !strings.Contains(h.logs.String(), "Mailgun knows the domain but it is not active") {
		t.Errorf("the log does not warn about the unverified domain")
	}
}

// TestRefusedResendRequests: blank and oversized resend requests send
// nothing and are reported once with a Warning event naming the
// annotation; a request made before the first email was accepted is
// answered by it.
func TestRefusedResendRequests(t *testing.T) {
	h := newHarness(t)
	h.startManager()
	h.createOwned("early", func(mc *infrav1.MailgunCluster) {
		mc.Annotations = map[string]string{infrav1.ResendRequestAnnotation: "asked-early"}
	})
	h.createOwned("refused")
	h.waitForAccepted("early", 20*time.Second)
	h.waitForAccepted("refused", 20*time.Second)
	for _, value := range []string{"   ", strings.Repeat("x", 150<<10)} {
		mc := h.get("refused")
		patchObj(h, mc, func() { mc.Annotations[infrav1.ResendRequestAnnotation] = value })
		h.eventually(10*time.Second, "an InvalidResendRequest event", func() (bool, string) {
			n := 0
			for _, e := range h.events("refused") {
				if e.Reason == "InvalidResendRequest" && strings.Contains(e.Note, infrav1.ResendRequestAnnotation) {
					n++
				}
			}
			return n > 0, fmt.Sprintf("%d such events", n)
		})
	}
	h.consistently(2*time.Second, "one email each", func() (bool, string) {
		e, r := len(h.emailsFor("early")), len(h.emailsFor("refused"))
		return e == 1 && r == 1, fmt.Sprintf("early %d, refused %d", e, r)
	})
	if got := h.get("refused"); !conditions.IsTrue(got, infrav1.EmailSentCondition) {
		t.Errorf("a refused resend request changed EmailSent: %+v", conditions.Get(got, infrav1.EmailSentCondition))
	}
	h.noErrorLogged()
}
