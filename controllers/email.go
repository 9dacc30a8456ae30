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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/sendprotocol"
)

// reconcileNormal makes sure Mailgun accepted exactly one request email for
// the MailgunCluster. What to do next (claim, send, look up, wait) is
// decided by the send protocol (internal/sendprotocol); this function only
// performs its steps and applies its decisions to the object.
func (r *MailgunClusterReconciler) reconcileNormal(ctx context.Context, s *scope) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	mc := s.mc

	if ok, err := r.vetSendRecord(ctx, s); !ok || err != nil {
		return ctrl.Result{}, err
	}

	resend, problem := pendingResend(mc)
	if problem != "" {
		r.warnResendOnce(ctx, mc, problem)
	}
	if id := recordedMessageID(mc); id != "" && resend == "" {
		markAccepted(mc, id)
		return r.trackDelivery(ctx, mc, id)
	}

	settings, unusable, err := r.Settings.For(ctx, mc.Namespace, mc.Spec.IdentityRef)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("loading Mailgun settings: %w", err)
	}
	if unusable != nil {
		// The watches on the settings objects, identities and namespaces
		// bring us back.
		log.Info("Not sending: the Mailgun settings are not usable; waiting for them to change", "reason", unusable.Reason, "problems", unusable.Message)
		setEmailSent(mc, metav1.ConditionFalse, unusable.Reason, unusable.Message)
		return ctrl.Result{}, nil
	}
	if msg := sendDomainChanged(mc, settings.Domain, r.memory.load(mc).unsentClaim); msg != "" {
		log.Info("Not sending: "+msg, "reason", infrav1.SettingsChangedDuringSendReason)
		setEmailSent(mc, metav1.ConditionFalse, infrav1.SettingsChangedDuringSendReason, msg)
		return ctrl.Result{}, nil
	}
	if resend != "" {
		if err := s.startResend(ctx, settings.Domain); err != nil {
			return ctrl.Result{}, err
		}
		log.Info("Resend requested; sending a new request email", "request", mc.Annotations[infrav1.ResendRequestAnnotation])
		r.Recorder.Eventf(mc, nil, corev1.EventTypeNormal, "ResendRequested", "SendEmail",
			"resend requested (%s); the earlier message IDs are in the %s annotation",
			mc.Annotations[infrav1.ResendRequestAnnotation], infrav1.MessageIDHistoryAnnotation)
	}
	messageID := mc.Annotations[infrav1.MessageIDAnnotation]
	if messageID == "" {
		// Written with the first claim.
		messageID = newMessageID(mc.UID, settings.Domain)
	}

	return r.apply(ctx, mc, r.runProtocol(ctx, s, settings, messageID))
}

// runProtocol asks the send protocol for the next step, performs it and
// asks again until the protocol has nothing more to do in this reconcile.
// It keeps the per-object memory (hold, failure count) across reconciles.
func (r *MailgunClusterReconciler) runProtocol(ctx context.Context, s *scope, settings mailer.Settings, messageID string) sendprotocol.Decision {
	log := ctrl.LoggerFrom(ctx)
	mc := s.mc
	mem := r.memory.load(mc)
	key := holdKey(mc, settings)
	in := sendprotocol.Input{
		Record:      sendRecord(mc, messageID),
		Now:         time.Now(),
		ClaimUnsent: mem.unsentClaim != "" && mem.unsentClaim == mc.Annotations[infrav1.SendAttemptedAtAnnotation],
		Failures:    mem.failures,
		Verify:      r.Credentials != nil,
	}
	if mem.holdKey == key {
		in.Hold = mem.hold
	}
	steps := sendSteps{r: r, s: s, m: r.NewMailer(settings), settings: settings, messageID: messageID, mem: &mem}
	d := r.Protocol.Decide(in)
	// A reconcile takes at most four steps: verify, look up, claim, send.
	for range 4 {
		log.V(4).Info("Send protocol", "state", d.State, "next", d.Op, "failures", d.Failures)
		if d.Op == sendprotocol.OpNone {
			break
		}
		in.Answer = steps.do(ctx, d)
		in.Record, in.Now, in.Failures = sendRecord(mc, messageID), time.Now(), d.Failures
		in.ClaimUnsent = false
		d = r.Protocol.Decide(in)
	}
	mem.hold, mem.holdKey, mem.failures = d.Hold, key, d.Failures
	r.memory.store(mc, mem)
	return d
}

