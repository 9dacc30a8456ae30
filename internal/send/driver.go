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
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/sendprotocol"
)

// EnsureSent makes sure Mailgun accepted exactly one request email for the
// scope's object, email, sent with the settings of identity (nil: the
// operator-wide ones), and then follows its delivery. What to do next
// (claim, send, look up, wait) is decided by the send protocol
// (internal/sendprotocol); this function only performs its steps and
// applies its decisions to the object.
func (d *Driver[T]) EnsureSent(ctx context.Context, s *Scope[T], identity *infrav1.MailgunClusterIdentityReference, email Email) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	obj := s.Object

	if ok, err := d.vetSendRecord(ctx, s); !ok || err != nil {
		return ctrl.Result{}, err
	}

	resend, problem := d.Kind.pendingResend(obj)
	if problem != "" {
		d.warnResendOnce(ctx, obj, problem)
	}
	if id := d.Kind.RecordedMessageID(obj); id != "" && resend == "" {
		d.Kind.markAccepted(obj, id)
		return d.trackDelivery(ctx, obj, identity, id)
	}
	if resend == "" {
		// (With a resend pending, the acceptance memory may hold is the
		// recorded one's: the request is the new one.)
		if res, known, err := d.recordKnownAcceptance(ctx, obj); known || err != nil {
			return res, err
		}
	}

	settings, ok, err := d.settingsFor(ctx, obj, identity)
	if !ok || err != nil {
		return ctrl.Result{}, err
	}
	if resend != "" {
		err := s.patchMetadata(ctx, func(obj T) { d.Kind.withNewRequest(obj, settings.Domain) })
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("recording the resend request: %w", err)
		}
		request := obj.GetAnnotations()[infrav1.ResendRequestAnnotation]
		log.Info("Resend requested; sending a new request email", "request", request)
		d.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, "ResendRequested", "SendEmail",
			"resend requested (%s); the earlier message IDs are in the %s annotation", request, infrav1.MessageIDHistoryAnnotation)
	}
	messageID := obj.GetAnnotations()[infrav1.MessageIDAnnotation]
	if messageID == "" {
		// Written with the first claim.
		messageID = d.Kind.messageID(obj.GetUID(), settings.Domain)
	}

	return d.apply(ctx, obj, messageID, d.runProtocol(ctx, s, settings, messageID, email))
}

// SettlePending resolves the pending send attempt of an object that must
// not start one (its Cluster is paused: clusterctl move waits, on the
// block-move annotation, until the attempt's outcome is known). The
// attempt is looked up as usual; one that proves unsent, or is not found
// after the settle time, is dropped rather than sent again. With no
// attempt pending it does nothing.
func (d *Driver[T]) SettlePending(ctx context.Context, s *Scope[T], identity *infrav1.MailgunClusterIdentityReference) (ctrl.Result, error) {
	obj := s.Object
	if obj.GetAnnotations()[infrav1.SendAttemptedAtAnnotation] == "" {
		// A block of ours without a claim (removed by hand) would keep
		// the move waiting for nothing.
		unblockMove(obj.GetAnnotations())
		return ctrl.Result{}, nil
	}
	if ok, err := d.vetSendRecord(ctx, s); !ok || err != nil {
		return ctrl.Result{}, err
	}
	if d.Kind.RecordedMessageID(obj) != "" {
		return ctrl.Result{}, nil
	}
	if res, known, err := d.recordKnownAcceptance(ctx, obj); known || err != nil {
		return res, err
	}
	settings, ok, err := d.settingsFor(ctx, obj, identity)
	if !ok || err != nil {
		return ctrl.Result{}, err
	}
	messageID := obj.GetAnnotations()[infrav1.MessageIDAnnotation]
	return d.apply(ctx, obj, messageID, d.runProtocol(ctx, s, settings, messageID, nil))
}

