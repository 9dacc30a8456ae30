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

// Package poll is the one polling helper of the tests and tools: every wait
// for a condition goes through Until, so every wait is bounded in time.
package poll

import (
	"context"
	"time"
)

// Until checks cond every interval until it holds, timeout has passed or ctx
// is done. It returns whether cond held and the state cond last described,
// for the caller's failure message.
func Until(ctx context.Context, timeout, interval time.Duration, cond func() (bool, string)) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		ok, state := cond()
		if ok {
			return true, state
		}
		select {
		case <-ctx.Done():
			return false, state
		case <-tick.C:
		}
	}
}
