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
	"regexp"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
)

// The send record is the set of annotations through which an object
// remembers its email across crashes, leader changes and clusterctl move.
// Annotations are writable by anyone who can edit the object, and are
// copied along with it, so the record is checked before it is trusted.

// recordVerdict is what checkSendRecord found.
type recordVerdict int

const (
	// recordOwn: no record, or one written for this object (or by a
	// version before the sent-for binding, which is adopted).
	recordOwn recordVerdict = iota
	// recordCopied: the record was written for another object; this one
	// must drop it and send its own email.
	recordCopied
	// recordInvalid: a value this operator never writes; nothing may be
	// sent with it.
	recordInvalid
)

var (
	// ourMessageID is the form of every Message-Id messageID and
	// resendMessageID produce; its first group is the kind's prefix.
	// Anything else in the annotation (line breaks would inject mail
	// headers) is refused.
	// (Resends of earlier versions carried a hash of the request value,
	// resend-<12 hex>, which repeated when a value was reused.)
	ourMessageID = regexp.MustCompile(`^<([a-z]+)\.[A-Za-z0-9-]{1,64}(\.resend-([0-9a-f]{12}|n[1-9][0-9]{0,8}))?@[A-Za-z0-9.-]{1,253}>$`)
	// mailgunMessageID is the form of the IDs Mailgun returns, e.g.
	// <20260101120000.1.ABCDEF@mg.example.com>; the ID goes into status.
	mailgunMessageID = regexp.MustCompile(`^<[A-Za-z0-9._%+=-]{1,200}@[A-Za-z0-9.-]{1,253}>$`)
	// domainName is the form of the send-domain annotation.
	domainName = regexp.MustCompile(`^[A-Za-z0-9.-]{1,253}$`)
)

// sentFor is the value of the sent-for annotation for obj.
func sentFor(obj Object) string {
	return obj.GetNamespace() + "/" + obj.GetName()
}

// checkSendRecord says whether obj's send record may be used, and why not.
func (k Kind[T]) checkSendRecord(obj T) (recordVerdict, string) {
	ann := obj.GetAnnotations()
	if owner, ok := ann[infrav1.SentForAnnotation]; ok && owner != sentFor(obj) {
		return recordCopied, fmt.Sprintf("the send record in the annotations was written for %q, not for this %s", owner, k.Name)
	}
	if id, ok := ann[infrav1.MessageIDAnnotation]; ok {
		if m := ourMessageID.FindStringSubmatch(id); len(m) < 2 || m[1] != k.MessageIDPrefix {
			return recordInvalid, fmt.Sprintf("annotation %s is not a Message-Id this operator writes (<%s.UID@domain>); remove it and the operator chooses one",
				infrav1.MessageIDAnnotation, k.MessageIDPrefix)
		}
	}
	if d, ok := ann[infrav1.SendDomainAnnotation]; ok && !domainName.MatchString(d) {
		return recordInvalid, fmt.Sprintf("annotation %s is not a domain name; remove it and the operator takes the domain from the Message-Id", infrav1.SendDomainAnnotation)
	}
	if id, ok := ann[infrav1.AcceptedMessageIDAnnotation]; ok && !mailgunMessageID.MatchString(id) {
		return recordInvalid, fmt.Sprintf("annotation %s is not a Mailgun message ID (<id@domain>); remove it only if no email was sent for this %s",
			infrav1.AcceptedMessageIDAnnotation, k.Name)
	}
	return recordOwn, ""
}

// recordAnnotations are the annotations of the send record.
var recordAnnotations = []string{
	infrav1.SentForAnnotation, infrav1.MessageIDAnnotation, infrav1.SendAttemptedAtAnnotation, infrav1.SendDomainAnnotation,
	infrav1.AcceptedMessageIDAnnotation, infrav1.MessageIDHistoryAnnotation, infrav1.ResendHandledAnnotation,
}

// blockMoveValue is the value of clusterctl's block-move annotation while
// a send attempt of ours is pending: clusterctl move pauses the Cluster,
// then waits until no object carries the annotation before it copies
// anything, so an object is never copied, and its copy never sends, while
// the source may still be sending. The annotation is only removed when it
// has this value: someone else may block the move for reasons of their own.
const blockMoveValue = "mailgun: a send's outcome is not known yet"

