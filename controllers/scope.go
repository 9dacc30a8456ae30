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
	"time"

	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
)

// scope is one reconcile's view of a MailgunCluster and the helper that
// persists the changes made to it.
type scope struct {
	client client.Client
	mc     *infrav1.MailgunCluster
	helper *patch.Helper
}

func newScope(mc *infrav1.MailgunCluster, c client.Client) (*scope, error) {
	helper, err := patch.NewHelper(mc, c)
	if err != nil {
		return nil, fmt.Errorf("creating patch helper: %w", err)
	}
	return &scope{client: c, mc: mc, helper: helper}, nil
}

// patch persists the changes made during the reconcile.
func (s *scope) patch(ctx context.Context) error {
	return s.helper.Patch(ctx, s.mc,
		patch.WithOwnedConditions{Conditions: []string{
			infrav1.ReadyCondition, infrav1.EmailSentCondition, infrav1.PausedCondition,
		}},
		patch.WithStatusObservedGeneration{},
	)
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
	helper, err := patch.NewHelper(changed, s.client)
	if err != nil {
		return fmt.Errorf("creating patch helper: %w", err)
	}
	s.helper = helper
	changed.ObjectMeta.DeepCopyInto(&s.mc.ObjectMeta)
	return nil
}

func joinErrors(a, b error) error {
	return errors.Join(a, b)
}
