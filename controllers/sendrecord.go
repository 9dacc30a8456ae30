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
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
)

// The send record is the set of annotations through which an object
// remembers its email across crashes, leader changes and clusterctl move.
// Annotations are writable by anyone who can edit the object, and are
// copied along with it, so the record is checked before it is trusted.

// vetSendRecord checks mc's send record before the reconcile trusts it. It
// reports false when nothing may be sent (the condition says why); a record
// copied from another object is dropped, durably, and the reconcile goes on
// as for a new object.
func (r *MailgunClusterReconciler) vetSendRecord(ctx context.Context, s *scope) (bool, error) {
	log := ctrl.LoggerFrom(ctx)
	mc := s.mc
	switch verdict, detail := checkSendRecord(mc); verdict {
	case recordInvalid:
		log.Info("Not sending: "+detail, "reason", infrav1.InvalidAnnotationReason)
		setEmailSent(mc, metav1.ConditionFalse, infrav1.InvalidAnnotationReason, detail)
		return false, nil
	case recordCopied:
		if err := s.patchMetadata(ctx, dropCopiedRecord); err != nil {
			return false, fmt.Errorf("dropping a copied send record: %w", err)
		}
		mc.Status.MessageID = ""
		log.Info("Dropped a copied send record; this MailgunCluster sends its own email", "detail", detail)
		r.Recorder.Eventf(mc, nil, corev1.EventTypeNormal, "CopiedRecordDropped", "SendEmail", "%s; it sends its own email", detail)
	}
	return true, nil
}

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
	// ourMessageID is the form of every Message-Id newMessageID and
	// resendMessageID produce. Anything else in the annotation (line
	// breaks would inject mail headers) is refused.
	ourMessageID = regexp.MustCompile(`^<mailguncluster\.[A-Za-z0-9-]{1,64}(\.resend-[0-9a-f]{12})?@[A-Za-z0-9.-]{1,253}>$`)
	// mailgunMessageID is the form of the IDs Mailgun returns, e.g.
	// <20260101120000.1.ABCDEF@mg.example.com>; the ID goes into status.
	mailgunMessageID = regexp.MustCompile(`^<[A-Za-z0-9._%+=-]{1,200}@[A-Za-z0-9.-]{1,253}>$`)
	// domainName is the form of the send-domain annotation.
	domainName = regexp.MustCompile(`^[A-Za-z0-9.-]{1,253}$`)
)

// sentFor is the value of the sent-for annotation for mc.
func sentFor(mc *infrav1.MailgunCluster) string {
	return mc.Namespace + "/" + mc.Name
}

// checkSendRecord says whether mc's send record may be used, and why not.
func checkSendRecord(mc *infrav1.MailgunCluster) (recordVerdict, string) {
	ann := mc.Annotations
	if owner, ok := ann[infrav1.SentForAnnotation]; ok && owner != sentFor(mc) {
		return recordCopied, fmt.Sprintf("the send record in the annotations was written for %q, not for this MailgunCluster", owner)
	}
	if id, ok := ann[infrav1.MessageIDAnnotation]; ok && !ourMessageID.MatchString(id) {
		return recordInvalid, fmt.Sprintf("annotation %s is not a Message-Id this operator writes (<mailguncluster.UID@domain>); remove it and the operator chooses one", infrav1.MessageIDAnnotation)
	}
	if d, ok := ann[infrav1.SendDomainAnnotation]; ok && !domainName.MatchString(d) {
		return recordInvalid, fmt.Sprintf("annotation %s is not a domain name; remove it and the operator takes the domain from the Message-Id", infrav1.SendDomainAnnotation)
	}
	if id, ok := ann[infrav1.AcceptedMessageIDAnnotation]; ok && !mailgunMessageID.MatchString(id) {
		return recordInvalid, fmt.Sprintf("annotation %s is not a Mailgun message ID (<id@domain>); remove it only if no email was sent for this MailgunCluster", infrav1.AcceptedMessageIDAnnotation)
	}
	return recordOwn, ""
}

// dropCopiedRecord removes a send record copied from another object. A
// copied resend request counts as handled: the copy's first email answers
// it.
func dropCopiedRecord(mc *infrav1.MailgunCluster) {
	for _, k := range []string{
		infrav1.SentForAnnotation, infrav1.MessageIDAnnotation, infrav1.SendAttemptedAtAnnotation, infrav1.SendDomainAnnotation,
		infrav1.AcceptedMessageIDAnnotation, infrav1.MessageIDHistoryAnnotation, infrav1.ResendHandledAnnotation,
	} {
		delete(mc.Annotations, k)
	}
	if req, ok := mc.Annotations[infrav1.ResendRequestAnnotation]; ok && resendValueProblem(req) == "" {
		mc.Annotations[infrav1.ResendHandledAnnotation] = req
	}
}

// sendDomainChanged says why a pending send attempt cannot be resolved
// with settings for domain: it was made with another Mailgun domain, and
// only that domain's events can show whether Mailgun accepted it; a lookup
// elsewhere would find nothing and the settle wait would end in a second
// email. "" if it can be resolved, or if this process knows nothing was
// sent under the claim (unsentClaim).
func sendDomainChanged(mc *infrav1.MailgunCluster, domain, unsentClaim string) string {
	ann := mc.Annotations
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
