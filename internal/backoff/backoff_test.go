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

package backoff_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/backoff"
)

// TestUntilDoublesUpToTheCap: the waits between tries double from the
// first and stop growing at the cap; the step runs until it succeeds.
func TestUntilDoublesUpToTheCap(t *testing.T) {
	var waits []time.Duration
	start := time.Now()
	ok := backoff.Until(context.Background(), time.Millisecond, 4*time.Millisecond, func(next time.Duration) bool {
		if len(waits) == 5 {
			return true
		}
		waits = append(waits, next)
		return false
	})
	want := []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 4 * time.Millisecond, 4 * time.Millisecond}
	if !ok || !slices.Equal(waits, want) {
		t.Fatalf("Until = %v after waits %v, want true after %v", ok, waits, want)
	}
	if elapsed := time.Since(start); elapsed < 15*time.Millisecond {
		t.Errorf("took %v, less than the 15ms the waits add up to", elapsed)
	}
}

// TestUntilStopsWithTheContext: a step that never succeeds is given up
// when the context ends, not retried on.
func TestUntilStopsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	tries := 0
	start := time.Now()
	if backoff.Until(ctx, time.Millisecond, 10*time.Millisecond, func(time.Duration) bool { tries++; return false }) {
		t.Fatal("Until reported success")
	}
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("Until returned %v after the context ended", elapsed)
	}
	// 1+2+4+8+10+10+... ms within 50ms: at most 10 tries.
	if tries < 2 || tries > 10 {
		t.Errorf("%d tries in 50ms with waits doubling from 1ms to 10ms", tries)
	}
}
