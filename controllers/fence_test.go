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
	"reflect"
	"slices"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/send"
)

// TestFenceReadsOnlyWhatTheLeaseDoesNotCover: right before a send the
// fence reads past the cache. Holding the leader election lease, it reads
// only the Cluster (a move pauses it): the claim this reconcile has just
// written under optimistic locking can only be replaced by a successor,
// which the lease rules out. Without leader election it also reads the
// object, to find another replica's claim. A lease no longer held withholds
// the send before any read.
func TestFenceReadsOnlyWhatTheLeaseDoesNotCover(t *testing.T) {
	for _, tc := range []struct {
		name      string
		lease     send.Lease
		wantReads []string
		wantSends int64
	}{
		{name: "lease held", lease: fixedLease{until: time.Now().Add(time.Hour)}, wantReads: []string{"Cluster"}, wantSends: 1},
		{name: "no leader election", wantReads: []string{"MailgunCluster", "Cluster"}, wantSends: 1},
		{name: "lease lost", lease: fixedLease{err: errors.New("lease lost")}, wantSends: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			cluster, mc := ownedMailgunCluster("fenced")
			m := &countingMailer{}
			c, r := withFakeClient(t, m, fixedSettings{}, nil, cluster, mc)
			reads := &recordingReader{Reader: c}
			r.APIReader = reads
			if tc.lease != nil {
				r.Lease = tc.lease
			}
			if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(mc)}); err != nil {
				t.Fatal(err)
			}
			if m.sends.Load() != tc.wantSends {
				t.Fatalf("%d sends, want %d", m.sends.Load(), tc.wantSends)
			}
			if !slices.Equal(reads.kinds, tc.wantReads) {
				t.Fatalf("reads past the cache %q, want %q", reads.kinds, tc.wantReads)
			}
		})
	}
}

// fixedLease is held until a fixed time, or fails with err.
type fixedLease struct {
	until time.Time
	err   error
}

func (l fixedLease) Held() (time.Time, error) { return l.until, l.err }

// recordingReader records the type of every object it reads.
type recordingReader struct {
	client.Reader
	kinds []string
}

func (r *recordingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.kinds = append(r.kinds, reflect.TypeOf(obj).Elem().Name())
	return r.Reader.Get(ctx, key, obj, opts...)
}