// recordKnownAcceptance records an acceptance this process saw for obj's
// current Message-Id whose record was not written yet (the write failed):
// before the settings are loaded, so that settings that became unusable
// meanwhile cannot keep it from being recorded.
func (d *Driver[T]) recordKnownAcceptance(ctx context.Context, obj T) (ctrl.Result, bool, error) {
	messageID := obj.GetAnnotations()[infrav1.MessageIDAnnotation]
	mem := d.memory.load(obj)
	if messageID == "" || mem.accepted.messageID != messageID {
		return ctrl.Result{}, false, nil
	}
	dec := d.Protocol.Decide(sendprotocol.Input{Record: sendRecord(obj, messageID), Now: time.Now(), KnownAccepted: mem.accepted.id})
	res, err := d.apply(ctx, obj, messageID, dec)
	return res, true, err
}

// settingsFor returns the settings obj sends with, and false if it must
// not use them now: they are unusable, or they name another domain than a
// pending attempt's (the condition says why).
func (d *Driver[T]) settingsFor(ctx context.Context, obj T, identity *infrav1.MailgunClusterIdentityReference) (mailer.Settings, bool, error) {
	log := ctrl.LoggerFrom(ctx)
	settings, unusable, err := d.Settings.For(ctx, obj.GetNamespace(), identity)
	if err != nil {
		return mailer.Settings{}, false, fmt.Errorf("loading Mailgun settings: %w", err)
	}
	if unusable != nil {
		// The watches on the settings objects, identities and namespaces
		// bring us back.
		log.Info("Not sending: the Mailgun settings are not usable; waiting for them to change", "reason", unusable.Reason, "problems", unusable.Message)
		SetEmailSent(obj, metav1.ConditionFalse, unusable.Reason, unusable.Message)
		return mailer.Settings{}, false, nil
	}
	if msg := sendDomainChanged(obj, settings.Domain, d.memory.load(obj).unsentClaim); msg != "" {
		log.Info("Not sending: "+msg, "reason", infrav1.SettingsChangedDuringSendReason)
		SetEmailSent(obj, metav1.ConditionFalse, infrav1.SettingsChangedDuringSendReason, msg)
		return mailer.Settings{}, false, nil
	}
	return settings, true, nil
}

// Finish ends a reconcile: it patches the scope's object and folds the
// outcome of that write into the reconcile's result and error. It is meant
// to be deferred right after the scope is made.
func (d *Driver[T]) Finish(ctx context.Context, s *Scope[T], res ctrl.Result, retErr error) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	err := s.Patch(ctx)
	d.own.note(s.Object, s.replaced, time.Now())
	switch {
	case err == nil:
	case apierrors.IsConflict(err) && retErr == nil:
		// Someone else (Cluster API, an earlier reconcile our cache has
		// not seen yet) wrote the object first: this is normal, and the
		// newer version brings us back. Retry from it, quietly.
		log.V(1).Info(d.Kind.Name+" changed while reconciling; retrying from the newer version", "reason", err.Error())
		if res.IsZero() {
			res = ctrl.Result{RequeueAfter: d.Protocol.ConflictDelay}
		}
	case apierrors.IsNotFound(err) && retErr == nil:
		// The object went while we reconciled it (clusterctl move
		// deletes the source objects, a user removed our finalizer):
		// nothing is left to write.
		log.V(1).Info(d.Kind.Name+" deleted while reconciling", "reason", err.Error())
		d.Forget(client.ObjectKeyFromObject(s.Object))
		res = ctrl.Result{}
	default:
		retErr = errors.Join(retErr, err)
	}
	// controller-runtime ignores the result next to an error.
	if retErr != nil {
		res = ctrl.Result{}
	}
	return res, retErr
}

// Forget drops what the driver remembers of an object that is gone or
// going.
func (d *Driver[T]) Forget(key types.NamespacedName) {
	d.memory.forget(key)
	d.own.forget(key)
	d.Deliveries.Stop(d.Kind.Name, key)
}

