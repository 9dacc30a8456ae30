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
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
)

// Class is what a failed step means for the protocol.
type Class string

// Mailgun's classes come from mailer.Class; the apiserver's are the
// protocol's own.
const (
	ClassOutcomeUnknown Class = Class(mailer.ClassOutcomeUnknown)
	ClassUnavailable    Class = Class(mailer.ClassUnavailable)
	ClassUnreachable    Class = Class(mailer.ClassUnreachable)
	ClassRateLimited    Class = Class(mailer.ClassRateLimited)
	ClassUnauthorized   Class = Class(mailer.ClassUnauthorized)
	ClassForbidden      Class = Class(mailer.ClassForbidden)
	ClassDomainNotFound Class = Class(mailer.ClassDomainNotFound)
	ClassRejected       Class = Class(mailer.ClassRejected)
	ClassTLS            Class = Class(mailer.ClassTLS)
	// ClassConflict means an apiserver write lost an optimistic-locking race.
	ClassConflict Class = "Conflict"
	// ClassAPIServer means any other apiserver failure.
	ClassAPIServer Class = "APIServer"
	// ClassFenced means the send was withheld: this replica's leader
	// election lease is not fresh enough, the live object no longer
	// carries its claim (a successor took over), or the object or its
	// Cluster was paused (clusterctl move) or is gone.
	ClassFenced Class = "Fenced"
)

// Retry says when a failed step is tried again.
type Retry int

const (
	// RetryBackoff retries after the protocol's backoff, doubling per failure.
	RetryBackoff Retry = iota
	// RetryAfterHint retries after the delay Mailgun asked for or the
	// backoff, whichever is longer, at most MaxBackoff.
	RetryAfterHint
	// RetryRecheck retries after the RecheckInterval (or a settings change).
	RetryRecheck
	// RetryOnChange retries only after the spec or the settings change.
	RetryOnChange
	// RetryConflict retries soon and quietly, from the newer version.
	RetryConflict
	// RetryController returns the error; the controller backs off.
	RetryController
)

// Policy is how the protocol treats one class of failure.
type Policy struct {
	// Reason is the condition reason reported.
	Reason string
	// Retry says when to try again.
	Retry Retry
	// MaybeAccepted means that after a send the message may have been queued (no
	// definite refusal); it is looked up, never sent blindly.
	MaybeAccepted bool
	// Quiet means the failure is not the object's (the fence withheld a
	// send): no condition, a debug log line, and the claim stays.
	Quiet bool
}

// Condition reasons the protocol reports, from the API.
const (
	ReasonAccepted       = infrav1.EmailAcceptedReason
	ReasonOutcomeUnknown = infrav1.SendOutcomeUnknownReason
	ReasonPaused         = infrav1.PausedReason
)

// policies is the one table of failure handling. Mailgun documents that a
// 5xx does not mean the message was not queued, so only answers that refuse
// the message (4xx) or a connection that never opened prove nothing went
// out.
var policies = map[Class]Policy{
	ClassOutcomeUnknown: {Reason: infrav1.SendOutcomeUnknownReason, Retry: RetryBackoff, MaybeAccepted: true},
	ClassUnavailable:    {Reason: infrav1.MailgunUnavailableReason, Retry: RetryBackoff, MaybeAccepted: true},
	ClassUnreachable:    {Reason: infrav1.MailgunUnavailableReason, Retry: RetryBackoff},
	ClassRateLimited:    {Reason: infrav1.RateLimitedReason, Retry: RetryAfterHint},
	ClassUnauthorized:   {Reason: infrav1.InvalidCredentialsReason, Retry: RetryRecheck},
	ClassForbidden:      {Reason: infrav1.RecipientNotAuthorizedReason, Retry: RetryRecheck},
	ClassDomainNotFound: {Reason: infrav1.MailgunNotConfiguredReason, Retry: RetryRecheck},
	ClassRejected:       {Reason: infrav1.MessageRejectedReason, Retry: RetryOnChange},
	ClassTLS:            {Reason: infrav1.MailgunNotConfiguredReason, Retry: RetryRecheck},
	ClassConflict:       {Retry: RetryConflict},
	ClassAPIServer:      {Retry: RetryController},
	ClassFenced:         {Retry: RetryBackoff, Quiet: true},
}

// PolicyFor returns the policy of c; unknown classes are treated as
// outcome unknown, the safe side.
func PolicyFor(c Class) Policy {
	if p, ok := policies[c]; ok {
		return p
	}
	return policies[ClassOutcomeUnknown]
}

// Classify returns the class of an error from the mailer or the apiserver,
// and the delay Mailgun asked for, if any.
func Classify(err error) (Class, time.Duration) {
	var se *mailer.SendError
	switch {
	case errors.As(err, &se):
		return Class(se.Class), se.RetryAfter
	case apierrors.IsConflict(err):
		return ClassConflict, 0
	case apierrors.IsNotFound(err), apierrors.IsAlreadyExists(err), isAPIStatus(err):
		return ClassAPIServer, 0
	}
	return ClassOutcomeUnknown, 0
}

func isAPIStatus(err error) bool {
	var s apierrors.APIStatus
	return errors.As(err, &s)
}

// Failed is the Answer for a step that failed with err.
func Failed(op Op, err error) *Answer {
	c, after := Classify(err)
	return &Answer{Op: op, Err: err, Class: c, RetryAfter: after}
}
