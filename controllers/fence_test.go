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
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/send"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/sendprotocol"
)

// TestFenceReadsOnlyWhatTheLeaseDoesNotCover: right before a send the
// fence reads past the cache. Holding the leader election lease since
// before its claim, it reads only the Cluster (a move pauses it): the claim
// it has just written under optimistic locking can only be replaced by a
// successor, which that unbroken hold rules out. Without leader election,
// or with a hold that began after the claim (a replica frozen past its
// lease that got it back once a successor released it), it also reads the
// object, and finds a successor's claim there. A lease no longer held
// withholds the send before any read.
func TestFenceReadsOnlyWhatTheLeaseDoesNotCover(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lease send.Lease
		// takeover replaces the claim right after the reconcile wrote it,
		// as a successor does.
		takeover  bool
		wantReads []string
		wantSends int64
	}{
		{name: "lease held since before the claim", lease: fixedLease{since: time.Now()}, wantReads: []string{"Cluster"}, wantSends: 1},
		{name: "no leader election", wantReads: []string{"MailgunCluster", "Cluster"}, wantSends: 1},
		{name: "no leader election, successor's claim", takeover: true, wantReads: []string{"MailgunCluster"}},
		{name: "lease lost and acquired again since the claim", lease: fixedLease{reacquired: true}, wantReads: []string{"MailgunCluster", "Cluster"}, wantSends: 1},
		{name: "lease acquired again after a successor's claim", lease: fixedLease{reacquired: true}, takeover: true, wantReads: []string{"MailgunCluster"}},
		{name: "lease lost", lease: fixedLease{err: errors.New("lease lost")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			cluster, mc := ownedMailgunCluster("fenced")
			m := &countingMailer{}
			var funcs *interceptor.Funcs
			if tc.takeover {
				funcs = afterTheClaim(func(ann map[string]string) {
					ann[infrav1.SendAttemptedAtAnnotation] = sendprotocol.ClaimValue(time.Now(), "successor")
				})
			}
			c, r := withFakeClient(t, m, fixedSettings{}, funcs, cluster, mc)
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

// fixedLease is held since a fixed time (or, reacquired, since the moment
// it is asked: a hold that began after any claim), or fails with err.
type fixedLease struct {
	since      time.Time
	reacquired bool
	err        error
}

func (l fixedLease) Held() (since, until time.Time, err error) {
	if l.err != nil {
		return time.Time{}, time.Time{}, l.err
	}
	since = l.since
	if l.reacquired {
		since = time.Now()
	}
	return since, time.Now().Add(time.Hour), nil
}

// recordingReader records the type of every object it reads.
type recordingReader struct {
	client.Reader
	kinds []string
}

func (r *recordingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.kinds = append(r.kinds, reflect.TypeOf(obj).Elem().Name())
	return r.Reader.Get(ctx, key, obj, opts...)
}
