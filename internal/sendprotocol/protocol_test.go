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

package sendprotocol

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
)

var (
	now   = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	proto = Protocol{
		SettleTime: 2 * time.Minute, RecheckInterval: 5 * time.Minute,
		Backoff: time.Second, MaxBackoff: 5 * time.Minute, ConflictDelay: time.Second,
		Holder: "replica-a",
	}
	msgID = "<mailguncluster.uid-1@mg.example.com>"
	// claimed is a record whose claim was written at t.
	claimed = func(t time.Time) Record { return Record{MessageID: msgID, Claim: ClaimValue(t, "replica-b")} }
)

func mailgunErr(c mailer.Class) error {
	return &mailer.SendError{Class: c, StatusCode: 503, Message: "test"}
}

// TestTransitions drives every transition of the state machine.
func TestTransitions(t *testing.T) {
	tests := []struct {
		name string
		in   Input
		want Decision
	}{
		{
			name: "accepted: nothing to do",
			in:   Input{Record: Record{MessageID: msgID, AcceptedID: "<id>"}, Now: now},
			want: Decision{State: Accepted},
		},
		{
			name: "accepted wins over a hold",
			in:   Input{Record: Record{AcceptedID: "<id>"}, Now: now, Hold: &Hold{Until: now.Add(time.Hour)}},
			want: Decision{State: Accepted},
		},
		{
			name: "not claimed: write a claim",
			in:   Input{Record: Record{MessageID: msgID}, Now: now},
			want: Decision{State: NotClaimed, Op: OpClaim, Claim: ClaimValue(now, "replica-a")},
		},
		{
			name: "not claimed, credentials to check: verify first",
			in:   Input{Record: Record{MessageID: msgID}, Now: now, Verify: true},
			want: Decision{State: NotClaimed, Op: OpVerify},
		},
		{
			name: "verified: write a claim",
			in:   Input{Record: Record{MessageID: msgID}, Now: now, Answer: &Answer{Op: OpVerify}},
			want: Decision{State: NotClaimed, Op: OpClaim, Claim: ClaimValue(now, "replica-a")},
		},
		{
			name: "claim written: send",
			in:   Input{Record: claimed(now), Now: now, Answer: &Answer{Op: OpClaim}},
			want: Decision{State: Claimed, Op: OpSend},
		},
		{
			name: "send accepted: record Mailgun's ID",
			in:   Input{Record: claimed(now), Now: now, Answer: &Answer{Op: OpSend, AcceptedID: "<mailgun-id>"}, Failures: 3},
			want: Decision{State: Accepted, Accept: "<mailgun-id>", Condition: &Condition{
				Status: "True", Reason: infrav1.EmailAcceptedReason, Message: "Mailgun accepted the request email, message ID <mailgun-id>"}},
		},
		{
			name: "claim found at start: look it up, do not send",
			in:   Input{Record: claimed(now.Add(-time.Second)), Now: now},
			want: Decision{State: OutcomeUnknown, Op: OpLookup},
		},
		{
			name: "claim this process never sent with: no lookup, no settle wait",
			in:   Input{Record: claimed(now.Add(-time.Second)), Now: now, ClaimUnsent: true},
			want: Decision{State: NotClaimed, Op: OpClaim, Claim: ClaimValue(now, "replica-a")},
		},
		{
			name: "lookup finds the message: accepted under our Message-Id",
			in:   Input{Record: claimed(now.Add(-time.Minute)), Now: now, Answer: &Answer{Op: OpLookup, Found: true}},
			want: Decision{State: Accepted, Accept: msgID, Condition: &Condition{
				Status: "True", Reason: infrav1.EmailAcceptedReason, Message: "Mailgun's events show the request email was accepted, message ID " + msgID}},
		},
		{
			name: "lookup does not find it within the settle time: wait, poll the events",
			in:   Input{Record: claimed(now.Add(-time.Minute)), Now: now, Answer: &Answer{Op: OpLookup}},
			want: Decision{
				State: OutcomeUnknown, RequeueAfter: 30 * time.Second, Hold: &Hold{Until: now.Add(30 * time.Second)},
				Condition: &Condition{Status: "False", Reason: infrav1.SendOutcomeUnknownReason, Message: "the send attempt at " +
					ClaimValue(now.Add(-time.Minute), "replica-b") + " got no definite answer from Mailgun and its events do not show message " + msgID +
					" yet; sending again at 2026-12-03T12:01:00Z unless they do"},
			},
		},
		{
			name: "lookup does not find it, settle time nearly over: wait only until then",
			in:   Input{Record: claimed(now.Add(-2*time.Minute + 5*time.Second)), Now: now, Answer: &Answer{Op: OpLookup}},
			want: Decision{State: OutcomeUnknown, RequeueAfter: 5 * time.Second, Hold: &Hold{Until: now.Add(5 * time.Second)}},
		},
		{
			name: "lookup does not find it after the settle time: claim again and send",
			in:   Input{Record: claimed(now.Add(-2 * time.Minute)), Now: now, Answer: &Answer{Op: OpLookup}},
			want: Decision{State: NotClaimed, Op: OpClaim, Claim: ClaimValue(now, "replica-a")},
		},
		{
			name: "unreadable claim (edited by hand): treated as settled",
			in:   Input{Record: Record{MessageID: msgID, Claim: "yesterday"}, Now: now, Answer: &Answer{Op: OpLookup}},
			want: Decision{State: NotClaimed, Op: OpClaim, Claim: ClaimValue(now, "replica-a")},
		},
		{
			name: "hold with an end: wait for it without calling Mailgun",
			in:   Input{Record: claimed(now.Add(-time.Minute)), Now: now, Hold: &Hold{Until: now.Add(7 * time.Second)}, Failures: 2},
			want: Decision{State: OnHold, RequeueAfter: 7 * time.Second, Hold: &Hold{Until: now.Add(7 * time.Second)}, Failures: 2},
		},
		{
			name: "hold until a change: no requeue",
			in:   Input{Record: Record{MessageID: msgID}, Now: now, Hold: &Hold{}},
			want: Decision{State: OnHold, Hold: &Hold{}},
		},
		{
			name: "claim write conflicts: retry quietly, nothing sent",
			in:   Input{Record: Record{MessageID: msgID}, Now: now, Answer: Failed(OpClaim, apierrors.NewConflict(schema.GroupResource{}, "x", errors.New("changed")))},
			want: Decision{State: NotClaimed, RequeueAfter: time.Second, Quiet: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := proto.Decide(tt.in)
			if tt.want.Condition == nil && tt.want.State == OutcomeUnknown && tt.want.RequeueAfter > 0 {
				// The waiting message is checked in full once, above.
				if got.Condition == nil || got.Condition.Reason != infrav1.SendOutcomeUnknownReason {
					t.Errorf("condition %+v, want reason %s", got.Condition, infrav1.SendOutcomeUnknownReason)
				}
				tt.want.Condition = got.Condition
			}
			if diff := compare(got, tt.want); diff != "" {
				t.Error(diff)
			}
		})
	}
}

