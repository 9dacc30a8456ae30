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

// Package sendprotocol decides, for one object that must cause exactly one
// email, what to do next: send, look the message up, wait, or nothing.
//
// Sending is not idempotent and Mailgun's answers can be lost or ambiguous
// (it may queue a message and still answer 5xx), so every send is preceded
// by a durable claim on the object:
//
//	NotClaimed --claim written--> Claimed --send accepted--> Accepted
//	                                 |
//	                                 +--refused--> NotClaimed (claim cleared, retry per Policy)
//	                                 +--no definite answer--> OutcomeUnknown
//	OutcomeUnknown --lookup finds it--> Accepted
//	OutcomeUnknown --not found after the settle time--> NotClaimed (send again)
//
// A claim found at the start of a reconcile is OutcomeUnknown unless this
// process knows it never sent with it, or that Mailgun accepted it. Between
// Mailgun calls the object is OnHold: reconciles caused by its own writes
// do not call Mailgun again before the hold ends. The hold grows with one
// failure count for every class of failure, kept until an acceptance, which
// is what bounds the request and write rates in any outage.
//
// The package knows nothing of the object's kind: the caller maps its
// fields to a Record and applies the Decision's writes and condition.
// Decide is a pure function of its Input, the clock included.
package sendprotocol

import (
	"fmt"
	"strings"
	"time"
)

// State is where an object stands in the protocol.
type State string

const (
	// NotClaimed means nothing accepted and no send pending; the next step is to
	// write a claim.
	NotClaimed State = "NotClaimed"
	// Claimed means a claim is durably written; the send may go out.
	Claimed State = "Claimed"
	// OutcomeUnknown means a send may have been accepted; Mailgun's events are
	// consulted until the settle time has passed.
	OutcomeUnknown State = "OutcomeUnknown"
	// Accepted means Mailgun accepted the message; nothing more is sent.
	Accepted State = "Accepted"
	// OnHold means waiting before calling Mailgun again, after a failure, or
	// until the spec or settings change after a refusal.
	OnHold State = "OnHold"
)

// Record is what the object durably records about its message.
type Record struct {
	// MessageID is the Message-Id the message is sent with; every attempt
	// and lookup uses it.
	MessageID string
	// Claim is the raw value of the pending claim, "" if none: the time the
	// attempt started (RFC 3339) and the replica that made it, see
	// ClaimValue.
	Claim string
	// AcceptedID is the ID Mailgun returned on acceptance, "" until then.
	AcceptedID string
}

// ClaimValue is the claim holder writes for an attempt starting at now:
// "<RFC 3339 time> <holder>". It is unique per attempt (the time has
// nanoseconds), so the claim on the object tells which attempt, by which
// replica, is the current one: a replica sends only while the live object
// still carries its own claim.
func ClaimValue(now time.Time, holder string) string {
	v := now.UTC().Format(time.RFC3339Nano)
	if holder != "" {
		v += " " + holder
	}
	return v
}

// claimTime is the time a claim was made; claims written by earlier
// versions hold only the time.
func claimTime(claim string) (time.Time, error) {
	ts, _, _ := strings.Cut(claim, " ")
	return time.Parse(time.RFC3339Nano, ts)
}

// Op is a step the caller performs for the protocol.
type Op string

const (
	// OpNone means nothing to do now.
	OpNone Op = ""
	// OpVerify checks the credentials with Mailgun before claiming.
	OpVerify Op = "Verify"
	// OpClaim durably writes Decision.Claim with optimistic locking.
	OpClaim Op = "Claim"
	// OpSend sends with Record.MessageID.
	OpSend Op = "Send"
	// OpLookup looks Record.MessageID up in Mailgun's events.
	OpLookup Op = "Lookup"
)

// Answer is the outcome of the step the previous Decision asked for.
type Answer struct {
	Op Op
	// Found means the lookup found the message accepted.
	Found bool
	// AcceptedID is the ID Mailgun returned for the send.
	AcceptedID string
	// Class classifies Err; it is ignored when Err is nil.
	Class Class
	// Err is the failure of the step, nil on success.
	Err error
	// RetryAfter is how long Mailgun asked to wait (429), 0 if it did not say.
	RetryAfter time.Duration
}

