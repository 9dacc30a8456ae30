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

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
)

// scope is one reconcile's view of a MailgunCluster, and what the
// apiserver last confirmed of it.
type scope struct {
	client client.Client
	mc     *infrav1.MailgunCluster
	// before is the object as the apiserver last confirmed it; patch sends
	// the difference.
	before *infrav1.MailgunCluster
}

func newScope(mc *infrav1.MailgunCluster, c client.Client) *scope {
	return &scope{client: c, mc: mc, before: mc.DeepCopy()}
}

// patch persists the changes made during the reconcile in at most two
// writes: metadata first, then the whole status, conditions included.
// (Cluster API's patch helper writes conditions separately, a third write
// per change.)
//
// The metadata write is a merge patch, so that it touches only what this
// reconcile changed. The status is ours alone and is written whole, as an
// update locked to the version last confirmed: a reconcile working from a
// stale cache must fail and retry rather than wipe conditions written
// meanwhile. An update is cheaper than a locked merge patch for the
// apiserver and for us (no patch to compute or apply), which matters
// because writes are what a busy control plane limits (docs/performance.md).
func (s *scope) patch(ctx context.Context) error {
	s.mc.Status.ObservedGeneration = s.mc.Generation
	// Once the last finalizer goes, the object disappears with the write.
	deleted := !s.mc.DeletionTimestamp.IsZero() && len(s.mc.Finalizers) == 0

	if !equality.Semantic.DeepEqual(s.before.ObjectMeta, s.mc.ObjectMeta) {
		after := s.mc.DeepCopy()
		after.Status = s.before.Status
		if err := s.client.Patch(ctx, after, client.MergeFrom(s.before)); err != nil {
			if deleted && apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("patching metadata: %w", err)
		}
		// Lock the status write to the version this write produced.
		s.before.ObjectMeta = *after.ObjectMeta.DeepCopy()
		s.mc.ResourceVersion = after.ResourceVersion
	}
	if deleted || equality.Semantic.DeepEqual(s.before.Status, s.mc.Status) {
		return nil
	}
	after := s.mc.DeepCopy()
	after.ResourceVersion = s.before.ResourceVersion
	if err := s.client.Status().Update(ctx, after); err != nil {
		return fmt.Errorf("updating status: %w", err)
	}
	return nil
}

// recordAttempt durably records, before a send, the Message-Id, the claim
// of the attempt and the Mailgun domain it is made with, the object they
// belong to and the finalizer, in one write.
func (s *scope) recordAttempt(ctx context.Context, messageID, claim, domain string) error {
	err := s.patchMetadata(ctx, func(mc *infrav1.MailgunCluster) {
		controllerutil.AddFinalizer(mc, infrav1.ClusterFinalizer)
		mc.Annotations[infrav1.MessageIDAnnotation] = messageID
		mc.Annotations[infrav1.SendAttemptedAtAnnotation] = claim
		mc.Annotations[infrav1.SendDomainAnnotation] = domain
		mc.Annotations[infrav1.SentForAnnotation] = sentFor(mc)
	})
	if err != nil {
		return fmt.Errorf("recording the send attempt before sending: %w", err)
	}
	return nil
}

// startResend durably moves the object to the user's new resend request.
func (s *scope) startResend(ctx context.Context, domain string) error {
	if err := s.patchMetadata(ctx, func(mc *infrav1.MailgunCluster) { withNewRequest(mc, domain) }); err != nil {
		return fmt.Errorf("recording the resend request: %w", err)
	}
	return nil
}

// patchMetadata writes a metadata change at once, with optimistic locking so
// that it fails if our copy is stale, e.g. when the cache has not yet seen
// the record of an earlier successful send. Status changes made so far stay
// pending for the final patch.
func (s *scope) patchMetadata(ctx context.Context, mutate func(*infrav1.MailgunCluster)) error {
	changed := s.mc.DeepCopy()
	if changed.Annotations == nil {
		changed.Annotations = map[string]string{}
	}
	mutate(changed)
	if err := s.client.Patch(ctx, changed, client.MergeFromWithOptions(s.mc, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	// changed now holds what the apiserver stored, including the persisted
	// status; diff later changes against it.
	s.before = changed.DeepCopy()
	changed.ObjectMeta.DeepCopyInto(&s.mc.ObjectMeta)
	return nil
}
