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
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
)

// reconcileNormal makes sure Mailgun accepted exactly one request email for
// the MailgunCluster.
//
// Sending is not idempotent, so the controller keeps a durable record around
// every attempt, in annotations (status does not survive clusterctl move):
//
//  1. Before sending it writes the Message-Id it will use and the attempt
//     time, with optimistic locking: a stale cache makes the write fail
//     instead of leading to a second send.
//  2. It sends with that Message-Id.
//  3. On acceptance it records Mailgun's ID. On a clear refusal it clears the
//     attempt time, since nothing was accepted.
//
// If it finds an attempt time but no record (a crash, a lost reply, a failed
// write), it asks Mailgun's events whether that Message-Id was accepted and
// only sends again once they have had SettleTime to show it.
func (r *MailgunClusterReconciler) reconcileNormal(ctx context.Context, s *scope) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	mc := s.mc

	if id := recordedMessageID(mc); id != "" {
		markAccepted(mc, id)
		return ctrl.Result{}, nil
	}

	settings, err := r.Config.Load(ctx)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("loading Mailgun settings: %w", err)
	}
	if err := r.Config.Check(settings); err != nil {
		log.Info("Mailgun is not configured; waiting for the configuration to change", "problems", err.Error())
		setEmailSent(mc, metav1.ConditionFalse, infrav1.MailgunNotConfiguredReason, err.Error())
		return ctrl.Result{}, nil
	}
	if hd, held := r.holds.get(mc, settings, r.now()); held {
		// The conditions already say why we wait.
		if hd.until.IsZero() {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{RequeueAfter: hd.until.Sub(r.now())}, nil
	}
	m := r.NewMailer(settings)

	messageID := mc.Annotations[infrav1.MessageIDAnnotation]
	if messageID == "" {
		messageID = newMessageID(mc.UID, settings.Domain)
	}

	if attemptedAt, pending := mc.Annotations[infrav1.SendAttemptedAtAnnotation]; pending {
		if settled, res, err := r.settleEarlierAttempt(ctx, s, m, settings, messageID, attemptedAt); !settled {
			return res, err
		}
		log.Info("An earlier send attempt was not accepted by Mailgun; sending again", "messageID", messageID, "attemptedAt", attemptedAt)
	}

	if err := s.recordAttempt(ctx, messageID, r.now()); err != nil {
		return ctrl.Result{}, err
	}

	start := r.now()
	id, err := m.Send(ctx, mailer.Request{
		MessageID: messageID,
		Priority:  string(mc.Spec.Priority),
		Body:      mc.Spec.Request,
		Requester: mc.Spec.Requester,
		Object:    types.NamespacedName{Namespace: mc.Namespace, Name: mc.Name}.String(),
		UID:       string(mc.UID),
	})
	elapsed := r.now().Sub(start).Seconds()
	if err != nil {
		se := mailer.AsSendError(err)
		r.Metrics.SendDuration.WithLabelValues(se.Class.String()).Observe(elapsed)
		r.Metrics.EmailsFailed.WithLabelValues(se.Class.String()).Inc()
		if se.Class != mailer.ClassOutcomeUnknown {
			// Mailgun answered, and not with acceptance: nothing was sent,
			// so the next attempt need not wait for the event log.
			delete(mc.Annotations, infrav1.SendAttemptedAtAnnotation)
		}
		return r.mailgunFailed(ctx, mc, settings, se, "sending the request email")
	}
	r.holds.forget(mc.UID)
	r.Metrics.SendDuration.WithLabelValues("accepted").Observe(elapsed)
	r.Metrics.EmailsSent.Inc()
	log.Info("Mailgun accepted the request email", "messageID", id)
	r.Recorder.Eventf(mc, nil, corev1.EventTypeNormal, infrav1.EmailSentCondition, "SendEmail",
		"Mailgun accepted the request email, message ID %s", id)
	markAccepted(mc, id)
	return ctrl.Result{}, nil
}