// Remembered is how many entries the driver keeps for objects: what it
// remembers of them, its writes the cache has yet to show, and the emails
// its delivery tracker follows.
func (d *Driver[T]) Remembered() int {
	return d.memory.len() + d.own.len() + d.Deliveries.Followed()
}

// CacheBehind reports how long to wait before reconciling obj, read from
// the cache: non-zero while it is a version the driver's own writes
// replaced (see ownWrites), at most ownWriteGrace after them. Reconciling
// it would end in a refused write; the watch event of the newer version
// brings the object back, and the wait is only a bound.
func (d *Driver[T]) CacheBehind(obj T) time.Duration {
	return d.own.behind(obj, time.Now())
}

// vetSendRecord checks obj's send record before the reconcile trusts it. It
// reports false when nothing may be sent (the condition says why); a record
// copied from another object is dropped, durably, and the reconcile goes on
// as for a new object, unless the kind finds obj without a record of its
// own to be a copy that must send nothing (Kind.Copied).
func (d *Driver[T]) vetSendRecord(ctx context.Context, s *Scope[T]) (bool, error) {
	log := ctrl.LoggerFrom(ctx)
	obj := s.Object
	switch verdict, detail := d.Kind.checkSendRecord(obj); verdict {
	case recordInvalid:
		log.Info("Not sending: "+detail, "reason", infrav1.InvalidAnnotationReason)
		SetEmailSent(obj, metav1.ConditionFalse, infrav1.InvalidAnnotationReason, detail)
		return false, nil
	case recordCopied:
		if err := s.patchMetadata(ctx, func(obj T) { dropCopiedRecord(obj) }); err != nil {
			return false, fmt.Errorf("dropping a copied send record: %w", err)
		}
		// A copy restored with its status starts as a new object too:
		// not provisioned, no outcome, until its own email is accepted.
		*d.Kind.StatusMessageID(obj) = ""
		d.Kind.SetProvisioned(obj, false)
		for _, c := range []string{infrav1.EmailSentCondition, infrav1.ReadyCondition, infrav1.EmailDeliveredCondition} {
			conditions.Delete(obj, c)
		}
		if d.copied(obj) {
			log.Info("Dropped a copied send record", "detail", detail)
			d.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, "CopiedRecordDropped", "SendEmail", "%s", detail)
		} else {
			log.Info("Dropped a copied send record; this "+d.Kind.Name+" sends its own email", "detail", detail)
			d.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, "CopiedRecordDropped", "SendEmail", "%s; it sends its own email", detail)
		}
	}
	if _, own := obj.GetAnnotations()[infrav1.MessageIDAnnotation]; !own && d.copied(obj) {
		reason, msg := d.Kind.Copied(obj)
		if conditions.GetReason(obj, infrav1.EmailSentCondition) != reason {
			log.Info("Not sending: "+msg, "reason", reason)
			d.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, reason, "SendEmail", "%s", msg)
		}
		SetEmailSent(obj, metav1.ConditionFalse, reason, msg)
		return false, nil
	}
	return true, nil
}

// copied reports whether the kind finds obj to be a copy that must send
// nothing of its own.
func (d *Driver[T]) copied(obj T) bool {
	if d.Kind.Copied == nil {
		return false
	}
	reason, _ := d.Kind.Copied(obj)
	return reason != ""
}

