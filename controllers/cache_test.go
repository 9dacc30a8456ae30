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
	"sync/atomic"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
)

// TestOwnWritesCauseNoConflicts: a reconcile that reads, from a cache
// lagging behind the operator's own writes, a version those writes
// replaced writes nothing (every locked write from it would be refused
// with 409 Conflict) and comes back once the cache has caught up.
func TestOwnWritesCauseNoConflicts(t *testing.T) {
	cluster, mc := ownedMailgunCluster("lagging")
	var stale atomic.Pointer[infrav1.MailgunCluster]
	var writes atomic.Int64
	funcs := &interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if old, ok := obj.(*infrav1.MailgunCluster); ok && stale.Load() != nil {
				stale.Load().DeepCopyInto(old)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			writes.Add(1)
			return c.Patch(ctx, obj, patch, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			writes.Add(1)
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	}
	m := &countingMailer{}
	c, r := withFakeClient(t, m, fixedSettings{}, funcs, cluster, mc)
	ctx, req := context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(mc)}

	before := &infrav1.MailgunCluster{}
	if err := c.Get(ctx, req.NamespacedName, before); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if m.sends.Load() != 1 || writes.Load() == 0 {
		t.Fatalf("the first reconcile sent %d emails in %d writes, want 1 email", m.sends.Load(), writes.Load())
	}

	// The cache still shows the version read before those writes.
	stale.Store(before)
	writes.Store(0)
	res, err := r.Reconcile(ctx, req)
	if err != nil {
		t.Fatalf("reconciling from the stale cache: %v", err)
	}
	if writes.Load() != 0 {
		t.Errorf("a reconcile from a version our own writes replaced wrote %d times, want none", writes.Load())
	}
	if res.RequeueAfter <= 0 {
		t.Errorf("Reconcile = %+v, want it to come back in case the watch event does not", res)
	}

	// The cache caught up: the reconcile goes on, and nothing is sent again.
	stale.Store(nil)
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	got := &infrav1.MailgunCluster{}
	if err := c.Get(ctx, req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	if m.sends.Load() != 1 || got.Status.MessageID == "" {
		t.Errorf("%d emails, status.messageID %q; want 1 email, recorded", m.sends.Load(), got.Status.MessageID)
	}
}
