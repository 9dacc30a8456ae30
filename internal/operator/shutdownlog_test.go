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

	"github.com/go-logr/logr/funcr"
)

func TestLeaseReleaseOnShutdownIsNotAnError(t *testing.T) {
	tests := []struct {
		name      string
		stopping  bool
		msg       string
		err       error
		wantError bool
	}{
		{"lease released while stopping", true, stopSequenceMsg, errors.New(leaderElectionLost), false},
		{"lease lost while running", false, stopSequenceMsg, errors.New(leaderElectionLost), true},
		{"another error while stopping", true, stopSequenceMsg, errors.New("cache sync failed"), true},
		{"another message while stopping", true, "Reconciler error", errors.New(leaderElectionLost), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var lines []string
			base := funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.stopping {
				cancel()
			}
			quietLeaseRelease(ctx, base).WithName("manager").WithValues("k", "v").Error(tt.err, tt.msg)
			if len(lines) != 1 {
				t.Fatalf("got %d lines, want 1: %q", len(lines), lines)
			}
			if gotError := strings.Contains(lines[0], `"error"=`); gotError != tt.wantError {
				t.Errorf("logged %s; want an error-level line: %v", lines[0], tt.wantError)
			}
		})
	}
}