// runProtocol asks the send protocol for the next step, performs it and
// asks again until the protocol has nothing more to do in this reconcile.
// It keeps the per-object memory (hold, failure count) across reconciles.
// A paused object, which has no email to send, resolves a pending attempt
// but starts none.
func (d *Driver[T]) runProtocol(ctx context.Context, s *Scope[T], settings mailer.Settings, messageID string, email Email) sendprotocol.Decision {
	log := ctrl.LoggerFrom(ctx)
	obj := s.Object
	mem := d.memory.load(obj)
	key := holdKey(obj, settings)
	if mem.holdKey != key {
		// A change of the spec or the settings ends the hold and starts
		// the backoff over: the user may have fixed what failed.
		mem.hold, mem.failures, mem.recheck = nil, 0, false
	}
	in := sendprotocol.Input{
		Record:      sendRecord(obj, messageID),
		Now:         time.Now(),
		ClaimUnsent: mem.unsentClaim != "" && mem.unsentClaim == obj.GetAnnotations()[infrav1.SendAttemptedAtAnnotation],
		Failures:    mem.failures,
		Hold:        mem.hold,
		Recheck:     mem.recheck,
		Verify:      d.Credentials != nil,
		Paused:      email == nil,
	}
	steps := steps[T]{d: d, s: s, m: d.NewMailer(settings), settings: settings, messageID: messageID, email: email, mem: &mem}
	dec := d.Protocol.Decide(in)
	// A reconcile takes at most four steps: verify, look up, claim, send.
	for range 4 {
		log.V(4).Info("Send protocol", "state", dec.State, "next", dec.Op, "failures", dec.Failures)
		if dec.Op == sendprotocol.OpNone {
			break
		}
		in.Answer = steps.do(ctx, dec)
		in.Record, in.Now, in.Failures, in.Recheck = sendRecord(obj, messageID), time.Now(), dec.Failures, dec.Recheck
		in.ClaimUnsent = false
		dec = d.Protocol.Decide(in)
	}
	mem.hold, mem.holdKey, mem.failures, mem.recheck = dec.Hold, key, dec.Failures, dec.Recheck
	d.memory.store(obj, mem)
	return dec
}

// sendRecord maps the object's annotations to the protocol's record.
func sendRecord(obj Object, messageID string) sendprotocol.Record {
	ann := obj.GetAnnotations()
	return sendprotocol.Record{
		MessageID:  messageID,
		Claim:      ann[infrav1.SendAttemptedAtAnnotation],
		AcceptedID: ann[infrav1.AcceptedMessageIDAnnotation],
	}
}

// steps performs the protocol's steps for one reconcile.
type steps[T Object] struct {
	d        *Driver[T]
	s        *Scope[T]
	m        Mailer
	settings mailer.Settings
	// messageID is the Message-Id of the current request.
	messageID string
	email     Email
	mem       *objectMemory
	// claimed is the claim this reconcile wrote, locked to the version it
	// read, and claimStart when that write began; "" and zero until then.
	claimed    string
	claimStart time.Time
}

func (st *steps[T]) do(ctx context.Context, dec sendprotocol.Decision) *sendprotocol.Answer {
	obj, metrics, messageID, kind := st.s.Object, st.d.Metrics, st.messageID, st.d.Kind.Name
	switch dec.Op {
	case sendprotocol.OpVerify:
		// A key, domain or region Mailgun refuses is reported before any
		// send; transient lookup failures are left to the send itself.
		if err := st.d.Credentials.Verify(ctx, st.settings); mailer.RefusesSettings(err) {
			return sendprotocol.Failed(dec.Op, err)
		}
		return &sendprotocol.Answer{Op: dec.Op}
	case sendprotocol.OpClaim:
		start := time.Now()
		if err := st.s.recordAttempt(ctx, st.d.Kind.Finalizer, messageID, dec.Claim, st.settings.Domain, st.d.Kind.Claimed); err != nil {
			if !apierrors.IsConflict(err) {
				// The write may have landed although we got no answer; we
				// know nothing was sent under it.
				st.mem.unsentClaim = dec.Claim
			}
			return sendprotocol.Failed(dec.Op, err)
		}
		st.claimed, st.claimStart = dec.Claim, start
		return &sendprotocol.Answer{Op: dec.Op}
	case sendprotocol.OpSend:
		sendCtx, err := st.fence(ctx)
		if err != nil {
			// Nothing went out under the claim: if this replica comes
			// back to it (the lease was only briefly stale, the object
			// paused), it need not wait for a settle time.
			st.mem.unsentClaim = obj.GetAnnotations()[infrav1.SendAttemptedAtAnnotation]
			return &sendprotocol.Answer{Op: dec.Op, Err: err, Class: sendprotocol.ClassFenced}
		}
		start := time.Now()
		id, err := st.m.Send(sendCtx, st.email(messageID))
		elapsed := time.Since(start).Seconds()
		if err != nil {
			class := mailer.AsSendError(err).Class.String()
			metrics.SendDuration.WithLabelValues(kind, class).Observe(elapsed)
			metrics.EmailsFailed.WithLabelValues(kind, class).Inc()
			return sendprotocol.Failed(dec.Op, err)
		}
		metrics.SendDuration.WithLabelValues(kind, "accepted").Observe(elapsed)
		metrics.EmailsSent.WithLabelValues(kind).Inc()
		return &sendprotocol.Answer{Op: dec.Op, AcceptedID: id}
	case sendprotocol.OpLookup:
		found, err := st.m.WasAccepted(ctx, messageID)
		switch {
		case err != nil:
			metrics.Lookups.WithLabelValues(kind, "error").Inc()
			return sendprotocol.Failed(dec.Op, err)
		case found:
			metrics.Lookups.WithLabelValues(kind, "accepted").Inc()
		default:
			metrics.Lookups.WithLabelValues(kind, "not_found").Inc()
		}
		return &sendprotocol.Answer{Op: dec.Op, Found: found}
	}
	panic(fmt.Sprintf("unknown send protocol step %q", dec.Op))
}