// Hold is a pause on calls to Mailgun for one object.
type Hold struct {
	// Until is when calls may resume; zero means only after the spec or the
	// settings change.
	Until time.Time
}

// active reports whether h still holds calls back at now.
func (h *Hold) active(now time.Time) bool {
	return h != nil && (h.Until.IsZero() || now.Before(h.Until))
}

// Input is everything Decide looks at.
type Input struct {
	Record Record
	Now    time.Time
	// Answer is the result of the previous Decision's Op in this reconcile;
	// nil at the start of a reconcile.
	Answer *Answer
	// Hold is the last hold set for the object's current spec and
	// settings, nil if none; Decide ignores it once it has ended.
	Hold *Hold
	// ClaimUnsent means this process knows that no message went out under
	// Record.Claim (its claim write failed before the send, Mailgun
	// refused the send, or the fence withheld it), so there is nothing to
	// wait for.
	ClaimUnsent bool
	// Failures is the number of failed Mailgun calls since the last
	// acceptance, or since the spec or the settings last changed.
	Failures int
	// Verify means check the credentials before the first attempt, and
	// before the attempt after Recheck.
	Verify bool
	// Recheck means the last failure was Mailgun refusing the settings
	// (the previous Decision's Recheck): check them again before claiming,
	// which costs no write while they are still refused.
	Recheck bool
	// Paused means the object must not start a send (its Cluster is
	// paused, e.g. by clusterctl move, which waits for pending sends to be
	// resolved): a pending attempt is still looked up, and one that proves
	// unsent, or not accepted after the settle time, is dropped instead of
	// sent again.
	Paused bool
	// KnownAccepted is the ID Mailgun returned, to this process, for a
	// send with Record.MessageID whose record has not been written yet
	// (the write failed or its answer was lost). Mailgun's events may not
	// show the message for many minutes, so a lookup is no substitute.
	KnownAccepted string
}

// Condition is what the object's condition should say; Status is "True",
// "False" or "Unknown".
type Condition struct {
	Status  string
	Reason  string
	Message string
}

// Decision is what to do next.
type Decision struct {
	State State
	// Op is the next step; OpNone ends the reconcile.
	Op Op
	// Claim is the claim value to write for OpClaim.
	Claim string
	// ClearClaim means remove the claim from the object (nothing was accepted).
	ClearClaim bool
	// Accept records the message as accepted with this ID.
	Accept string
	// Condition to set, nil to leave it.
	Condition *Condition
	// RequeueAfter is when to reconcile again; 0 means only on a change.
	RequeueAfter time.Duration
	// Hold is the hold to keep until then, nil to end any hold.
	Hold *Hold
	// Failures is the new count of failed Mailgun calls.
	Failures int
	// Recheck is the next Input's Recheck.
	Recheck bool
	// Err is returned from the reconcile: a failure the controller retries
	// with its own backoff (an apiserver write that failed).
	Err error
	// Quiet means the failure is part of normal operation (a write
	// conflict, a send withheld by the fence); log Detail at debug level
	// only.
	Quiet  bool
	Detail string
}

// Protocol holds the timings. Every field must be positive; the operator
// sets them from its flags.
type Protocol struct {
	// SettleTime is how long after an attempt with no definite answer the
	// message is looked up before it is sent again.
	SettleTime time.Duration
	// RecheckInterval is how long to wait after Mailgun refused the
	// credentials or the recipient.
	RecheckInterval time.Duration
	// Backoff is the delay after the first failed call; it doubles with
	// each further failure up to MaxBackoff.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// ConflictDelay is how soon a reconcile that lost a write race
	// retries. (A send the fence withheld waits the backoff.)
	ConflictDelay time.Duration
	// Holder identifies this replica in its claims.
	Holder string
}

// backoff is the delay after the n-th consecutive failure (n >= 1).
func (p Protocol) backoff(n int) time.Duration {
	d := p.Backoff
	for i := 1; i < n && d < p.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, p.MaxBackoff)
}

