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
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/backoff"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/config"
)

// UserObjectsCheckName is the readiness check that passes once the
// Mailgun settings objects exist and belong to the user.
const UserObjectsCheckName = "mailgun-settings-objects"

// userObjectsStarter makes the settings objects the user's (see
// config.UserObjects) when a replica starts, retrying with a growing wait
// until it succeeds. It runs on every replica, not only the leader,
// because its readiness check gates the Deployment's: under OLM v0 the
// new version's pod must have taken the objects over from the old CSV
// before OLM counts the upgrade done and deletes that CSV, which would
// garbage-collect whatever the CSV still owns.
type userObjectsStarter struct {
	objects       config.UserObjects
	log           logr.Logger
	firstInterval time.Duration
	maxInterval   time.Duration
	done          atomic.Bool
}

// Start implements manager.Runnable.
func (s *userObjectsStarter) Start(ctx context.Context) error {
	backoff.Until(ctx, s.firstInterval, s.maxInterval, func(next time.Duration) bool {
		did, err := s.objects.Ensure(ctx)
		for _, d := range did {
			s.log.Info("Mailgun settings object: " + d)
		}
		if err != nil {
			s.log.Info("Could not create or take over the Mailgun settings objects; trying again (the operator is not Ready until then)",
				"retryIn", next.String(), "reason", err.Error())
			return false
		}
		s.done.Store(true)
		return true
	})
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (s *userObjectsStarter) NeedLeaderElection() bool { return false }

// Check is the readiness check.
func (s *userObjectsStarter) Check(*http.Request) error {
	if s.done.Load() {
		return nil
	}
	return errors.New("the Mailgun settings Secret and ConfigMap are not created or taken over from their installer yet")
}