func TestClaimWriteFailureGoesToTheController(t *testing.T) {
	err := apierrors.NewServiceUnavailable("etcd down")
	d := proto.Decide(Input{Record: Record{MessageID: msgID}, Now: now, Answer: Failed(OpClaim, err)})
	if d.Op != OpNone || d.Err == nil || !errors.Is(d.Err, err) || d.RequeueAfter != 0 || d.Quiet {
		t.Errorf("decision = %+v, want no step, the error wrapped for the controller, no requeue", d)
	}
}

// TestErrorClasses checks every class of failure, for every step that can
// fail with it: what is reported, whether the claim stays, when the next
// call to Mailgun may happen.
func TestErrorClasses(t *testing.T) {
	tests := []struct {
		class  mailer.Class
		reason string
		// maybeAccepted: after a send, the claim stays and the message is
		// looked up before any further send.
		maybeAccepted bool
		// wait after the first failure (RetryAfter 0).
		wait time.Duration
	}{
		{mailer.ClassOutcomeUnknown, infrav1.SendOutcomeUnknownReason, true, time.Second},
		{mailer.ClassUnavailable, infrav1.MailgunUnavailableReason, true, time.Second},
		{mailer.ClassUnreachable, infrav1.MailgunUnavailableReason, false, time.Second},
		{mailer.ClassRateLimited, infrav1.RateLimitedReason, false, time.Second},
		{mailer.ClassUnauthorized, infrav1.InvalidCredentialsReason, false, 5 * time.Minute},
		{mailer.ClassForbidden, infrav1.RecipientNotAuthorizedReason, false, 5 * time.Minute},
		{mailer.ClassDomainNotFound, infrav1.MailgunNotConfiguredReason, false, 5 * time.Minute},
		{mailer.ClassRejected, infrav1.MessageRejectedReason, false, 0},
	}
	for _, tt := range tests {
		for _, op := range []Op{OpVerify, OpSend, OpLookup} {
			t.Run(fmt.Sprintf("%s/%s", tt.class, op), func(t *testing.T) {
				in := Input{Record: claimed(now), Now: now, Answer: Failed(op, mailgunErr(tt.class)), Failures: 0}
				d := proto.Decide(in)
				wantReason, wantState := tt.reason, OnHold
				if op == OpSend && tt.maybeAccepted {
					wantReason, wantState = infrav1.SendOutcomeUnknownReason, OutcomeUnknown
				}
				if d.State != wantState || d.Op != OpNone || d.Err != nil {
					t.Errorf("state %s op %q err %v, want %s, no step, no error", d.State, d.Op, d.Err, wantState)
				}
				if d.Condition == nil || d.Condition.Reason != wantReason || d.Condition.Status != "False" {
					t.Errorf("condition %+v, want False/%s", d.Condition, wantReason)
				}
				if d.ClearClaim != (op == OpSend && !tt.maybeAccepted) {
					t.Errorf("ClearClaim = %v: the claim must go exactly when a send was definitely refused", d.ClearClaim)
				}
				if d.RequeueAfter != tt.wait || d.Hold == nil || (tt.wait > 0 && !d.Hold.Until.Equal(now.Add(tt.wait))) || (tt.wait == 0 && !d.Hold.Until.IsZero()) {
					t.Errorf("requeue %s hold %+v, want %s and a hold until then", d.RequeueAfter, d.Hold, tt.wait)
				}
				if d.Failures != 1 {
					t.Errorf("failures = %d, want 1", d.Failures)
				}
				if d.Quiet {
					t.Errorf("a Mailgun failure is reported, not quiet")
				}
			})
		}
	}
}

