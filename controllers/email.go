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
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"
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

	resend := resendRequested(mc)
	if id := recordedMessageID(mc); id != "" && !resend {
		markAccepted(mc, id)
		return r.trackDelivery(ctx, mc, id)
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
	if r.Credentials != nil {
		// A key, domain or region Mailgun refuses is reported before any
		// send; transient lookup failures are left to the send itself.
		if err := r.Credentials.Verify(ctx, settings); err != nil {
			if se := mailer.AsSendError(err); se.Class == mailer.ClassUnauthorized || se.Class == mailer.ClassDomainNotFound || se.Class == mailer.ClassForbidden {
				return r.mailgunFailed(ctx, mc, settings, se, "checking the Mailgun key and domain")
			}
		}
	}
	if resend {
		if err := s.startResend(ctx, settings.Domain); err != nil {
			return ctrl.Result{}, err
		}
		log.Info("Resend requested; sending a new request email", "request", mc.Annotations[infrav1.ResendRequestAnnotation])
		r.Recorder.Eventf(mc, nil, corev1.EventTypeNormal, "ResendRequested", "SendEmail",
			"resend requested (%s); the earlier message IDs are in the %s annotation",
			mc.Annotations[infrav1.ResendRequestAnnotation], infrav1.MessageIDHistoryAnnotation)
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
	return r.newlyAccepted(mc, id), nil
}

// newlyAccepted records an email Mailgun just accepted, or was just found
// to have accepted, and schedules the first look at its delivery.
func (r *MailgunClusterReconciler) newlyAccepted(mc *infrav1.MailgunCluster, id string) ctrl.Result {
	markAccepted(mc, id)
	setDeliveryPending(mc, id)
	r.deliveryPolls.store(mc.UID, r.now().Add(r.DeliveryPollInterval))
	return ctrl.Result{RequeueAfter: r.DeliveryPollInterval}
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
		return false, r.newlyAccepted(mc, messageID), nil
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
		se = &mailer.SendError{Class: se.Class, StatusCode: se.StatusCode, Err: se.Err, Message: fmt.Sprintf(
			"%s: Mailgun does not know domain %q at %s; check the domain name, and the region: EU domains need mailgun_api_base https://api.eu.mailgun.net/v3",
			se.Message, settings.Domain, settings.APIBase)}
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
// the annotation is authoritative; status alone counts only for objects
// written by earlier versions of the provider, which had no annotations.
func recordedMessageID(mc *infrav1.MailgunCluster) string {
	if id := mc.Annotations[infrav1.AcceptedMessageIDAnnotation]; id != "" {
		return id
	}
	if mc.Annotations[infrav1.MessageIDAnnotation] == "" {
		return mc.Status.MessageID
	}
	return ""
}

// resendRequested reports whether the user asked for a new email that the
// controller has not taken on yet.
func resendRequested(mc *infrav1.MailgunCluster) bool {
	req := mc.Annotations[infrav1.ResendRequestAnnotation]
	return req != "" && req != mc.Annotations[infrav1.ResendHandledAnnotation]
}

// maxHistory bounds the message ID history kept in the annotation.
const maxHistory = 20

// resendMessageID derives the Message-Id of the email for one resend
// request, so that every attempt for that request uses the same ID.
func resendMessageID(uid types.UID, domain, request string) string {
	h := sha256.Sum256([]byte(request))
	return fmt.Sprintf("<mailguncluster.%s.resend-%s@%s>", uid, hex.EncodeToString(h[:6]), domain)
}

// withNewRequest moves mc's annotations to a new request: the accepted ID
// goes into the history, the new request gets its own Message-Id.
func withNewRequest(mc *infrav1.MailgunCluster, domain string) {
	ann := mc.Annotations
	var history []string
	if h := ann[infrav1.MessageIDHistoryAnnotation]; h != "" {
		history = strings.Split(h, ",")
	}
	if prev := recordedMessageID(mc); prev != "" {
		history = append(history, prev)
	}
	if len(history) > maxHistory {
		history = history[len(history)-maxHistory:]
	}
	req := ann[infrav1.ResendRequestAnnotation]
	ann[infrav1.MessageIDHistoryAnnotation] = strings.Join(history, ",")
	ann[infrav1.MessageIDAnnotation] = resendMessageID(mc.UID, domain, req)
	ann[infrav1.ResendHandledAnnotation] = req
	delete(ann, infrav1.AcceptedMessageIDAnnotation)
	delete(ann, infrav1.SendAttemptedAtAnnotation)
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

// setDeliveryPending starts following the delivery of a newly accepted email.
func setDeliveryPending(mc *infrav1.MailgunCluster, id string) {
	conditions.Set(mc, metav1.Condition{
		Type: infrav1.EmailDeliveredCondition, Status: metav1.ConditionUnknown, Reason: infrav1.DeliveryPendingReason,
		Message: fmt.Sprintf("waiting for Mailgun to deliver %s", id),
	})
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
	perObject[hold]
}

type hold struct {
	// key identifies the generation and settings the hold applies to.
	key string
	// until is when calls may resume; zero means only after a change.
	until time.Time
}

func holdKey(mc *infrav1.MailgunCluster, s mailer.Settings) string {
	return fmt.Sprintf("%d/%s", mc.Generation, s.Fingerprint())
}

// get returns the hold on mc that still applies at now.
func (h *holds) get(mc *infrav1.MailgunCluster, s mailer.Settings, now time.Time) (hold, bool) {
	hd, ok := h.load(mc.UID)
	if !ok || hd.key != holdKey(mc, s) || (!hd.until.IsZero() && !now.Before(hd.until)) {
		return hold{}, false
	}
	return hd, true
}

func (h *holds) set(mc *infrav1.MailgunCluster, s mailer.Settings, until time.Time) {
	h.store(mc.UID, hold{key: holdKey(mc, s), until: until})
}

// perObject is in-memory state kept per MailgunCluster by the reconciler.
// It is not kept across restarts.
type perObject[T any] struct {
	mu sync.Mutex
	m  map[types.UID]T
}

func (p *perObject[T]) load(uid types.UID) (T, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.m[uid]
	return v, ok
}

func (p *perObject[T]) store(uid types.UID, v T) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[types.UID]T{}
	}
	p.m[uid] = v
}

func (p *perObject[T]) forget(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, uid)
}
