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

package send

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
)

func TestCheckSendRecord(t *testing.T) {
	const (
		ours     = "<mailguncluster.6f1c2d3e-0000-4000-8000-000000000001@mg.example.com>"
		resend   = "<mailguncluster.6f1c2d3e-0000-4000-8000-000000000001.resend-0123456789ab@mg.example.com>"
		accepted = "<20260101120000.1.ABCDEF@mg.example.com>"
	)
	tests := []struct {
		name string
		ann  map[string]string
		want recordVerdict
	}{
		{name: "no record", want: recordOwn},
		{name: "a record written for this object", want: recordOwn, ann: map[string]string{
			infrav1.SentForAnnotation: "team-a/prod", infrav1.MessageIDAnnotation: ours, infrav1.AcceptedMessageIDAnnotation: accepted}},
		{name: "a resend's Message-Id", want: recordOwn, ann: map[string]string{
			infrav1.SentForAnnotation: "team-a/prod", infrav1.MessageIDAnnotation: resend}},
		{name: "a record from before the sent-for binding is adopted", want: recordOwn, ann: map[string]string{
			infrav1.MessageIDAnnotation: ours, infrav1.AcceptedMessageIDAnnotation: accepted}},
		{name: "a record copied from another namespace", want: recordCopied, ann: map[string]string{
			infrav1.SentForAnnotation: "team-b/prod", infrav1.MessageIDAnnotation: ours, infrav1.AcceptedMessageIDAnnotation: accepted}},
		{name: "a record copied from another name", want: recordCopied, ann: map[string]string{
			infrav1.SentForAnnotation: "team-a/staging", infrav1.MessageIDAnnotation: ours}},
		{name: "a Message-Id that injects a header", want: recordInvalid, ann: map[string]string{
			infrav1.MessageIDAnnotation: "<mailguncluster.x@mg.example.com>\r\nBcc: everyone@example.com"}},
		{name: "a Message-Id this operator does not write", want: recordInvalid, ann: map[string]string{
			infrav1.MessageIDAnnotation: "<someone-elses@example.com>"}},
		{name: "an accepted ID that injects into status", want: recordInvalid, ann: map[string]string{
			infrav1.AcceptedMessageIDAnnotation: "<a@b>\nforged"}},
		{name: "an empty accepted ID", want: recordInvalid, ann: map[string]string{
			infrav1.AcceptedMessageIDAnnotation: ""}},
		{name: "a send domain that is not a domain", want: recordInvalid, ann: map[string]string{
			infrav1.SendDomainAnnotation: strings.Repeat("x", 300)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := &infrav1.MailgunCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "prod", Annotations: tt.ann}}
			got, detail := testKind.checkSendRecord(mc)
			if got != tt.want {
				t.Errorf("verdict = %d (%s), want %d", got, detail, tt.want)
			}
			if (got == recordOwn) != (detail == "") {
				t.Errorf("detail = %q: want one exactly when the record is refused", detail)
			}
		})
	}
}

func TestDropCopiedRecordKeepsTheRest(t *testing.T) {
	mc := &infrav1.MailgunCluster{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		infrav1.SentForAnnotation:           "team-b/prod",
		infrav1.MessageIDAnnotation:         "<mailguncluster.x@mg.example.com>",
		infrav1.SendAttemptedAtAnnotation:   "2026-01-01T00:00:00Z",
		infrav1.AcceptedMessageIDAnnotation: "<1@mg.example.com>",
		infrav1.MessageIDHistoryAnnotation:  "<0@mg.example.com>",
		infrav1.ResendRequestAnnotation:     "please",
		infrav1.ResendHandledAnnotation:     "earlier",
		"team":                              "a",
	}}}
	dropCopiedRecord(mc)
	want := map[string]string{infrav1.ResendRequestAnnotation: "please", infrav1.ResendHandledAnnotation: "please", "team": "a"}
	if !maps.Equal(mc.Annotations, want) {
		t.Errorf("annotations = %v, want %v", mc.Annotations, want)
	}
}