// unblockMove removes our block-move annotation, if there.
func unblockMove(ann map[string]string) {
	if ann[clusterctlv1.BlockMoveAnnotation] == blockMoveValue {
		delete(ann, clusterctlv1.BlockMoveAnnotation)
	}
}

// sendRecordChanged reports whether after's send record (or the move block
// that goes with a pending attempt) differs from before's.
func sendRecordChanged(before, after Object) bool {
	a, b := before.GetAnnotations(), after.GetAnnotations()
	for _, k := range append(recordAnnotations, clusterctlv1.BlockMoveAnnotation) {
		va, oka := a[k]
		vb, okb := b[k]
		if va != vb || oka != okb {
			return true
		}
	}
	return false
}

// dropCopiedRecord removes a send record copied from another object. A
// copied resend request counts as handled: the copy's first email answers
// it.
func dropCopiedRecord(obj Object) {
	ann := obj.GetAnnotations()
	for _, k := range recordAnnotations {
		delete(ann, k)
	}
	unblockMove(ann)
	if req, ok := ann[infrav1.ResendRequestAnnotation]; ok && resendValueProblem(req) == "" {
		ann[infrav1.ResendHandledAnnotation] = req
	}
}

// Accepted reports whether obj records an accepted email of its own:
// nothing is sent for it unless a resend is requested.
func (k Kind[T]) Accepted(obj T) bool {
	verdict, _ := k.checkSendRecord(obj)
	return verdict == recordOwn && k.RecordedMessageID(obj) != ""
}

// RecordedMessageID returns the ID of obj's accepted request email, if
// any: the annotation is authoritative; status alone counts only for
// objects written by earlier versions of the provider, which had no
// annotations.
func (k Kind[T]) RecordedMessageID(obj T) string {
	ann := obj.GetAnnotations()
	if id := ann[infrav1.AcceptedMessageIDAnnotation]; id != "" {
		return id
	}
	if ann[infrav1.MessageIDAnnotation] == "" {
		return *k.StatusMessageID(obj)
	}
	return ""
}

// LastAcceptedMessageID returns the ID of the last request email Mailgun
// accepted for obj: the recorded one or, while a resend is pending, the
// one the resend replaces (the newest of the history); "" if Mailgun
// accepted none.
func (k Kind[T]) LastAcceptedMessageID(obj T) string {
	if id := k.RecordedMessageID(obj); id != "" {
		return id
	}
	if history := messageIDHistory(obj.GetAnnotations()); len(history) > 0 {
		return history[len(history)-1]
	}
	return ""
}

// messageIDHistory is the IDs of the earlier emails that resends replaced,
// oldest first.
func messageIDHistory(ann map[string]string) []string {
	if h := ann[infrav1.MessageIDHistoryAnnotation]; h != "" {
		return strings.Split(h, ",")
	}
	return nil
}

// maxResendRequest bounds a resend request's value: it is kept in a second
// annotation, and all annotations together must stay under 256 KiB.
const maxResendRequest = 256

