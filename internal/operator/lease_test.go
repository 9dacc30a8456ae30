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
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// stubLock is a Lease lock whose writes succeed or fail on demand.
type stubLock struct {
	resourcelock.Interface
	fail bool
}

func (s *stubLock) Create(context.Context, resourcelock.LeaderElectionRecord) error { return s.err() }
func (s *stubLock) Update(context.Context, resourcelock.LeaderElectionRecord) error { return s.err() }
func (s *stubLock) Identity() string                                                { return "me" }
func (s *stubLock) Describe() string                                                { return "ns/lease" }
func (s *stubLock) err() error {
	if s.fail {
		return errors.New("apiserver unreachable")
	}
	return nil
}

// TestFencedLeaseHeld: sends are allowed only within the renew deadline of
// this replica's last successful renewal, and the hold they are allowed
// under began with the acquisition after which no renewal came late: a
// replica that let the Lease lapse and acquired it again (a frozen leader
// whose successor released the Lease on shutdown) is in a new hold.
func TestFencedLeaseHeld(t *testing.T) {
	// Long enough that a loaded CI machine does not stretch a step past it.
	const deadline = 500 * time.Millisecond
	ctx := context.Background()
	mine := resourcelock.LeaderElectionRecord{HolderIdentity: "me"}
	tests := []struct {
		name string
		// steps run in order; then Held is asked after wait.
		steps []func(*fencedLease, *stubLock) error
		wait  time.Duration
		held  bool
		// holdFrom is the step whose start the hold dates from, if held.
		holdFrom int
		// again: the replica logs that it holds the Lease again after a
		// break (the fault suite counts these lines).
		again bool
	}{
		{name: "never acquired", held: false},
		{name: "just acquired", held: true, steps: []func(*fencedLease, *stubLock) error{
			func(l *fencedLease, _ *stubLock) error { return l.Create(ctx, mine) }}},
		{name: "renewed, then the renew deadline passed (a frozen replica)", held: false, wait: 2 * deadline, steps: []func(*fencedLease, *stubLock) error{
			func(l *fencedLease, _ *stubLock) error { return l.Update(ctx, mine) }}},
		{name: "renewals failing after the last success", held: false, wait: 2 * deadline, steps: []func(*fencedLease, *stubLock) error{
			func(l *fencedLease, _ *stubLock) error { return l.Update(ctx, mine) },
			func(l *fencedLease, s *stubLock) error { s.fail = true; _ = l.Update(ctx, mine); return nil }}},
		{name: "released on shutdown", held: false, steps: []func(*fencedLease, *stubLock) error{
			func(l *fencedLease, _ *stubLock) error { return l.Update(ctx, mine) },
			func(l *fencedLease, _ *stubLock) error { return l.Update(ctx, resourcelock.LeaderElectionRecord{}) }}},
		{name: "released, then acquired: a first hold", held: true, holdFrom: 2, steps: []func(*fencedLease, *stubLock) error{
			func(l *fencedLease, _ *stubLock) error { return l.Update(ctx, mine) },
			func(l *fencedLease, _ *stubLock) error { return l.Update(ctx, resourcelock.LeaderElectionRecord{}) },
			func(l *fencedLease, _ *stubLock) error { return l.Update(ctx, mine) }}},
		{name: "renewed within the renew deadline: one hold", held: true, holdFrom: 0, steps: []func(*fencedLease, *stubLock) error{
			func(l *fencedLease, _ *stubLock) error { return l.Create(ctx, mine) },
			func(l *fencedLease, _ *stubLock) error { return l.Update(ctx, mine) }}},
		{name: "created again (the Lease was deleted): a new hold", held: true, holdFrom: 1, again: true, steps: []func(*fencedLease, *stubLock) error{
			func(l *fencedLease, _ *stubLock) error { return l.Update(ctx, mine) },
			func(l *fencedLease, _ *stubLock) error { return l.Create(ctx, mine) }}},
		{name: "lapsed, then acquired again: a new hold", held: true, holdFrom: 2, again: true, steps: []func(*fencedLease, *stubLock) error{
			func(l *fencedLease, _ *stubLock) error { return l.Update(ctx, mine) },
			func(*fencedLease, *stubLock) error { time.Sleep(2 * deadline); return nil },
			func(l *fencedLease, _ *stubLock) error { return l.Update(ctx, mine) }}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stub := &stubLock{}
			var logged []string
			log := funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{})
			l := &fencedLease{Interface: stub, renewDeadline: deadline, log: log}
			starts := make([]time.Time, len(tt.steps)+1)
			for i, step := range tt.steps {
				starts[i] = time.Now()
				if err := step(l, stub); err != nil {
					t.Fatal(err)
				}
			}
			starts[len(tt.steps)] = time.Now()
			time.Sleep(tt.wait)
			since, until, err := l.Held()
			if (err == nil) != tt.held {
				t.Errorf("Held() = %v, want held %v", err, tt.held)
			}
			if tt.held && (until.Before(time.Now()) || until.After(time.Now().Add(deadline))) {
				t.Errorf("held until %v: want within the renew deadline from now", until)
			}
			if tt.held && (since.Before(starts[tt.holdFrom]) || since.After(starts[tt.holdFrom+1])) {
				t.Errorf("held since %v: want the start of step %d (%v)", since, tt.holdFrom, starts[tt.holdFrom])
			}
			// The fault suite looks for this line.
			again := len(logged) == 1 && strings.Contains(logged[0], `"msg"="Holding the leader election lease again after a break;`)
			if again != tt.again || (!tt.again && len(logged) > 0) {
				t.Errorf("logged %q: want one line about holding the Lease again: %v", logged, tt.again)
			}
		})
	}
}