func TestPendingResend(t *testing.T) {
	accepted := map[string]string{infrav1.AcceptedMessageIDAnnotation: "<1@mg.example.com>"}
	with := func(base map[string]string, extra map[string]string) map[string]string {
		m := maps.Clone(base)
		if m == nil {
			m = map[string]string{}
		}
		maps.Copy(m, extra)
		return m
	}
	tests := []struct {
		name        string
		ann         map[string]string
		wantRequest string
		wantProblem bool
	}{
		{name: "no request", ann: accepted},
		{name: "a new request", ann: with(accepted, map[string]string{infrav1.ResendRequestAnnotation: "2026-12-04"}), wantRequest: "2026-12-04"},
		{name: "a handled request", ann: with(accepted, map[string]string{infrav1.ResendRequestAnnotation: "1", infrav1.ResendHandledAnnotation: "1"})},
		{name: "a blank request", ann: with(accepted, map[string]string{infrav1.ResendRequestAnnotation: " \t "}), wantProblem: true},
		{name: "an oversized request", ann: with(accepted, map[string]string{infrav1.ResendRequestAnnotation: strings.Repeat("x", 150<<10)}), wantProblem: true},
		{name: "a request before the first email was accepted waits for it", ann: with(nil, map[string]string{infrav1.ResendRequestAnnotation: "1"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := &infrav1.MailgunCluster{ObjectMeta: metav1.ObjectMeta{Annotations: tt.ann}}
			req, problem := testKind.pendingResend(mc)
			if req != tt.wantRequest || (problem != "") != tt.wantProblem {
				t.Errorf("pendingResend = %q, %q; want %q, problem %v", req, problem, tt.wantRequest, tt.wantProblem)
			}
		})
	}
}

// TestSendDomainChanged: a pending attempt is looked up only with the
// domain it was sent with; a settings or identity change to another domain
// while its outcome is unknown stops the reconcile instead of ending, after
// the settle time, in a second email.
func TestSendDomainChanged(t *testing.T) {
	const claim = "2026-01-01T12:00:00.000000001Z replica-a"
	pending := map[string]string{
		infrav1.MessageIDAnnotation: "<mailguncluster.u@mg.a.example.com>", infrav1.SendAttemptedAtAnnotation: claim,
		infrav1.SendDomainAnnotation: "mg.a.example.com",
	}
	with := func(k, v string) map[string]string {
		m := maps.Clone(pending)
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		name        string
		ann         map[string]string
		domain      string
		unsentClaim string
		stop        bool
	}{
		{name: "same domain", ann: pending, domain: "mg.a.example.com"},
		{name: "another domain while the outcome is unknown", ann: pending, domain: "mg.b.example.com", stop: true},
		{name: "another domain, but this process knows nothing went out", ann: pending, domain: "mg.b.example.com", unsentClaim: claim},
		{name: "another domain, another claim known unsent", ann: pending, domain: "mg.b.example.com", unsentClaim: "2026-01-01T11:00:00Z replica-a", stop: true},
		{name: "no pending attempt", ann: with(infrav1.SendAttemptedAtAnnotation, ""), domain: "mg.b.example.com"},
		{name: "already accepted", ann: with(infrav1.AcceptedMessageIDAnnotation, "<1.A@mg.a.example.com>"), domain: "mg.b.example.com"},
		{name: "a claim from a version that did not record the domain: the Message-Id's", ann: with(infrav1.SendDomainAnnotation, ""), domain: "mg.b.example.com", stop: true},
		{name: "a claim from a version that did not record the domain, same domain", ann: with(infrav1.SendDomainAnnotation, ""), domain: "mg.a.example.com"},
		{name: "domains differ only in case", ann: pending, domain: "MG.A.example.com"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mc := &infrav1.MailgunCluster{ObjectMeta: metav1.ObjectMeta{Annotations: tt.ann}}
			msg := sendDomainChanged(mc, tt.domain, tt.unsentClaim)
			if got := msg != ""; got != tt.stop {
				t.Fatalf("stops = %v (%q), want %v", got, msg, tt.stop)
			}
			if tt.stop && (!strings.Contains(msg, `"mg.a.example.com"`) || !strings.Contains(msg, infrav1.SendAttemptedAtAnnotation)) {
				t.Errorf("message %q does not name the domain sent with and the claim annotation", msg)
			}
		})
	}
}