// TestFencedSendKeepsTheClaim: a send the fence withheld (lease not fresh,
// or the live claim is another replica's) sent nothing, but the claim may
// be the successor's: it stays, the retry backs off quietly, and the
// condition is left alone.
func TestFencedSendKeepsTheClaim(t *testing.T) {
	in := Input{Record: claimed(now), Now: now, Failures: 2,
		Answer: &Answer{Op: OpSend, Err: errors.New("the claim on the object is another replica's"), Class: ClassFenced}}
	d := proto.Decide(in)
	if d.State != Claimed || d.Op != OpNone || d.ClearClaim || d.Err != nil || d.Condition != nil {
		t.Errorf("decision %+v: want Claimed, no step, the claim kept, no error, no condition", d)
	}
	// The third failure in a row: the backoff is 4s, so that a replica
	// that cannot confirm its claim (the apiserver is down) stays bounded.
	if !d.Quiet || d.RequeueAfter != 4*time.Second || d.Failures != 3 || !strings.Contains(d.Detail, "another replica") {
		t.Errorf("decision %+v: want a quiet retry after the backoff (4s), failures 3, the reason in Detail", d)
	}
}

// TestMailgunAnswerResetsTheBackoff: after an outage the failure count is
// high; the first call Mailgun answers resets it, so the next failure waits
// the first backoff step, not the outage's last (found by the fault suite:
// a send that hung right after an outage was retried 4 minutes later).
func TestMailgunAnswerResetsTheBackoff(t *testing.T) {
	long := now.Add(-time.Hour)
	lookedUp := proto.Decide(Input{Record: claimed(long), Now: now, Failures: 8, Answer: &Answer{Op: OpLookup}})
	if lookedUp.Op != OpClaim || lookedUp.Failures != 0 {
		t.Fatalf("after a lookup Mailgun answered: %+v, want a claim with the failure count reset", lookedUp)
	}
	claimedNow := proto.Decide(Input{Record: claimed(now), Now: now, Failures: lookedUp.Failures, Answer: &Answer{Op: OpClaim}})
	hung := proto.Decide(Input{Record: claimed(now), Now: now, Failures: claimedNow.Failures,
		Answer: Failed(OpSend, mailgunErr(mailer.ClassOutcomeUnknown))})
	if hung.RequeueAfter != proto.Backoff {
		t.Errorf("a send that hung right after the outage is retried after %s, want the first backoff step %s", hung.RequeueAfter, proto.Backoff)
	}
}