// Decide returns the next step for in.
func (p Protocol) Decide(in Input) Decision {
	rec := in.Record
	if in.Answer == nil {
		switch {
		case rec.AcceptedID != "":
			return Decision{State: Accepted}
		case in.KnownAccepted != "":
			return accepted(in.KnownAccepted, "Mailgun accepted the request email, message ID "+in.KnownAccepted)
		case in.Hold.active(in.Now):
			d := Decision{State: OnHold, Hold: in.Hold, Failures: in.Failures, Recheck: in.Recheck}
			if !in.Hold.Until.IsZero() {
				d.RequeueAfter = in.Hold.Until.Sub(in.Now)
			}
			return d
		case rec.Claim != "" && !in.ClaimUnsent:
			return Decision{State: OutcomeUnknown, Op: OpLookup, Failures: in.Failures}
		case in.Paused:
			return standDown(in)
		case in.Verify && (in.Failures == 0 || in.Recheck):
			// Before the first attempt, and after a refusal of the
			// settings; not before every retry in an outage, which would
			// double the calls.
			return Decision{State: NotClaimed, Op: OpVerify, Failures: in.Failures}
		}
		return p.claim(in)
	}

	// The failure count is kept until an acceptance (the caller resets it
	// when the spec or the settings change): whatever answered in between
	// (a domain check, a lookup, a refusal that cleared the claim) proves
	// nothing about the next call, and starting the backoff over on it is
	// what let an outage cost a call and three writes a second.
	a := in.Answer
	if a.Err != nil {
		return p.failed(in)
	}
	switch a.Op {
	case OpVerify:
		return p.claim(in)
	case OpClaim:
		return Decision{State: Claimed, Op: OpSend, Failures: in.Failures}
	case OpSend:
		return accepted(a.AcceptedID, "Mailgun accepted the request email, message ID "+a.AcceptedID)
	case OpLookup:
		if a.Found {
			return accepted(rec.MessageID, "Mailgun's events show the request email was accepted, message ID "+rec.MessageID)
		}
		return p.settle(in)
	}
	panic(fmt.Sprintf("sendprotocol: answer to unknown op %q", a.Op))
}

func (p Protocol) claim(in Input) Decision {
	if in.Paused {
		return standDown(in)
	}
	return Decision{State: NotClaimed, Op: OpClaim, Claim: ClaimValue(in.Now, p.Holder), Failures: in.Failures}
}

// standDown is what a paused object does instead of a new attempt: drop
// the claim of one known not to have been accepted, and wait for the
// pause to end.
func standDown(in Input) Decision {
	if in.Record.Claim == "" {
		return Decision{State: NotClaimed, Failures: in.Failures}
	}
	return Decision{State: NotClaimed, ClearClaim: true, Failures: in.Failures, Condition: &Condition{
		Status: "False", Reason: ReasonPaused, Message: fmt.Sprintf(
			"the send attempt at %s is known not to have been accepted; no new attempt starts while the object or its Cluster is paused",
			in.Record.Claim)}}
}

func accepted(id, msg string) Decision {
	return Decision{
		State: Accepted, Accept: id,
		Condition: &Condition{Status: "True", Reason: ReasonAccepted, Message: msg},
	}
}

// settle handles a lookup that did not find the message: wait until the
// settle time after the attempt has passed, then send again. Mailgun's
// events lag, most within seconds and some by many minutes, so the lookups
// are spaced by the attempt's age: early ones find most messages soon, and
// a settle time of half an hour costs a dozen lookups, not hundreds.
func (p Protocol) settle(in Input) Decision {
	at, err := claimTime(in.Record.Claim)
	if err != nil {
		// A claim we cannot read was edited by hand; treat the attempt as
		// long past rather than wait forever.
		return p.claim(in)
	}
	deadline := at.Add(p.SettleTime)
	if !in.Now.Before(deadline) {
		return p.claim(in)
	}
	wait := min(deadline.Sub(in.Now), max(in.Now.Sub(at), p.Backoff), p.MaxBackoff)
	return Decision{
		State: OutcomeUnknown,
		Condition: &Condition{Status: "False", Reason: ReasonOutcomeUnknown, Message: fmt.Sprintf(
			"the send attempt at %s got no definite answer from Mailgun and its events do not show message %s yet; "+
				"sending again at %s unless they do", in.Record.Claim, in.Record.MessageID, deadline.UTC().Format(time.RFC3339))},
		RequeueAfter: wait,
		Hold:         &Hold{Until: in.Now.Add(wait)},
		Failures:     in.Failures,
	}
}