// TestLastAcceptedMessageID: the recorded email, else while a resend is
// pending the one it replaces, else none.
func TestLastAcceptedMessageID(t *testing.T) {
	for _, c := range []struct {
		name string
		ann  map[string]string
		want string
	}{
		{"accepted", map[string]string{infrav1.MessageIDAnnotation: "<a@x>", infrav1.AcceptedMessageIDAnnotation: "<a@x>"}, "<a@x>"},
		{"resend pending", map[string]string{infrav1.MessageIDAnnotation: "<r@x>", infrav1.MessageIDHistoryAnnotation: "<a@x>,<b@x>"}, "<b@x>"},
		{"resent and accepted", map[string]string{infrav1.MessageIDAnnotation: "<r@x>", infrav1.AcceptedMessageIDAnnotation: "<r@x>",
			infrav1.MessageIDHistoryAnnotation: "<a@x>"}, "<r@x>"},
		{"claimed, not confirmed", map[string]string{infrav1.MessageIDAnnotation: "<p@x>"}, ""},
		{"never claimed", nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			mc := &infrav1.MailgunCluster{ObjectMeta: metav1.ObjectMeta{Annotations: c.ann}}
			if got := testKind.LastAcceptedMessageID(mc); got != c.want {
				t.Errorf("LastAcceptedMessageID = %q, want %q", got, c.want)
			}
		})
	}
}

// TestResendMessageIDsAreUnique: resend values reused ("a", "b", "a", "b")
// are new requests each, and no two share a Message-Id: a lookup for the
// fourth must not find the second email and report it as the fourth's.
func TestResendMessageIDsAreUnique(t *testing.T) {
	mc := &infrav1.MailgunCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "prod", UID: "6f1c2d3e-0000-4000-8000-000000000001",
		Annotations: map[string]string{}}}
	ids := map[string]int{testKind.messageID(mc.UID, "mg.example.com"): 0}
	testKind.markAccepted(mc, "<first@mg.example.com>")
	mc.Annotations[infrav1.MessageIDAnnotation] = testKind.messageID(mc.UID, "mg.example.com")
	for i, req := range []string{"a", "b", "a", "b"} {
		mc.Annotations[infrav1.ResendRequestAnnotation] = req
		if got, _ := testKind.pendingResend(mc); got != req {
			t.Fatalf("request %d (%q): pendingResend = %q, want it taken as a new request", i+1, req, got)
		}
		again := mc.DeepCopy()
		testKind.withNewRequest(mc, "mg.example.com")
		testKind.withNewRequest(again, "mg.example.com")
		id := mc.Annotations[infrav1.MessageIDAnnotation]
		if id != again.Annotations[infrav1.MessageIDAnnotation] {
			t.Errorf("request %d: Message-Id %q, then %q from the same object: every attempt must use the same", i+1, id, again.Annotations[infrav1.MessageIDAnnotation])
		}
		if prev, seen := ids[id]; seen {
			t.Errorf("request %d (%q) has Message-Id %s, as request %d had", i+1, req, id, prev)
		}
		ids[id] = i + 1
		if v, detail := testKind.checkSendRecord(mc); v != recordOwn {
			t.Errorf("request %d: the record with %s is refused: %s", i+1, id, detail)
		}
		testKind.markAccepted(mc, fmt.Sprintf("<accepted-%d@mg.example.com>", i+1))
	}
}