func TestClaimValueCarriesTheHolder(t *testing.T) {
	if got, want := ClaimValue(now, "pod-1_ab12"), "2026-12-03T12:00:00Z pod-1_ab12"; got != want {
		t.Errorf("ClaimValue = %q, want %q", got, want)
	}
	for _, claim := range []string{ClaimValue(now, "pod-1_ab12"), ClaimValue(now, ""), "2026-12-03T12:00:00Z"} {
		if at, err := claimTime(claim); err != nil || !at.Equal(now) {
			t.Errorf("claimTime(%q) = %v, %v; want %v", claim, at, err, now)
		}
	}
}

func TestEveryMailerClassHasAPolicy(t *testing.T) {
	for _, c := range []mailer.Class{mailer.ClassOutcomeUnknown, mailer.ClassUnavailable, mailer.ClassUnreachable, mailer.ClassRateLimited,
		mailer.ClassUnauthorized, mailer.ClassForbidden, mailer.ClassDomainNotFound, mailer.ClassRejected} {
		if _, ok := policies[Class(c)]; !ok {
			t.Errorf("no policy for %s", c)
		}
	}
	if p := PolicyFor("SomethingNew"); !p.MaybeAccepted {
		t.Errorf("an unknown class must be treated as maybe accepted, got %+v", p)
	}
}

func TestClassify(t *testing.T) {
	gr := schema.GroupResource{Group: "infrastructure.cluster.x-k8s.io", Resource: "mailgunclusters"}
	tests := []struct {
		name  string
		err   error
		class Class
		after time.Duration
	}{
		{"mailer error, wrapped", fmt.Errorf("sending: %w", &mailer.SendError{Class: mailer.ClassRateLimited, RetryAfter: 9 * time.Second}), ClassRateLimited, 9 * time.Second},
		{"write conflict", apierrors.NewConflict(gr, "a", errors.New("x")), ClassConflict, 0},
		{"apiserver unavailable", apierrors.NewServiceUnavailable("x"), ClassAPIServer, 0},
		{"not found", apierrors.NewNotFound(gr, "a"), ClassAPIServer, 0},
		{"anything else", errors.New("connection reset"), ClassOutcomeUnknown, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, after := Classify(tt.err)
			if c != tt.class || after != tt.after {
				t.Errorf("Classify = %s, %s; want %s, %s", c, after, tt.class, tt.after)
			}
		})
	}
}

func TestRateLimitWaitsAsMailgunAsks(t *testing.T) {
	a := Failed(OpSend, &mailer.SendError{Class: mailer.ClassRateLimited, StatusCode: 429, RetryAfter: 42 * time.Second})
	d := proto.Decide(Input{Record: claimed(now), Now: now, Answer: a})
	if d.RequeueAfter != 42*time.Second || !d.ClearClaim {
		t.Errorf("requeue %s clear %v, want 42s and the claim cleared (429 refuses the message)", d.RequeueAfter, d.ClearClaim)
	}
}