// fence allows a send only while nobody else can be sending: this replica
// holds its lease with time to spare (a replica frozen after its claim
// loses it, and a successor may have taken over), and the live object, read
// past the cache, still carries this attempt's claim and no accepted email
// (a successor that took over re-claims first). It returns the context to
// send with: nothing of the send is written after the lease's time is up,
// so a replica frozen after these checks cannot send late.
//
// The object is not read when the claim is this reconcile's own, written
// during a hold of the lease that began before the write and is unbroken
// since: the locked write's answer was the live object, and only a
// successor replaces a claim, which cannot have held the lease meanwhile.
// (A paused annotation put on the object since then is not seen; moves
// pause the Cluster, which is read.) A hold that began after the claim
// (this replica, frozen, lost the lease and got it back) and no leader
// election at all keep the read: it finds a successor's claim or email, or
// narrows the window in which another replica could re-claim.
func (st *steps[T]) fence(ctx context.Context) (context.Context, error) {
	var heldSince time.Time
	if st.d.Lease != nil {
		since, until, err := st.d.Lease.Held()
		if err != nil {
			return nil, err
		}
		heldSince = since
		ctx = mailer.WithWriteDeadline(ctx, until)
	}
	if st.d.APIReader == nil {
		return ctx, nil
	}
	obj := st.s.Object
	claim := obj.GetAnnotations()[infrav1.SendAttemptedAtAnnotation]
	live := obj
	if covered := !heldSince.IsZero() && heldSince.Before(st.claimStart) && st.claimed == claim; !covered {
		live = deepCopy(obj)
		if err := st.d.APIReader.Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil {
			return nil, fmt.Errorf("reading the live %s before sending: %w", st.d.Kind.Name, err)
		}
		liveAnn := live.GetAnnotations()
		switch {
		case liveAnn[infrav1.AcceptedMessageIDAnnotation] != "":
			return nil, fmt.Errorf("the live object already records an accepted email")
		case liveAnn[infrav1.SendAttemptedAtAnnotation] != claim:
			return nil, fmt.Errorf("the live object's claim %q is not this attempt's %q", liveAnn[infrav1.SendAttemptedAtAnnotation], claim)
		}
	}
	// The claim, with its block on clusterctl move, is written before this
	// read. A move that paused the Cluster before it withholds the send
	// here (the paused reconcile then drops the claim); one that pauses it
	// later waits for the block if its discovery saw it, and otherwise
	// copies the claim at least, so that the copy looks the email up
	// instead of sending one.
	paused, err := st.d.Kind.Paused(ctx, st.d.APIReader, live)
	if err != nil {
		return nil, fmt.Errorf("reading whether the live %s is paused before sending: %w", st.d.Kind.Name, err)
	}
	if paused {
		return nil, fmt.Errorf("the %s or its Cluster was paused (clusterctl move?) or is gone", st.d.Kind.Name)
	}
	return ctx, nil
}

