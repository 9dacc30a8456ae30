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

// Package backoff retries a step with a capped, doubling wait. The
// operator's start-up waits for things outside it (Cluster API to be
// installed, its settings objects to be writable) use it, so that an
// outage costs a bounded rate of requests and the step resumes on its own.
package backoff

import (
	"context"
	"time"
)

// Until calls try until it returns true or ctx ends, and waits between
// calls: first, then twice as long each time, at most maxWait. try gets
// the wait that follows if it returns false (to report it). Until returns
// false if ctx ended first.
func Until(ctx context.Context, first, maxWait time.Duration, try func(next time.Duration) bool) bool {
	wait := first
	for {
		if try(wait) {
			return true
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return false
		case <-timer.C:
		}
		wait = min(2*wait, maxWait)
	}
}