// TestBackoffIsCapped: consecutive failures double the wait up to the cap,
// so an object makes a bounded number of Mailgun calls during an outage.
func TestBackoffIsCapped(t *testing.T) {
	var waits []time.Duration
	failures := 0
	for range 12 {
		d := proto.Decide(Input{Record: claimed(now), Now: now, Answer: Failed(OpLookup, mailgunErr(mailer.ClassUnavailable)), Failures: failures})
		waits = append(waits, d.RequeueAfter)
		failures = d.Failures
	}
	s := time.Second
	want := []time.Duration{1 * s, 2 * s, 4 * s, 8 * s, 16 * s, 32 * s, 64 * s, 128 * s, 256 * s, 300 * s, 300 * s, 300 * s}
	if fmt.Sprint(waits) != fmt.Sprint(want) {
		t.Errorf("waits = %v, want %v", waits, want)
	}
}

// TestOutageCallBound simulates a Mailgun outage of 10 minutes for one
// object reconciled as often as anything triggers it (here: every 100ms):
// holds and the capped backoff bound the calls to Mailgun, and no second
// send happens while the first one's outcome is unknown.
func TestOutageCallBound(t *testing.T) {
	rec := Record{MessageID: msgID}
	var hold *Hold
	var unsent bool
	failures, calls, sends := 0, 0, 0
	start := now
	outage := 10 * time.Minute
	for clock := start; clock.Before(start.Add(outage)); clock = clock.Add(100 * time.Millisecond) {
		d := proto.Decide(Input{Record: rec, Now: clock, Hold: hold, Failures: failures, ClaimUnsent: unsent})
		for steps := 0; d.Op != OpNone; steps++ {
			if steps > 4 {
				t.Fatalf("more than 4 steps in one reconcile")
			}
			var a *Answer
			switch d.Op {
			case OpClaim:
				rec.Claim, unsent = d.Claim, false
				a = &Answer{Op: OpClaim}
			case OpSend, OpLookup:
				calls++
				if d.Op == OpSend {
					sends++
				}
				a = Failed(d.Op, mailgunErr(mailer.ClassUnavailable))
			}
			d = proto.Decide(Input{Record: rec, Now: clock, Answer: a, Failures: failures, ClaimUnsent: unsent})
			failures = d.Failures
		}
		if d.ClearClaim {
			rec.Claim = ""
		}
		hold = d.Hold
	}
	// 1+2+4+...+256 s = 511 s, then one call per 300 s: 10 calls in 10 min.
	if calls > 12 {
		t.Errorf("%d Mailgun calls in a %s outage, want at most 12", calls, outage)
	}
	if sends != 1 {
		t.Errorf("%d sends, want 1: after a 5xx the message may be queued and is only looked up", sends)
	}
	t.Logf("%d Mailgun calls (%d send) for one object in a %s outage", calls, sends, outage)
}

// compare reports the differences between two decisions.
func compare(got, want Decision) string {
	var diffs []string
	check := func(field string, g, w any) {
		if fmt.Sprint(g) != fmt.Sprint(w) {
			diffs = append(diffs, fmt.Sprintf("%s = %v, want %v", field, g, w))
		}
	}
	check("State", got.State, want.State)
	check("Op", got.Op, want.Op)
	check("Claim", got.Claim, want.Claim)
	check("ClearClaim", got.ClearClaim, want.ClearClaim)
	check("Accept", got.Accept, want.Accept)
	check("RequeueAfter", got.RequeueAfter, want.RequeueAfter)
	check("Failures", got.Failures, want.Failures)
	check("Quiet", got.Quiet, want.Quiet)
	check("Err", got.Err, want.Err)
	check("Hold", deref(got.Hold), deref(want.Hold))
	check("Condition", deref(got.Condition), deref(want.Condition))
	return strings.Join(diffs, "; ")
}

func deref[T any](p *T) any {
	if p == nil {
		return "<nil>"
	}
	return *p
}
