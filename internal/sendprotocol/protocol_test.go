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
			name: "not claimed after failed calls: no second credentials check, claim",
			in:   Input{Record: Record{MessageID: msgID}, Now: now, Verify: true, Failures: 2},
			want: Decision{State: NotClaimed, Op: OpClaim, Claim: ClaimValue(now, "replica-a"), Failures: 2},
		},
		{
			name: "after Mailgun refused the settings: check them again before claiming",
			in:   Input{Record: Record{MessageID: msgID}, Now: now, Verify: true, Failures: 3, Recheck: true},
			want: Decision{State: NotClaimed, Op: OpVerify, Failures: 3},
		},
		{
			name: "accepted in this process, record not written yet: accepted, no lookup",
			in:   Input{Record: claimed(now.Add(-time.Minute)), Now: now, KnownAccepted: "<mailgun-id>", Failures: 1},
			want: Decision{State: Accepted, Accept: "<mailgun-id>", Condition: &Condition{
				Status: "True", Reason: infrav1.EmailAcceptedReason, Message: "Mailgun accepted the request email, message ID <mailgun-id>"}},
		},
		{
			name: "paused, nothing pending: nothing to do",
			in:   Input{Record: Record{MessageID: msgID}, Now: now, Verify: true, Paused: true},
			want: Decision{State: NotClaimed},
		},
		{
			name: "paused, an attempt pending: look it up",
			in:   Input{Record: claimed(now.Add(-time.Second)), Now: now, Paused: true},
			want: Decision{State: OutcomeUnknown, Op: OpLookup},
		},
		{
			name: "paused, a claim this process never sent with: drop it, do not send",
			in:   Input{Record: claimed(now.Add(-time.Second)), Now: now, Paused: true, ClaimUnsent: true},
			want: Decision{State: NotClaimed, ClearClaim: true, Condition: &Condition{Status: "False", Reason: infrav1.PausedReason, Message: "the send attempt at " +
				ClaimValue(now.Add(-time.Second), "replica-b") + " is known not to have been accepted; no new attempt starts while the object or its Cluster is paused"}},
		},
		{
			name: "paused, not found after the settle time: drop the claim, do not send",
			in:   Input{Record: claimed(now.Add(-2 * time.Minute)), Now: now, Paused: true, Answer: &Answer{Op: OpLookup}},
			want: Decision{State: NotClaimed, ClearClaim: true, Condition: &Condition{Status: "False", Reason: infrav1.PausedReason, Message: "the send attempt at " +
				ClaimValue(now.Add(-2*time.Minute), "replica-b") + " is known not to have been accepted; no new attempt starts while the object or its Cluster is paused"}},
		},
		{
			name: "paused, found: accepted",
			in:   Input{Record: claimed(now.Add(-time.Minute)), Now: now, Paused: true, Answer: &Answer{Op: OpLookup, Found: true}},
			want: Decision{State: Accepted, Accept: msgID, Condition: &Condition{
				Status: "True", Reason: infrav1.EmailAcceptedReason, Message: "Mailgun's events show the request email was accepted, message ID " + msgID}},
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
			name: "lookup does not find it within the settle time: look again when the attempt is twice as old",
			in:   Input{Record: claimed(now.Add(-time.Minute)), Now: now, Answer: &Answer{Op: OpLookup}},
			want: Decision{
				State: OutcomeUnknown, RequeueAfter: time.Minute, Hold: &Hold{Until: now.Add(time.Minute)},
				Condition: &Condition{Status: "False", Reason: infrav1.SendOutcomeUnknownReason, Message: "the send attempt at " +
					ClaimValue(now.Add(-time.Minute), "replica-b") + " got no definite answer from Mailgun and its events do not show message " + msgID +
					" yet; sending again at 2026-12-03T12:01:00Z unless they do"},
			},
		},
		{
			name: "lookup right after the attempt does not find it: look again after the first backoff step",
			in:   Input{Record: claimed(now), Now: now, Answer: &Answer{Op: OpLookup}},
			want: Decision{State: OutcomeUnknown, RequeueAfter: time.Second, Hold: &Hold{Until: now.Add(time.Second)}},
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

// TestOnlyAcceptanceResetsTheBackoff: no answer short of an acceptance
// (a domain check, a lookup that finds nothing, a refusal that cleared the
// claim) starts the backoff over; on today's main before this rule, an
// unreachable Mailgun cost a call and three writes a second.
func TestOnlyAcceptanceResetsTheBackoff(t *testing.T) {
	long := now.Add(-time.Hour)
	for _, a := range []*Answer{{Op: OpVerify}, {Op: OpLookup}, {Op: OpClaim}} {
		d := proto.Decide(Input{Record: claimed(long), Now: now, Failures: 8, Answer: a})
		if d.Failures != 8 {
			t.Errorf("after a %s answer: failures %d, want 8 kept", a.Op, d.Failures)
		}
	}
	refused := proto.Decide(Input{Record: claimed(now), Now: now, Failures: 8, Answer: Failed(OpSend, mailgunErr(mailer.ClassUnreachable))})
	if !refused.ClearClaim || refused.Failures != 9 || refused.RequeueAfter != proto.backoff(9) {
		t.Errorf("refused send: %+v, want the claim cleared, failures 9, a wait of %s", refused, proto.backoff(9))
	}
	accepted := proto.Decide(Input{Record: claimed(now), Now: now, Failures: 8, Answer: &Answer{Op: OpSend, AcceptedID: "<id>"}})
	if accepted.Failures != 0 {
		t.Errorf("accepted: failures %d, want 0", accepted.Failures)
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
		mailer.ClassUnauthorized, mailer.ClassForbidden, mailer.ClassDomainNotFound, mailer.ClassRejected, mailer.ClassTLS} {
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

// TestRateLimitWaits: Mailgun's delay is a lower bound on the backoff,
// and MaxBackoff caps it.
func TestRateLimitWaits(t *testing.T) {
	tests := []struct {
		name       string
		retryAfter time.Duration
		failures   int
		want       time.Duration
	}{
		{"as Mailgun asks", 42 * time.Second, 0, 42 * time.Second},
		{"no hint: the backoff", 0, 3, 8 * time.Second},
		{"a short hint does not undercut the backoff", time.Second, 5, 32 * time.Second},
		{"a long hint is capped by MaxBackoff", 6 * time.Hour, 0, 5 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Failed(OpSend, &mailer.SendError{Class: mailer.ClassRateLimited, StatusCode: 429, RetryAfter: tt.retryAfter})
			d := proto.Decide(Input{Record: claimed(now), Now: now, Answer: a, Failures: tt.failures})
			if d.RequeueAfter != tt.want || !d.ClearClaim {
				t.Errorf("requeue %s clear %v, want %s and the claim cleared (429 refuses the message)", d.RequeueAfter, d.ClearClaim, tt.want)
			}
		})
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

// TestEveryFailureClassIsBounded runs one object through 10 minutes of
// each kind of failure, reconciled as often as anything could trigger it
// (every 100ms), applying decisions the way the driver does, and counts
// calls to Mailgun and apiserver writes (a claim, a cleared claim, a
// changed condition). The bound is 12 calls and 25 writes.
func TestEveryFailureClassIsBounded(t *testing.T) {
	rateLimitedNoHint := &mailer.SendError{Class: mailer.ClassRateLimited, StatusCode: 429}
	rateLimitedHint := &mailer.SendError{Class: mailer.ClassRateLimited, StatusCode: 429, RetryAfter: time.Second}
	tests := []struct {
		name string
		// err is the answer to every call to Mailgun.
		err error
		// sends is how many sends the outage may cost: one if the first
		// may have been accepted (it is looked up, never sent again).
		maxSends int
	}{
		{"unreachable (connection refused)", mailgunErr(mailer.ClassUnreachable), 12},
		{"429 without Retry-After or X-RateLimit-Reset", rateLimitedNoHint, 12},
		{"429 with Retry-After: 1", rateLimitedHint, 12},
		{"5xx: maybe accepted", mailgunErr(mailer.ClassUnavailable), 1},
		{"timeout: outcome unknown", mailgunErr(mailer.ClassOutcomeUnknown), 1},
		{"the operator's own rate limit", &mailer.SendError{Class: mailer.ClassUnreachable, Message: "throttled"}, 12},
		// Checked again every recheck interval, never sent.
		{"credentials refused", &mailer.SendError{Class: mailer.ClassUnauthorized, StatusCode: 401}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls, writes, sends := simulateOutage(t, tt.err, 10*time.Minute)
			t.Logf("%d Mailgun calls (%d sends), %d writes in 10 minutes", calls, sends, writes)
			if calls > 12 || writes > 25 {
				t.Errorf("%d Mailgun calls and %d writes in 10 minutes, want at most 12 and 25", calls, writes)
			}
			if sends > tt.maxSends {
				t.Errorf("%d sends, want at most %d", sends, tt.maxSends)
			}
		})
	}
}

// TestLookupsAreSpacedByAge: while an attempt with no definite answer
// settles for Mailgun's half hour, a message whose events lag is found in
// about as much time again as its lag, and the lookups stay few.
func TestLookupsAreSpacedByAge(t *testing.T) {
	p := proto
	p.SettleTime = 35 * time.Minute
	for _, lag := range []time.Duration{3 * time.Second, 3 * time.Minute, 20 * time.Minute} {
		claim := now
		clock, lookups := claim.Add(p.Backoff), 0
		for ; lookups < 100; lookups++ {
			found := clock.Sub(claim) >= lag
			d := p.Decide(Input{Record: claimed(claim), Now: clock, Answer: &Answer{Op: OpLookup, Found: found}})
			if found {
				if d.State != Accepted {
					t.Fatalf("lag %s: found, decision %+v", lag, d)
				}
				break
			}
			if d.Op == OpClaim {
				t.Fatalf("lag %s: sent again at %s, within the settle time", lag, clock.Sub(claim))
			}
			if d.RequeueAfter <= 0 || d.RequeueAfter > p.MaxBackoff {
				t.Fatalf("lag %s: wait %s, want within (0, %s]", lag, d.RequeueAfter, p.MaxBackoff)
			}
			clock = clock.Add(d.RequeueAfter)
		}
		found := clock.Sub(claim)
		t.Logf("lag %s: found after %s with %d lookups", lag, found, lookups+1)
		if found > 2*lag+p.Backoff || lookups+1 > 14 {
			t.Errorf("lag %s: found after %s with %d lookups, want within %s and at most 14 lookups", lag, found, lookups+1, 2*lag+p.Backoff)
		}
	}
}

// simulateOutage applies Decide's decisions as the driver does, with every
// call to Mailgun failing with err, for d of reconciles every 100ms.
func simulateOutage(t *testing.T, err error, d time.Duration) (calls, writes, sends int) {
	t.Helper()
	refusesSettings := mailer.RefusesSettings(err)
	rec := Record{MessageID: msgID}
	var hold *Hold
	var cond Condition
	unsent := ""
	failures, recheck := 0, false
	for clock := now; clock.Before(now.Add(d)); clock = clock.Add(100 * time.Millisecond) {
		in := Input{Record: rec, Now: clock, Hold: hold, Failures: failures, Recheck: recheck, Verify: true, ClaimUnsent: rec.Claim != "" && rec.Claim == unsent}
		dec := proto.Decide(in)
		for steps := 0; dec.Op != OpNone; steps++ {
			if steps >= 4 {
				t.Fatalf("more than 4 steps in one reconcile")
			}
			in.Answer = &Answer{Op: dec.Op}
			switch dec.Op {
			case OpClaim:
				writes++
				rec.Claim = dec.Claim
			case OpVerify:
				// The driver reports only refused settings from the check.
				calls++
				if refusesSettings {
					in.Answer = Failed(dec.Op, err)
				}
			case OpSend, OpLookup:
				calls++
				if dec.Op == OpSend {
					sends++
				}
				in.Answer = Failed(dec.Op, err)
			}
			in.Record, in.Failures, in.Recheck, in.ClaimUnsent = rec, dec.Failures, dec.Recheck, false
			dec = proto.Decide(in)
		}
		if dec.ClearClaim {
			unsent, rec.Claim = rec.Claim, ""
			writes++
		}
		if dec.Condition != nil && *dec.Condition != cond {
			cond = *dec.Condition
			writes++
		}
		hold, failures, recheck = dec.Hold, dec.Failures, dec.Recheck
	}
	return calls, writes, sends
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
	check("Recheck", got.Recheck, want.Recheck)
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