// settleEarlierAttempt decides what became of an earlier attempt whose
// outcome is unknown. It returns settled=true when that attempt was not
// accepted and it is safe to send again; otherwise the caller returns res, err.
func (r *MailgunClusterReconciler) settleEarlierAttempt(ctx context.Context, s *scope, m Mailer, settings mailer.Settings, messageID, attemptedAt string) (settled bool, res ctrl.Result, err error) {
	mc := s.mc
	accepted, err := m.WasAccepted(ctx, messageID)
	if err != nil {
		r.Metrics.Lookups.WithLabelValues("error").Inc()
		res, err := r.mailgunFailed(ctx, mc, settings, mailer.AsSendError(err),
			"checking in Mailgun's events whether an earlier send attempt was accepted")
		return false, res, err
	}
	if accepted {
		r.Metrics.Lookups.WithLabelValues("accepted").Inc()
		ctrl.LoggerFrom(ctx).Info("Mailgun's events show an earlier send attempt was accepted", "messageID", messageID)
		r.Recorder.Eventf(mc, nil, corev1.EventTypeNormal, infrav1.EmailSentCondition, "SendEmail",
			"Mailgun's events show the request email %s was accepted", messageID)
		markAccepted(mc, messageID)
		return false, ctrl.Result{}, nil
	}
	r.Metrics.Lookups.WithLabelValues("not_found").Inc()

	// A timestamp we cannot parse was edited by hand; treat the attempt as
	// old rather than wait forever.
	at, parseErr := time.Parse(time.RFC3339Nano, attemptedAt)
	if parseErr != nil {
		return true, ctrl.Result{}, nil
	}
	wait := at.Add(r.SettleTime).Sub(r.now())
	if wait <= 0 {
		return true, ctrl.Result{}, nil
	}
	setEmailSent(mc, metav1.ConditionFalse, infrav1.SendOutcomeUnknownReason, fmt.Sprintf(
		"the send attempt at %s got no answer from Mailgun and its events do not show message %s yet; "+
			"sending again at %s unless they do", attemptedAt, messageID, at.Add(r.SettleTime).UTC().Format(time.RFC3339)))
	return false, ctrl.Result{RequeueAfter: min(wait, r.pollInterval())}, nil
}

// pollInterval is how often Mailgun's events are checked while an attempt
// settles.
func (r *MailgunClusterReconciler) pollInterval() time.Duration {
	return max(r.SettleTime/4, time.Second)
}

// mailgunFailed reports a failed Mailgun call in the conditions, an event
// and the log, and decides when to try again.
func (r *MailgunClusterReconciler) mailgunFailed(ctx context.Context, mc *infrav1.MailgunCluster, settings mailer.Settings, se *mailer.SendError, action string) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	var (
		reason string
		res    ctrl.Result
		retErr error
	)
	switch se.Class {
	case mailer.ClassUnauthorized:
		reason, res = infrav1.InvalidCredentialsReason, ctrl.Result{RequeueAfter: r.RecheckInterval}
	case mailer.ClassForbidden:
		reason, res = infrav1.RecipientNotAuthorizedReason, ctrl.Result{RequeueAfter: r.RecheckInterval}
	case mailer.ClassDomainNotFound:
		reason, res = infrav1.MailgunNotConfiguredReason, ctrl.Result{RequeueAfter: r.RecheckInterval}
	case mailer.ClassRejected:
		// Terminal: retrying the same message gets the same answer. A spec
		// or configuration change triggers a new attempt.
		reason = infrav1.MessageRejectedReason
	case mailer.ClassRateLimited:
		reason = infrav1.RateLimitedReason
		if se.RetryAfter > 0 {
			res = ctrl.Result{RequeueAfter: se.RetryAfter}
		} else {
			retErr = se
		}
	case mailer.ClassUnavailable:
		reason, retErr = infrav1.MailgunUnavailableReason, se
	default:
		reason, res = infrav1.SendOutcomeUnknownReason, ctrl.Result{RequeueAfter: r.pollInterval()}
	}
	switch {
	case se.Class == mailer.ClassRejected:
		r.holds.set(mc, settings, time.Time{})
	case res.RequeueAfter > 0 && se.Class != mailer.ClassOutcomeUnknown:
		r.holds.set(mc, settings, r.now().Add(res.RequeueAfter))
	}
	msg := fmt.Sprintf("%s failed: %s", action, se.Error())
	setEmailSent(mc, metav1.ConditionFalse, reason, msg)
	r.Recorder.Eventf(mc, nil, corev1.EventTypeWarning, reason, "SendEmail", "%s", msg)
	if retErr != nil {
		// The controller logs returned errors and retries with backoff.
		return ctrl.Result{}, fmt.Errorf("%s: %w", action, retErr)
	}
	log.Info("Mailgun call failed", "action", action, "reason", reason, "error", se.Error(), "retryAfter", res.RequeueAfter)
	return res, nil
}

