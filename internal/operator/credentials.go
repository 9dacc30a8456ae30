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
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
)

// credentials checks the Mailgun key, domain and region with a domain
// lookup, at most once per ttl for the same settings, and logs when the
// verdict changes. Only definite answers are cached; a transient failure
// (timeout, 5xx) is retried on the next call.
type credentials struct {
	mailers *mailer.Pool
	ttl     time.Duration
	log     logr.Logger

	mu        sync.Mutex
	key       string
	checkedAt time.Time
	err       error
	lastLog   string
}

// Verify returns nil if Mailgun accepts the key and knows the domain, else
// a *mailer.SendError.
func (c *credentials) Verify(ctx context.Context, s mailer.Settings) error {
	key := s.Fingerprint()
	c.mu.Lock()
	if key == c.key && time.Since(c.checkedAt) < c.ttl {
		err := c.err
		c.mu.Unlock()
		return err
	}
	c.mu.Unlock()

	state, err := c.mailers.Client(s).CheckDomain(ctx)
	definite := err == nil || mailer.RefusesSettings(err)

	c.mu.Lock()
	defer c.mu.Unlock()
	if definite {
		c.key, c.checkedAt, c.err = key, time.Now(), err
	}
	verdict := "ok:" + state
	if err != nil {
		verdict = err.Error()
	}
	if verdict != c.lastLog {
		c.lastLog = verdict
		switch {
		case err != nil && definite:
			c.log.Info("Mailgun refused the settings in a domain lookup", "settings", s.String(), "error", err.Error())
		case err != nil:
			c.log.Info("Could not check the key and domain with Mailgun: Mailgun did not answer; checking again later", "error", err.Error())
		case state != "active":
			c.log.Info("Mailgun knows the domain but it is not active; emails may not be delivered", "domain", s.Domain, "state", state)
		default:
			c.log.Info("Mailgun accepted the key and domain", "domain", s.Domain, "apiBase", s.APIBase)
		}
	}
	return err
}
