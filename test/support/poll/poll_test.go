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

package poll_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/poll"
)

func TestUntil(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name      string
		ctx       context.Context
		holdsFrom int // the call from which cond holds; 0: never
		wantOK    bool
		wantState string
		maxCalls  int
	}{
		{name: "holds at once", ctx: context.Background(), holdsFrom: 1, wantOK: true, wantState: "call 1", maxCalls: 1},
		{name: "holds after a few polls", ctx: context.Background(), holdsFrom: 3, wantOK: true, wantState: "call 3", maxCalls: 3},
		// 200ms at 10ms: about 20 calls, never unbounded.
		{name: "never holds: gives up at the timeout with the last state", ctx: context.Background(), wantOK: false, maxCalls: 25},
		{name: "context already done: one look, then gives up", ctx: canceled, wantOK: false, wantState: "call 1", maxCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			start := time.Now()
			ok, state := poll.Until(tt.ctx, 200*time.Millisecond, 10*time.Millisecond, func() (bool, string) {
				calls++
				return tt.holdsFrom > 0 && calls >= tt.holdsFrom, fmt.Sprintf("call %d", calls)
			})
			if ok != tt.wantOK {
				t.Errorf("ok = %v, want %v", ok, tt.wantOK)
			}
			if want := tt.wantState; want == "" {
				want = fmt.Sprintf("call %d", calls)
				if state != want {
					t.Errorf("state = %q, want the last one, %q", state, want)
				}
			} else if state != want {
				t.Errorf("state = %q, want %q", state, want)
			}
			if calls > tt.maxCalls {
				t.Errorf("cond called %d times, want at most %d", calls, tt.maxCalls)
			}
			if elapsed := time.Since(start); elapsed > time.Second {
				t.Errorf("took %v; the timeout is 200ms", elapsed)
			}
		})
	}
}
