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
// lookup, at most once per ttl for the same settings (the operator-wide
// ones and each MailgunClusterIdentity's are cached apart, so that they do
// not evict each other), and logs when a verdict changes. Only definite
// answers are cached; a transient failure (timeout, 5xx) is retried on the
// next call.
type credentials struct {
	mailers *mailer.Pool
	ttl     time.Duration
	log     logr.Logger

	mu sync.Mutex
	// checks holds the last verdict per settings fingerprint; entries not
	// used for a ttl are dropped when a new one is added, which bounds it
	// by the number of settings in use within a ttl.
	checks map[string]*check
}

type check struct {
	usedAt    time.Time
	checkedAt time.Time
	// definite is set once Mailgun gave a definite answer, err.
	definite bool
	err      error
	lastLog  string
}

// Verify returns nil if Mailgun accepts the key and knows the domain, else
// a *mailer.SendError.
func (c *credentials) Verify(ctx context.Context, s mailer.Settings) error {
	key := s.Fingerprint()
	c.mu.Lock()
	if e := c.checks[key]; e != nil && e.definite && time.Since(e.checkedAt) < c.ttl {
		e.usedAt = time.Now()
		err := e.err
		c.mu.Unlock()
		return err
	}
	c.mu.Unlock()

	state, err := c.mailers.Client(s).CheckDomain(ctx)
	definite := err == nil || mailer.RefusesSettings(err)

	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entry(key)
	e.usedAt = time.Now()
	if definite {
		e.checkedAt, e.definite, e.err = time.Now(), true, err
	}
	verdict := "ok:" + state
	if err != nil {
		verdict = err.Error()
	}
	if verdict != e.lastLog {
		e.lastLog = verdict
		switch {
		case err != nil && definite:
			c.log.Info("Mailgun refused the settings in a domain lookup", "settings", s.String(), "error", err.Error())
		case err != nil:
			c.log.Info("Could not check the key and domain with Mailgun: Mailgun did not answer; checking again later", "domain", s.Domain, "error", err.Error())
		case state != "active":
			c.log.Info("Mailgun knows the domain but it is not active; emails may not be delivered", "domain", s.Domain, "state", state)
		default:
			c.log.Info("Mailgun accepted the key and domain", "domain", s.Domain, "apiBase", s.APIBase)
		}
	}
	return err
}

// entry returns the cache entry for key, adding it (and dropping expired
// ones) if missing. c.mu must be held.
func (c *credentials) entry(key string) *check {
	if e := c.checks[key]; e != nil {
		return e
	}
	if c.checks == nil {
		c.checks = map[string]*check{}
	}
	for k, e := range c.checks {
		if time.Since(e.usedAt) >= c.ttl {
			delete(c.checks, k)
		}
	}
	e := &check{}
	c.checks[key] = e
	return e
}