// sendRecord maps the object's annotations to the protocol's record.
func sendRecord(mc *infrav1.MailgunCluster, messageID string) sendprotocol.Record {
	return sendprotocol.Record{
		MessageID:  messageID,
		Claim:      mc.Annotations[infrav1.SendAttemptedAtAnnotation],
		AcceptedID: mc.Annotations[infrav1.AcceptedMessageIDAnnotation],
	}
}

// sendSteps performs the protocol's steps for one reconcile.
type sendSteps struct {
	r        *MailgunClusterReconciler
	s        *scope
	m        Mailer
	settings mailer.Settings
	// messageID is the Message-Id of the current request.
	messageID string
	mem       *objectMemory
}

func (st sendSteps) do(ctx context.Context, d sendprotocol.Decision) *sendprotocol.Answer {
	mc, metrics, messageID := st.s.mc, st.r.Metrics, st.messageID
	switch d.Op {
	case sendprotocol.OpVerify:
		// A key, domain or region Mailgun refuses is reported before any
		// send; transient lookup failures are left to the send itself.
		if err := st.r.Credentials.Verify(ctx, st.settings); mailer.RefusesSettings(err) {
			return sendprotocol.Failed(d.Op, err)
		}
		return &sendprotocol.Answer{Op: d.Op}
	case sendprotocol.OpClaim:
		if err := st.s.recordAttempt(ctx, messageID, d.Claim, st.settings.Domain); err != nil {
			if !apierrors.IsConflict(err) {
				// The write may have landed although we got no answer; we
				// know nothing was sent under it.
				st.mem.unsentClaim = d.Claim
			}
			return sendprotocol.Failed(d.Op, err)
		}
		return &sendprotocol.Answer{Op: d.Op}
	case sendprotocol.OpSend:
		sendCtx, err := st.fence(ctx)
		if err != nil {
			return &sendprotocol.Answer{Op: d.Op, Err: err, Class: sendprotocol.ClassFenced}
		}
		start := time.Now()
		id, err := st.m.Send(sendCtx, mailer.Request{
			MessageID: messageID,
			Priority:  string(mc.Spec.Priority),
			Body:      mc.Spec.Request,
			Requester: mc.Spec.Requester,
			Object:    types.NamespacedName{Namespace: mc.Namespace, Name: mc.Name}.String(),
			UID:       string(mc.UID),
		})
		elapsed := time.Since(start).Seconds()
		if err != nil {
			class := mailer.AsSendError(err).Class.String()
			metrics.SendDuration.WithLabelValues(class).Observe(elapsed)
			metrics.EmailsFailed.WithLabelValues(class).Inc()
			return sendprotocol.Failed(d.Op, err)
		}
		metrics.SendDuration.WithLabelValues("accepted").Observe(elapsed)
		metrics.EmailsSent.Inc()
		return &sendprotocol.Answer{Op: d.Op, AcceptedID: id}
	case sendprotocol.OpLookup:
		found, err := st.m.WasAccepted(ctx, messageID)
		switch {
		case err != nil:
			metrics.Lookups.WithLabelValues("error").Inc()
			return sendprotocol.Failed(d.Op, err)
		case found:
			metrics.Lookups.WithLabelValues("accepted").Inc()
		default:
			metrics.Lookups.WithLabelValues("not_found").Inc()
		}
		return &sendprotocol.Answer{Op: d.Op, Found: found}
	}
	panic(fmt.Sprintf("unknown send protocol step %q", d.Op))
}

