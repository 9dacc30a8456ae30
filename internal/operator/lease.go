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

package operator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// newIdentity names this process in the leader election Lease and in its
// send claims: the pod name (the hostname) and a random suffix, unique per
// start.
func newIdentity() (string, error) {
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("reading the hostname: %w", err)
	}
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("choosing an identity: %w", err)
	}
	return host + "_" + hex.EncodeToString(b), nil
}

// fencedLease is the leader election Lease lock, as controller-runtime
// would build it, that also remembers when this replica last renewed it, so
// that a send can check that the lease is still held.
//
// A renewal that started at t keeps any other replica from acquiring the
// Lease until t + LeaseDuration (they wait a full LeaseDuration after
// observing it). Held allows sends until t + RenewDeadline, the point where
// the leader gives up itself, and the send's write deadline is that same
// time (mailer.WithWriteDeadline): no byte of a send leaves after it, and
// LeaseDuration - RenewDeadline (5s by default) is the spare before a
// successor can hold the Lease.
type fencedLease struct {
	resourcelock.Interface
	renewDeadline time.Duration
	log           logr.Logger

	mu sync.Mutex
	// renewed is when the last successful acquisition or renewal started
	// (monotonic clock), zero before the first.
	renewed time.Time
	// since is when the current unbroken hold began: the start of the
	// acquisition after which each renewal started within the renew
	// deadline of the one before. A replica that let the Lease lapse
	// (frozen, partitioned) and acquires it again, as client-go does when
	// a successor released it on shutdown, starts a new hold: someone else
	// may have held the Lease in between.
	since time.Time
}

func newFencedLease(cfg *rest.Config, namespace, name, identity string, renewDeadline time.Duration, log logr.Logger) (*fencedLease, error) {
	if namespace == "" {
		return nil, errors.New("leader election needs a namespace: set --leader-election-namespace or --config-namespace")
	}
	cfg = rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	// As controller-runtime does: one hung request must not cost the lease.
	cfg.Timeout = max(renewDeadline/2, time.Second)
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("leader election client: %w", err)
	}
	coordination, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("leader election client: %w", err)
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, namespace, name, core, coordination,
		resourcelock.ResourceLockConfig{Identity: identity})
	if err != nil {
		return nil, fmt.Errorf("leader election lock: %w", err)
	}
	return &fencedLease{Interface: lock, renewDeadline: renewDeadline, log: log}, nil
}

// Create acquires the Lease for the first time, or after someone deleted
// it: a new hold, since a standby creates a missing Lease at once.
func (l *fencedLease) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := time.Now()
	if err := l.Interface.Create(ctx, ler); err != nil {
		return err
	}
	l.markRenewed(start, ler, true)
	return nil
}

// Update acquires or renews the Lease.
func (l *fencedLease) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := time.Now()
	if err := l.Interface.Update(ctx, ler); err != nil {
		return err
	}
	l.markRenewed(start, ler, false)
	return nil
}

// markRenewed records a successful write of the Lease that started at
// start; created means it created the Lease, which always begins a hold.
func (l *fencedLease) markRenewed(start time.Time, ler resourcelock.LeaderElectionRecord, created bool) {
	l.mu.Lock()
	again := false
	if ler.HolderIdentity == l.Identity() {
		// A renewal that starts within the renew deadline of the last one
		// used a version of the Lease read before any successor could have
		// acquired it (LeaseDuration after that renewal), so a successor's
		// write in between would have made it fail.
		if created || l.renewed.IsZero() || start.Sub(l.renewed) >= l.renewDeadline {
			again = !l.renewed.IsZero()
			l.since = start
		}
		l.renewed = start
	} else {
		// Releasing on shutdown writes an empty holder.
		l.renewed, l.since = time.Time{}, time.Time{}
	}
	l.mu.Unlock()
	if again {
		l.log.Info("Holding the leader election lease again after a break; sends whose claim predates it read their object before sending",
			"lease", l.Describe())
	}
}

// Held reports since when this replica has held the Lease without a break
// and until when it may still act as the leader: the renew deadline after
// its last successful renewal; an error once that has passed or if it does
// not hold the Lease.
func (l *fencedLease) Held() (since, until time.Time, err error) {
	l.mu.Lock()
	renewed := l.renewed
	since = l.since
	l.mu.Unlock()
	if renewed.IsZero() {
		return time.Time{}, time.Time{}, errors.New("this replica does not hold the leader election lease")
	}
	until = renewed.Add(l.renewDeadline)
	if age := time.Since(renewed); age >= l.renewDeadline {
		return time.Time{}, time.Time{}, fmt.Errorf("the leader election lease was last renewed %s ago, not within the renew deadline %s: another replica may be taking over",
			age.Round(time.Millisecond), l.renewDeadline)
	}
	return since, until, nil
}