// apply writes the protocol's final decision onto the object, reports it
// (an event and a log line only when the condition changes, so that an
// outage costs a bounded number of them) and returns the result.
func (d *Driver[T]) apply(ctx context.Context, obj T, messageID string, dec sendprotocol.Decision) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	if dec.Err != nil {
		return ctrl.Result{}, dec.Err
	}
	if dec.Quiet {
		log.V(1).Info("Retrying soon: "+dec.Detail, "state", dec.State)
		return ctrl.Result{RequeueAfter: dec.RequeueAfter}, nil
	}
	if dec.ClearClaim {
		// Nothing went out under this claim: Mailgun refused the message,
		// or (paused) it is known unsent or was not found in time.
		ann := obj.GetAnnotations()
		mem := d.memory.load(obj)
		mem.unsentClaim = ann[infrav1.SendAttemptedAtAnnotation]
		d.memory.store(obj, mem)
		delete(ann, infrav1.SendAttemptedAtAnnotation)
		delete(ann, infrav1.SendDomainAnnotation)
		unblockMove(ann)
	}
	if dec.Accept != "" {
		log.Info("Mailgun accepted the request email", "messageID", dec.Accept)
		d.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, infrav1.EmailSentCondition, "SendEmail", "%s", dec.Condition.Message)
		return d.newlyAccepted(obj, messageID, dec.Accept), nil
	}
	if c := dec.Condition; c != nil {
		before := conditions.GetReason(obj, infrav1.EmailSentCondition)
		SetEmailSent(obj, metav1.ConditionStatus(c.Status), c.Reason, c.Message)
		if before != c.Reason {
			log.Info("Waiting before the next call to Mailgun", "state", dec.State, "reason", c.Reason, "message", c.Message)
			d.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, c.Reason, "SendEmail", "%s", c.Message)
		}
	}
	return ctrl.Result{RequeueAfter: dec.RequeueAfter}, nil
}

// newlyAccepted records an email Mailgun just accepted, or was just found
// to have accepted, under Message-Id messageID. The watch event of the
// record's write brings the object back to follow its delivery.
func (d *Driver[T]) newlyAccepted(obj T, messageID, id string) ctrl.Result {
	d.Kind.markAccepted(obj, id)
	// A resend request made while this email was pending is answered by it.
	ann := obj.GetAnnotations()
	if req, ok := ann[infrav1.ResendRequestAnnotation]; ok && resendValueProblem(req) == "" {
		ann[infrav1.ResendHandledAnnotation] = req
	}
	setDeliveryPending(obj, id)
	// Until the record of the acceptance is written (this reconcile's
	// patch may fail), only memory knows of it: Mailgun's events can take
	// many minutes to show the message, and a lookup that finds nothing
	// before the settle time ends would send again.
	d.memory.store(obj, objectMemory{accepted: acceptance{messageID: messageID, id: id}})
	return ctrl.Result{}
}

// warnResendOnce reports a refused resend request with a Warning event and
// a log line, once per value: the accepted email, and the EmailSent
// condition that records it, stay as they are.
func (d *Driver[T]) warnResendOnce(ctx context.Context, obj T, problem string) {
	mem := d.memory.load(obj)
	req := obj.GetAnnotations()[infrav1.ResendRequestAnnotation]
	if mem.refusedResend == req {
		return
	}
	mem.refusedResend = req
	d.memory.store(obj, mem)
	ctrl.LoggerFrom(ctx).Info("Not resending: " + problem)
	d.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, "InvalidResendRequest", "SendEmail", "%s", problem)
}