// failed applies the Policy of the failed step's class.
func (p Protocol) failed(in Input) Decision {
	a := in.Answer
	pol := PolicyFor(a.Class)
	if a.Op == OpClaim {
		return p.claimFailed(in, pol)
	}
	n := in.Failures + 1
	var wait time.Duration
	switch pol.Retry {
	case RetryBackoff:
		wait = p.backoff(n)
	case RetryAfterHint:
		// Mailgun's delay is a lower bound, the backoff still grows (a
		// "Retry-After: 1" answered every time must not mean a call a
		// second), and MaxBackoff caps both.
		wait = min(max(a.RetryAfter, p.backoff(n)), p.MaxBackoff)
	case RetryRecheck:
		wait = p.RecheckInterval
	case RetryOnChange:
		wait = 0
	}
	if pol.Quiet {
		// The fence withheld the send: nothing went out, but the claim may
		// no longer be ours to clear. The hold keeps the reconciles our
		// own claim write causes from claiming again at once.
		return Decision{State: Claimed, RequeueAfter: wait, Hold: &Hold{Until: in.Now.Add(wait)}, Failures: n, Quiet: true,
			Detail: fmt.Sprintf("not sending: %v", a.Err)}
	}
	d := Decision{State: OnHold, Failures: n, RequeueAfter: wait, Hold: &Hold{}, Recheck: pol.Retry == RetryRecheck}
	if wait > 0 {
		d.Hold.Until = in.Now.Add(wait)
	}
	action := map[Op]string{
		OpVerify: "checking the Mailgun key and domain",
		OpSend:   "sending the request email",
		OpLookup: "checking in Mailgun's events whether an earlier send attempt was accepted",
	}[a.Op]
	// The message names no retry time: a retry that fails the same way
	// then leaves the status as it was, and costs no write.
	retry := "retrying after a change to the spec or the Mailgun settings"
	switch {
	case pol.Retry == RetryRecheck:
		retry = fmt.Sprintf("retrying every %s, or at once after a change to the spec or the Mailgun settings", p.RecheckInterval)
	case wait > 0:
		retry = fmt.Sprintf("retrying with a growing delay of at most %s", p.MaxBackoff)
	}
	msg := fmt.Sprintf("%s failed: %v; %s", action, a.Err, retry)
	reason := pol.Reason
	if a.Op == OpSend {
		if pol.MaybeAccepted {
			// Mailgun may have queued the message: keep the claim, so the
			// next reconcile looks it up instead of sending.
			d.State = OutcomeUnknown
			reason = ReasonOutcomeUnknown
			msg = fmt.Sprintf("%s got no definite answer (%v): Mailgun may have accepted it; "+
				"looking message %s up in its events before sending again",
				action, a.Err, in.Record.MessageID)
		} else {
			// A definite refusal: nothing was queued.
			d.ClearClaim = true
		}
	}
	d.Condition = &Condition{Status: "False", Reason: reason, Message: msg}
	return d
}

// claimFailed handles a failed claim write: a conflict means our copy was
// stale (another writer, or our own earlier write the cache has not shown
// yet) and is retried quietly; anything else goes back to the controller.
// Either way nothing was sent.
func (p Protocol) claimFailed(in Input, pol Policy) Decision {
	if pol.Retry == RetryConflict {
		return Decision{State: NotClaimed, RequeueAfter: p.ConflictDelay, Failures: in.Failures, Quiet: true,
			Detail: "the object changed while claiming the send; retrying from the newer version"}
	}
	return Decision{State: NotClaimed, Failures: in.Failures, Err: fmt.Errorf("writing the send claim: %w", in.Answer.Err)}
}
