//go:build e2e

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

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/poll"
)

// waitFor polls cond every 500ms until it holds, failing the test with
// what and the last state (and the dump) after timeout.
func waitFor(ctx context.Context, t *testing.T, timeout time.Duration, what string, dump func() string, cond func() (bool, string)) {
	t.Helper()
	if ok, last := poll.Until(ctx, timeout, 500*time.Millisecond, cond); !ok {
		msg := fmt.Sprintf("timed out after %v waiting for %s; last state: %s", timeout, what, last)
		if dump != nil {
			msg += "\n" + dump()
		}
		t.Fatal(msg)
	}
}

// holdsFor polls cond every 500ms for d, failing the test with what and the
// state as soon as cond stops holding.
func holdsFor(ctx context.Context, t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	if broke, state := poll.Until(ctx, d, 500*time.Millisecond, func() (bool, string) {
		ok, state := cond()
		return !ok, state
	}); broke {
		t.Fatalf("expected %s to hold for %v; it stopped: %s", what, d, state)
	}
}
