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
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
)

// Scope is one reconcile's view of an object, and what the apiserver last
// confirmed of it.
type Scope[T Object] struct {
	client client.Client
	// Object is the object as the reconcile changes it.
	Object T
	// before is the object as the apiserver last confirmed it; Patch sends
	// the difference.
	before T
	// replaced are the versions the reconcile's writes replaced, oldest
	// first: a cache still showing one of them is behind our own writes.
	replaced []string
}

// NewScope starts a reconcile of obj, as read.
func NewScope[T Object](obj T, c client.Client) *Scope[T] {
	return &Scope[T]{client: c, Object: obj, before: deepCopy(obj)}
}

func deepCopy[T Object](obj T) T {
	return obj.DeepCopyObject().(T)
}

// objectMeta is obj's metadata; every API type embeds metav1.ObjectMeta.
func objectMeta(obj Object) *metav1.ObjectMeta {
	return obj.(metav1.ObjectMetaAccessor).GetObjectMeta().(*metav1.ObjectMeta)
}

// Patch persists the changes made during the reconcile in at most two
// writes: metadata first, then the whole status, conditions included.
// (Cluster API's patch helper writes conditions separately, a third write
// per change.)
//
// The metadata write is a merge patch, so that it touches only what this
// reconcile changed, locked to the version read when it changes the send
// record. The status is ours alone and is written whole, as an
// update locked to the version last confirmed: a reconcile working from a
// stale cache must fail and retry rather than wipe conditions written
// meanwhile. An update is cheaper than a locked merge patch for the
// apiserver and for us (no patch to compute or apply), which matters
// because writes are what a busy control plane limits (docs/performance.md).
func (s *Scope[T]) Patch(ctx context.Context) error {
	obj := s.Object
	// Once the last finalizer goes, the object disappears with the write.
	deleted := !obj.GetDeletionTimestamp().IsZero() && len(obj.GetFinalizers()) == 0

	if !equality.Semantic.DeepEqual(objectMeta(s.before), objectMeta(obj)) {
		after := deepCopy(s.before)
		objectMeta(obj).DeepCopyInto(objectMeta(after))
		var opts []client.MergeFromOption
		if sendRecordChanged(s.before, obj) {
			// Removing or replacing a claim or a record is only right
			// for the version it was read from: a deposed leader's
			// delayed write must not remove its successor's claim.
			opts = append(opts, client.MergeFromWithOptimisticLock{})
		}
		if err := s.client.Patch(ctx, after, client.MergeFromWithOptions(s.before, opts...)); err != nil {
			if deleted && apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("patching metadata: %w", err)
		}
		if !deleted {
			s.noteReplaced(s.before, after)
		}
		// Lock the status write to the version this write produced.
		objectMeta(after).DeepCopyInto(objectMeta(s.before))
		obj.SetResourceVersion(after.GetResourceVersion())
	}
	if deleted || s.statusUnchanged() {
		return nil
	}
	after := deepCopy(obj)
	after.SetResourceVersion(s.before.GetResourceVersion())
	if err := s.client.Status().Update(ctx, after); err != nil {
		return fmt.Errorf("updating status: %w", err)
	}
	s.noteReplaced(s.before, after)
	return nil
}

// noteReplaced records that a write turned the version of before into the
// version of after; a write that changed nothing (the same version) did not
// replace it, and no watch event would end a wait for it.
func (s *Scope[T]) noteReplaced(before, after T) {
	if v := before.GetResourceVersion(); v != after.GetResourceVersion() {
		s.replaced = append(s.replaced, v)
	}
}

// statusUnchanged reports whether the object differs from what the
// apiserver last confirmed only in metadata (the reconcile changes no spec).
func (s *Scope[T]) statusUnchanged() bool {
	obj := deepCopy(s.Object)
	objectMeta(s.before).DeepCopyInto(objectMeta(obj))
	obj.GetObjectKind().SetGroupVersionKind(s.before.GetObjectKind().GroupVersionKind())
	return equality.Semantic.DeepEqual(s.before, obj)
}

// recordAttempt durably records, before a send, the Message-Id, the claim
// of the attempt and the Mailgun domain it is made with, the object they
// belong to, the finalizer, the block on clusterctl move and what claimed
// (if not nil) fixes in the spec, in one write.
func (s *Scope[T]) recordAttempt(ctx context.Context, finalizer, messageID, claim, domain string, claimed func(T)) error {
	err := s.patchMetadata(ctx, func(obj T) {
		if claimed != nil {
			claimed(obj)
		}
		controllerutil.AddFinalizer(obj, finalizer)
		ann := obj.GetAnnotations()
		ann[infrav1.MessageIDAnnotation] = messageID
		ann[infrav1.SendAttemptedAtAnnotation] = claim
		ann[infrav1.SendDomainAnnotation] = domain
		ann[infrav1.SentForAnnotation] = sentFor(obj)
		ann[clusterctlv1.BlockMoveAnnotation] = blockMoveValue
	})
	if err != nil {
		return fmt.Errorf("recording the send attempt before sending: %w", err)
	}
	if claimed != nil {
		// patchMetadata keeps only the metadata of what was written.
		claimed(s.Object)
	}
	return nil
}

// patchMetadata writes a metadata change at once, with optimistic locking so
// that it fails if our copy is stale, e.g. when the cache has not yet seen
// the record of an earlier successful send. Status changes made so far stay
// pending for the final patch.
func (s *Scope[T]) patchMetadata(ctx context.Context, mutate func(T)) error {
	changed := deepCopy(s.Object)
	if changed.GetAnnotations() == nil {
		changed.SetAnnotations(map[string]string{})
	}
	mutate(changed)
	if err := s.client.Patch(ctx, changed, client.MergeFromWithOptions(s.Object, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	s.noteReplaced(s.Object, changed)
	// changed now holds what the apiserver stored, including the persisted
	// status; diff later changes against it.
	s.before = deepCopy(changed)
	objectMeta(changed).DeepCopyInto(objectMeta(s.Object))
	return nil
}