// pendingResend returns the user's resend request that the controller should
// take on now, "" if none, and what is wrong with a value it refuses. A
// request made before the first email was accepted waits for it: the first
// email answers it (newlyAccepted marks it handled), and switching Message-Id
// while a send's outcome is unknown could send twice.
func (k Kind[T]) pendingResend(obj T) (request, problem string) {
	ann := obj.GetAnnotations()
	req, ok := ann[infrav1.ResendRequestAnnotation]
	switch {
	case !ok || req == ann[infrav1.ResendHandledAnnotation]:
		return "", ""
	case resendValueProblem(req) != "":
		return "", resendValueProblem(req)
	case k.RecordedMessageID(obj) == "":
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

// maxHistory bounds the message ID history kept in the annotation.
const maxHistory = 20

// messageID derives the Message-Id of an object's request email from its
// UID, so that it is the same in every attempt.
func (k Kind[T]) messageID(uid types.UID, domain string) string {
	return fmt.Sprintf("<%s.%s@%s>", k.MessageIDPrefix, uid, domain)
}

// resendMessageID is the Message-Id of the email for the resend request
// that follows the one sent as previous: resend-n1, n2, ... in order. It is
// written once, with the request, and every attempt for the request uses
// it. No two requests of an object share one, whatever values the user
// reuses: a shared Message-Id would let a lookup for a new request find the
// old email, and report it as the new one.
func (k Kind[T]) resendMessageID(uid types.UID, domain, previous string) string {
	n := 0
	if m := resendNumber.FindStringSubmatch(previous); m != nil {
		n, _ = strconv.Atoi(m[1])
	}
	return fmt.Sprintf("<%s.%s.resend-n%d@%s>", k.MessageIDPrefix, uid, n+1, domain)
}

// resendNumber finds the number of a resend in its Message-Id.
var resendNumber = regexp.MustCompile(`\.resend-n([0-9]+)@`)

// withNewRequest moves obj's annotations to a new request: the accepted ID
// goes into the history, the new request gets its own Message-Id.
func (k Kind[T]) withNewRequest(obj T, domain string) {
	ann := obj.GetAnnotations()
	history := messageIDHistory(ann)
	if prev := k.RecordedMessageID(obj); prev != "" {
		history = append(history, prev)
	}
	if len(history) > maxHistory {
		history = history[len(history)-maxHistory:]
	}
	req := ann[infrav1.ResendRequestAnnotation]
	ann[infrav1.MessageIDHistoryAnnotation] = strings.Join(history, ",")
	ann[infrav1.MessageIDAnnotation] = k.resendMessageID(obj.GetUID(), domain, ann[infrav1.MessageIDAnnotation])
	ann[infrav1.ResendHandledAnnotation] = req
	ann[infrav1.SentForAnnotation] = sentFor(obj)
	delete(ann, infrav1.AcceptedMessageIDAnnotation)
	delete(ann, infrav1.SendAttemptedAtAnnotation)
	delete(ann, infrav1.SendDomainAnnotation)
}

// markAccepted records an accepted email on the object, to be persisted by
// the final patch.
func (k Kind[T]) markAccepted(obj T, id string) {
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
		obj.SetAnnotations(ann)
	}
	ann[infrav1.AcceptedMessageIDAnnotation] = id
	// Adopts records written before the sent-for binding existed.
	ann[infrav1.SentForAnnotation] = sentFor(obj)
	delete(ann, infrav1.SendAttemptedAtAnnotation)
	delete(ann, infrav1.SendDomainAnnotation)
	unblockMove(ann)
	*k.StatusMessageID(obj) = id
	k.SetProvisioned(obj, true)
	SetEmailSent(obj, metav1.ConditionTrue, infrav1.EmailAcceptedReason, fmt.Sprintf("Mailgun accepted the request email, message ID %s", id))
}

// SetEmailSent sets the EmailSent condition and mirrors it into Ready, which
// is what Cluster API reads: an object is ready exactly when its email was
// accepted.
func SetEmailSent(obj Object, status metav1.ConditionStatus, reason, message string) {
	conditions.Set(obj, metav1.Condition{Type: infrav1.EmailSentCondition, Status: status, Reason: reason, Message: message})
	conditions.Set(obj, metav1.Condition{Type: infrav1.ReadyCondition, Status: status, Reason: reason, Message: message})
}

// sendDomainChanged says why a pending send attempt cannot be resolved
// with settings for domain: it was made with another Mailgun domain, and
// only that domain's events can show whether Mailgun accepted it; a lookup
// elsewhere would find nothing and the settle wait would end in a second
// email. "" if it can be resolved, or if this process knows nothing was
// sent under the claim (unsentClaim).
func sendDomainChanged(obj Object, domain, unsentClaim string) string {
	ann := obj.GetAnnotations()
	claim, sentWith := ann[infrav1.SendAttemptedAtAnnotation], ann[infrav1.SendDomainAnnotation]
	if sentWith == "" {
		// A claim written before the domain was recorded: its Message-Id
		// holds the domain it was most likely made with. Erring here only
		// stops more often.
		_, sentWith, _ = strings.Cut(strings.TrimSuffix(ann[infrav1.MessageIDAnnotation], ">"), "@")
	}
	if claim == "" || claim == unsentClaim || sentWith == "" || strings.EqualFold(sentWith, domain) || ann[infrav1.AcceptedMessageIDAnnotation] != "" {
		return ""
	}
	return fmt.Sprintf("the send attempt of %s was made with Mailgun domain %q and its outcome is not known, but the settings now give domain %q, "+
		"whose events cannot show it: point the settings (or spec.identityRef) back at %q so that the operator can look it up; "+
		"only if you know that no email went out, remove annotation %s to send with the new settings",
		ann[infrav1.MessageIDAnnotation], sentWith, domain, sentWith, infrav1.SendAttemptedAtAnnotation)
}