// fence allows a send only while nobody else can be sending: this replica
// holds its lease with time to spare (a replica frozen after its claim
// loses it, and a successor may have taken over), and the live object, read
// past the cache, still carries this attempt's claim and no accepted email
// (a successor that took over re-claims first). It returns the context to
// send with: nothing of the send is written after the lease's time is up,
// so a replica frozen after these checks cannot send late.
func (st sendSteps) fence(ctx context.Context) (context.Context, error) {
	if st.r.Lease != nil {
		until, err := st.r.Lease.Held()
		if err != nil {
			return nil, err
		}
		ctx = mailer.WithWriteDeadline(ctx, until)
	}
	if st.r.APIReader == nil {
		return ctx, nil
	}
	mc := st.s.mc
	live := &infrav1.MailgunCluster{}
	if err := st.r.APIReader.Get(ctx, client.ObjectKeyFromObject(mc), live); err != nil {
		return nil, fmt.Errorf("reading the live MailgunCluster before sending: %w", err)
	}
	claim := mc.Annotations[infrav1.SendAttemptedAtAnnotation]
	switch {
	case live.Annotations[infrav1.AcceptedMessageIDAnnotation] != "":
		return nil, fmt.Errorf("the live object already records an accepted email")
	case live.Annotations[infrav1.SendAttemptedAtAnnotation] != claim:
		return nil, fmt.Errorf("the live object's claim %q is not this attempt's %q", live.Annotations[infrav1.SendAttemptedAtAnnotation], claim)
	}
	return ctx, nil
}

// apply writes the protocol's final decision onto the object, reports it
// (an event and a log line only when the condition changes, so that an
// outage costs a bounded number of them) and returns the result.
func (r *MailgunClusterReconciler) apply(ctx context.Context, mc *infrav1.MailgunCluster, d sendprotocol.Decision) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	if d.Err != nil {
		return ctrl.Result{}, d.Err
	}
	if d.Quiet {
		log.V(1).Info("Retrying soon: "+d.Detail, "state", d.State)
		return ctrl.Result{RequeueAfter: d.RequeueAfter}, nil
	}
	if d.ClearClaim {
		// Mailgun refused the message: nothing went out under this claim.
		mem := r.memory.load(mc)
		mem.unsentClaim = mc.Annotations[infrav1.SendAttemptedAtAnnotation]
		r.memory.store(mc, mem)
		delete(mc.Annotations, infrav1.SendAttemptedAtAnnotation)
		delete(mc.Annotations, infrav1.SendDomainAnnotation)
	}
	if d.Accept != "" {
		log.Info("Mailgun accepted the request email", "messageID", d.Accept)
		r.Recorder.Eventf(mc, nil, corev1.EventTypeNormal, infrav1.EmailSentCondition, "SendEmail", "%s", d.Condition.Message)
		return r.newlyAccepted(mc, d.Accept), nil
	}
	if c := d.Condition; c != nil {
		before := conditions.GetReason(mc, infrav1.EmailSentCondition)
		setEmailSent(mc, metav1.ConditionStatus(c.Status), c.Reason, c.Message)
		if before != c.Reason {
			log.Info("Waiting before the next call to Mailgun", "state", d.State, "reason", c.Reason, "message", c.Message)
			r.Recorder.Eventf(mc, nil, corev1.EventTypeWarning, c.Reason, "SendEmail", "%s", c.Message)
		}
	}
	return ctrl.Result{RequeueAfter: d.RequeueAfter}, nil
}