// recordedMessageID returns the ID of the accepted request email, if any:
// the annotation is authoritative; status alone covers objects written by
// earlier versions of the provider.
func recordedMessageID(mc *infrav1.MailgunCluster) string {
	if id := mc.Annotations[infrav1.AcceptedMessageIDAnnotation]; id != "" {
		return id
	}
	return mc.Status.MessageID
}

// markAccepted records an accepted email on the object, to be persisted by
// the final patch.
func markAccepted(mc *infrav1.MailgunCluster, id string) {
	if mc.Annotations == nil {
		mc.Annotations = map[string]string{}
	}
	mc.Annotations[infrav1.AcceptedMessageIDAnnotation] = id
	delete(mc.Annotations, infrav1.SendAttemptedAtAnnotation)
	mc.Status.MessageID = id
	mc.Status.Initialization.Provisioned = ptr.To(true)
	setEmailSent(mc, metav1.ConditionTrue, infrav1.EmailAcceptedReason, fmt.Sprintf("Mailgun accepted the request email, message ID %s", id))
}

// newMessageID derives the Message-Id of a MailgunCluster's request email
// from its UID, so that it is the same in every attempt.
func newMessageID(uid types.UID, domain string) string {
	return fmt.Sprintf("<mailguncluster.%s@%s>", uid, domain)
}

// holds remembers, per MailgunCluster, not to call Mailgun again before a
// given time, or at all for a message Mailgun rejected as invalid. Without
// it, the update event of our own status write would trigger an immediate
// retry, ignoring Mailgun's rate-limit reset and hammering it with a
// rejected key. A hold ends early when the spec or the Mailgun settings
// change; it is not kept across restarts, which at most costs one attempt.
type holds struct {
	mu sync.Mutex
	m  map[types.UID]hold
}

type hold struct {
	// key identifies the generation and settings the hold applies to.
	key string
	// until is when calls may resume; zero means only after a change.
	until time.Time
}

func holdKey(mc *infrav1.MailgunCluster, s mailer.Settings) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d\x00%s\x00%s\x00%s\x00%s", mc.Generation, s.Domain, s.Recipient, s.APIBase, s.APIKey)
	return hex.EncodeToString(h.Sum(nil))
}

// get returns the hold on mc that still applies at now.
func (h *holds) get(mc *infrav1.MailgunCluster, s mailer.Settings, now time.Time) (hold, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hd, ok := h.m[mc.UID]
	if !ok || hd.key != holdKey(mc, s) || (!hd.until.IsZero() && !now.Before(hd.until)) {
		return hold{}, false
	}
	return hd, true
}

func (h *holds) set(mc *infrav1.MailgunCluster, s mailer.Settings, until time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[types.UID]hold{}
	}
	h.m[mc.UID] = hold{key: holdKey(mc, s), until: until}
}

func (h *holds) forget(uid types.UID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.m, uid)
}
