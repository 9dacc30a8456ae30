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
	"errors"
	"fmt"
	"sync"
	"time"

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

func newScope(mc *infrav1.MailgunCluster, c client.Client) (*scope, error) {
	return &scope{client: c, mc: mc, before: mc.DeepCopy()}, nil
}

// patch persists the changes made during the reconcile in at most two
// writes, one for metadata and one for the whole status, conditions
// included, sent in parallel. (Cluster API's patch helper writes conditions
// separately, a third write per change, and one after the other.) Merge
// patches carry only what changed; the status has no other writer, and a
// later reconcile repairs a write that failed.
func (s *scope) patch(ctx context.Context) error {
	s.mc.Status.ObservedGeneration = s.mc.Generation
	metaChanged := !equality.Semantic.DeepEqual(s.before.ObjectMeta, s.mc.ObjectMeta)
	statusChanged := !equality.Semantic.DeepEqual(s.before.Status, s.mc.Status)
	// Once the last finalizer goes, the object disappears with the write.
	deleted := !s.mc.DeletionTimestamp.IsZero() && len(s.mc.Finalizers) == 0

	var wg sync.WaitGroup
	var metaErr, statusErr error
	if metaChanged {
		after := s.mc.DeepCopy()
		after.Status = s.before.Status
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.client.Patch(ctx, after, client.MergeFrom(s.before))
			if err != nil && !(deleted && apierrors.IsNotFound(err)) {
				metaErr = fmt.Errorf("patching metadata: %w", err)
			}
		}()
	}
	if statusChanged && !deleted {
		after := s.mc.DeepCopy()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.client.Status().Patch(ctx, after, client.MergeFrom(s.before)); err != nil {
				statusErr = fmt.Errorf("patching status: %w", err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(metaErr, statusErr)
}

// recordAttempt durably records, before a send, the Message-Id and start
// time of the attempt, together with the finalizer, in one write.
func (s *scope) recordAttempt(ctx context.Context, messageID string, at time.Time) error {
	err := s.patchMetadata(ctx, func(mc *infrav1.MailgunCluster) {
		controllerutil.AddFinalizer(mc, infrav1.ClusterFinalizer)
		mc.Annotations[infrav1.MessageIDAnnotation] = messageID
		mc.Annotations[infrav1.SendAttemptedAtAnnotation] = at.UTC().Format(time.RFC3339Nano)
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

func joinErrors(a, b error) error {
	return errors.Join(a, b)
}