// newlyAccepted records an email Mailgun just accepted, or was just found
// to have accepted, and schedules the first look at its delivery.
func (r *MailgunClusterReconciler) newlyAccepted(mc *infrav1.MailgunCluster, id string) ctrl.Result {
	markAccepted(mc, id)
	// A resend request made while this email was pending is answered by it.
	if req, ok := mc.Annotations[infrav1.ResendRequestAnnotation]; ok && resendValueProblem(req) == "" {
		mc.Annotations[infrav1.ResendHandledAnnotation] = req
	}
	setDeliveryPending(mc, id)
	r.memory.store(mc, objectMemory{nextDeliveryPoll: time.Now().Add(r.DeliveryPollInterval)})
	return ctrl.Result{RequeueAfter: r.DeliveryPollInterval}
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

// maxResendRequest bounds a resend request's value: it is kept in a second
// annotation, and all annotations together must stay under 256 KiB.
const maxResendRequest = 256

// pendingResend returns the user's resend request that the controller should
// take on now, "" if none, and what is wrong with a value it refuses. A
// request made before the first email was accepted waits for it: the first
// email answers it (newlyAccepted marks it handled), and switching Message-Id
// while a send's outcome is unknown could send twice.
func pendingResend(mc *infrav1.MailgunCluster) (request, problem string) {
	req, ok := mc.Annotations[infrav1.ResendRequestAnnotation]
	switch {
	case !ok || req == mc.Annotations[infrav1.ResendHandledAnnotation]:
		return "", ""
	case resendValueProblem(req) != "":
		return "", resendValueProblem(req)
	case recordedMessageID(mc) == "":
		return "", ""
	}
	return req, ""
}

// resendValueProblem says what is wrong with a resend request's value, ""
// if nothing.
func resendValueProblem(req string) string {
	switch {
	case strings.TrimSpace(req) == "":
		return fmt.Sprintf("annotation %s is blank; set it to a new non-blank value (e.g. the date) to ask for another email", infrav1.ResendRequestAnnotation)
	case len(req) > maxResendRequest:
		return fmt.Sprintf("annotation %s is %d bytes long, more than %d; set a short new value (e.g. the date) to ask for another email", infrav1.ResendRequestAnnotation, len(req), maxResendRequest)
	}
	return ""
}

// warnResendOnce reports a refused resend request with a Warning event and
// a log line, once per value: the accepted email, and the EmailSent
// condition that records it, stay as they are.
func (r *MailgunClusterReconciler) warnResendOnce(ctx context.Context, mc *infrav1.MailgunCluster, problem string) {
	mem := r.memory.load(mc)
	req := mc.Annotations[infrav1.ResendRequestAnnotation]
	if mem.refusedResend == req {
		return
	}
	mem.refusedResend = req
	r.memory.store(mc, mem)
	ctrl.LoggerFrom(ctx).Info("Not resending: " + problem)
	r.Recorder.Eventf(mc, nil, corev1.EventTypeWarning, "InvalidResendRequest", "SendEmail", "%s", problem)
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
	ann[infrav1.SentForAnnotation] = sentFor(mc)
	delete(ann, infrav1.AcceptedMessageIDAnnotation)
	delete(ann, infrav1.SendAttemptedAtAnnotation)
	delete(ann, infrav1.SendDomainAnnotation)
}

// markAccepted records an accepted email on the object, to be persisted by
// the final patch.
func markAccepted(mc *infrav1.MailgunCluster, id string) {
	if mc.Annotations == nil {
		mc.Annotations = map[string]string{}
	}
	mc.Annotations[infrav1.AcceptedMessageIDAnnotation] = id
	// Adopts records written before the sent-for binding existed.
	mc.Annotations[infrav1.SentForAnnotation] = sentFor(mc)
	delete(mc.Annotations, infrav1.SendAttemptedAtAnnotation)
	delete(mc.Annotations, infrav1.SendDomainAnnotation)
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

// objectMemory is what the reconciler keeps in memory per MailgunCluster
// between reconciles. It is not kept across restarts, which at most costs
// one call to Mailgun or one settle wait.
type objectMemory struct {
	// hold pauses calls to Mailgun, so that the update events of our own
	// writes do not cause immediate retries; holdKey is the generation and
	// settings it applies to: a change ends it early.
	hold    *sendprotocol.Hold
	holdKey string
	// failures counts consecutive failed Mailgun calls, for the backoff.
	failures int
	// unsentClaim is a claim this process wrote (or tried to) and knows no
	// message went out under.
	unsentClaim string
	// nextDeliveryPoll is when the delivery of the accepted email is next
	// looked up.
	nextDeliveryPoll time.Time
	// refusedResend is the last resend request value reported as invalid.
	refusedResend string
}

func holdKey(mc *infrav1.MailgunCluster, s mailer.Settings) string {
	return fmt.Sprintf("%d/%s", mc.Generation, s.Fingerprint())
}

// memory holds objectMemory by object name; the UID tells a recreated
// object from the old one.
type memory struct {
	mu sync.Mutex
	m  map[types.NamespacedName]memoryEntry
}

type memoryEntry struct {
	uid types.UID
	objectMemory
}

func (m *memory) load(mc *infrav1.MailgunCluster) objectMemory {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.m[client.ObjectKeyFromObject(mc)]
	if !ok || e.uid != mc.UID {
		return objectMemory{}
	}
	return e.objectMemory
}

func (m *memory) store(mc *infrav1.MailgunCluster, v objectMemory) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[types.NamespacedName]memoryEntry{}
	}
	m.m[client.ObjectKeyFromObject(mc)] = memoryEntry{uid: mc.UID, objectMemory: v}
}

// forget drops what is kept for an object that is gone or going.
func (m *memory) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, key)
}
