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
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/sendprotocol"
)

// The scope's writes are what keeps a reconcile that works from a stale
// copy (the cache lags behind our own writes) from undoing newer state.
// These tests run the writes against controller-runtime's fake client,
// which enforces resourceVersion preconditions like the apiserver.
func TestScopeWrites(t *testing.T) {
	accepted := metav1.Condition{Type: infrav1.EmailSentCondition, Status: metav1.ConditionTrue, Reason: infrav1.EmailAcceptedReason}
	outcomeUnknown := metav1.Condition{Type: infrav1.EmailSentCondition, Status: metav1.ConditionFalse, Reason: infrav1.SendOutcomeUnknownReason}

	tests := []struct {
		name string
		// write changes a scope built from copy and persists it.
		write func(ctx context.Context, s *Scope[*infrav1.MailgunCluster]) error
		// stale builds the scope from the object as first created, after a
		// newer write by someone else.
		stale        bool
		wantConflict bool
		// want checks the stored object against the one first read.
		want func(t *testing.T, got, first *infrav1.MailgunCluster)
	}{
		{
			name:  "status from a stale copy is refused, not written over newer conditions",
			stale: true,
			write: func(ctx context.Context, s *Scope[*infrav1.MailgunCluster]) error {
				conditions.Set(s.Object, outcomeUnknown)
				return s.Patch(ctx)
			},
			wantConflict: true,
			want: func(t *testing.T, got, _ *infrav1.MailgunCluster) {
				if c := conditions.Get(got, infrav1.EmailSentCondition); c == nil || c.Reason != infrav1.EmailAcceptedReason {
					t.Errorf("EmailSent = %+v, want the newer %s", c, infrav1.EmailAcceptedReason)
				}
			},
		},
		{
			name:  "a send attempt cannot be claimed from a stale copy",
			stale: true,
			write: func(ctx context.Context, s *Scope[*infrav1.MailgunCluster]) error {
				return s.recordAttempt(ctx, infrav1.ClusterFinalizer, "<m@example.com>", sendprotocol.ClaimValue(time.Now(), "replica-a"), "example.com", nil)
			},
			wantConflict: true,
			want: func(t *testing.T, got, _ *infrav1.MailgunCluster) {
				if _, ok := got.Annotations[infrav1.SendAttemptedAtAnnotation]; ok {
					t.Errorf("the attempt was recorded from a stale copy")
				}
			},
		},
		{
			name: "metadata and status written in one reconcile, the status locked to the metadata write",
			write: func(ctx context.Context, s *Scope[*infrav1.MailgunCluster]) error {
				if err := s.recordAttempt(ctx, infrav1.ClusterFinalizer, "<m@example.com>", sendprotocol.ClaimValue(time.Now(), "replica-a"), "example.com", nil); err != nil {
					return err
				}
				testKind.markAccepted(s.Object, "<m@example.com>")
				return s.Patch(ctx)
			},
			want: func(t *testing.T, got, _ *infrav1.MailgunCluster) {
				if got.Annotations[infrav1.AcceptedMessageIDAnnotation] != "<m@example.com>" || got.Status.MessageID != "<m@example.com>" {
					t.Errorf("annotations %v, status message ID %q; want the accepted ID in both", got.Annotations, got.Status.MessageID)
				}
				if _, ok := got.Annotations[infrav1.SendAttemptedAtAnnotation]; ok {
					t.Errorf("the attempt marker was not cleared on acceptance")
				}
				if c := conditions.Get(got, infrav1.EmailSentCondition); c == nil || c.Status != metav1.ConditionTrue {
					t.Errorf("EmailSent = %+v, want True", c)
				}
			},
		},
		{
			name: "nothing changed, nothing written",
			write: func(ctx context.Context, s *Scope[*infrav1.MailgunCluster]) error {
				return s.Patch(ctx)
			},
			want: func(t *testing.T, got, first *infrav1.MailgunCluster) {
				if got.ResourceVersion != first.ResourceVersion {
					t.Errorf("resourceVersion %s, want %s: the object was written", got.ResourceVersion, first.ResourceVersion)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			mc := &infrav1.MailgunCluster{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mc", Generation: 1},
				Spec:       infrav1.MailgunClusterSpec{Priority: infrav1.PriorityUrgent, Request: "r", Requester: "ops@example.com"},
				Status:     infrav1.MailgunClusterStatus{ObservedGeneration: 1},
			}
			c := fakeClient(t, mc)
			first := &infrav1.MailgunCluster{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(mc), first); err != nil {
				t.Fatal(err)
			}
			if tt.stale {
				// Someone else records acceptance after we read first.
				newer := first.DeepCopy()
				conditions.Set(newer, accepted)
				if err := c.Status().Update(ctx, newer); err != nil {
					t.Fatal(err)
				}
			}

			err := tt.write(ctx, NewScope(first.DeepCopy(), c))
			if tt.wantConflict != apierrors.IsConflict(err) {
				t.Fatalf("write error %v, want conflict %v", err, tt.wantConflict)
			}
			if !tt.wantConflict && err != nil {
				t.Fatal(err)
			}
			got := &infrav1.MailgunCluster{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(mc), got); err != nil {
				t.Fatal(err)
			}
			tt.want(t, got, first)
		})
	}
}

// TestStaleRecordWritesAreRefused: a reconcile that read the object before
// someone else changed its send record (a successor leader's new claim)
// must not remove or replace the record with its delayed final patch: its
// own claim is gone, and removing the successor's would let the next
// reconcile send again.
func TestStaleRecordWritesAreRefused(t *testing.T) {
	claimA := sendprotocol.ClaimValue(time.Now().Add(-time.Minute), "deposed")
	claimB := sendprotocol.ClaimValue(time.Now(), "successor")
	tests := []struct {
		name string
		// change is what the deposed leader's reconcile does to its copy.
		change       func(obj *infrav1.MailgunCluster)
		wantConflict bool
	}{
		{"clearing its claim after a refusal", func(obj *infrav1.MailgunCluster) {
			delete(obj.Annotations, infrav1.SendAttemptedAtAnnotation)
		}, true},
		{"recording an acceptance", func(obj *infrav1.MailgunCluster) { testKind.markAccepted(obj, "<accepted@example.com>") }, true},
		{"a change outside the send record", func(obj *infrav1.MailgunCluster) { obj.Labels = map[string]string{"touched": "yes"} }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			mc := &infrav1.MailgunCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mc", Annotations: map[string]string{
				infrav1.MessageIDAnnotation: "<mailguncluster.uid@example.com>", infrav1.SendAttemptedAtAnnotation: claimA,
			}}}
			c := fakeClient(t, mc)
			deposed := &infrav1.MailgunCluster{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(mc), deposed); err != nil {
				t.Fatal(err)
			}
			s := NewScope(deposed.DeepCopy(), c)

			// The successor claims while the deposed leader is frozen.
			successor := deposed.DeepCopy()
			successor.Annotations[infrav1.SendAttemptedAtAnnotation] = claimB
			if err := c.Update(ctx, successor); err != nil {
				t.Fatal(err)
			}

			tt.change(s.Object)
			err := s.Patch(ctx)
			if apierrors.IsConflict(err) != tt.wantConflict {
				t.Fatalf("patch error %v, want conflict %v", err, tt.wantConflict)
			}
			got := &infrav1.MailgunCluster{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(mc), got); err != nil {
				t.Fatal(err)
			}
			if claim := got.Annotations[infrav1.SendAttemptedAtAnnotation]; claim != claimB {
				t.Errorf("live claim %q, want the successor's %q", claim, claimB)
			}
		})
	}
}

// fakeClient is controller-runtime's fake client holding mc, which enforces
// resourceVersion preconditions like the apiserver.
func fakeClient(t *testing.T, mc *infrav1.MailgunCluster) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := infrav1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(mc).WithStatusSubresource(mc).Build()
}
