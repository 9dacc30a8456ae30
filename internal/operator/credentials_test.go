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
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/mailgunfake"
)

// TestCredentialsAreCheckedOncePerSettings: with the operator-wide
// settings and a MailgunClusterIdentity's in use side by side, each is
// looked up once per ttl, however the checks interleave.
func TestCredentialsAreCheckedOncePerSettings(t *testing.T) {
	operatorWide := mailgunfake.Start("mg.example.com", "key-operator")
	defer operatorWide.Close()
	team := mailgunfake.Start("mg.payments.example.com", "key-team")
	defer team.Close()
	settings := []mailer.Settings{
		{Domain: operatorWide.Domain, APIKey: operatorWide.APIKey, Recipient: "ops@example.com", APIBase: operatorWide.APIBase()},
		{Domain: team.Domain, APIKey: team.APIKey, Recipient: "ops@example.com", APIBase: team.APIBase()},
	}
	creds := &credentials{mailers: mailer.NewPool(5*time.Second, 1, mailer.Limit{}), ttl: time.Minute, log: logr.Discard()}
	for i := range 10 {
		if err := creds.Verify(context.Background(), settings[i%2]); err != nil {
			t.Fatalf("Verify %s: %v", settings[i%2], err)
		}
	}
	if a, b := operatorWide.DomainRequests(), team.DomainRequests(); a != 1 || b != 1 {
		t.Errorf("domain lookups: %d for the operator-wide settings and %d for the identity's, want 1 each", a, b)
	}
}

// TestCredentialsLogOnceWhileMailgunIsDown: with two settings in use
// during an outage, each says once that it could not be checked, not at
// every check.
func TestCredentialsLogOnceWhileMailgunIsDown(t *testing.T) {
	down := func(string) *mailgunfake.Fault { f := mailgunfake.StatusFault(503, "maintenance"); return &f }
	operatorWide := mailgunfake.Start("mg.example.com", "key-operator")
	defer operatorWide.Close()
	operatorWide.SetFaultFunc(down)
	team := mailgunfake.Start("mg.payments.example.com", "key-team")
	defer team.Close()
	team.SetFaultFunc(down)
	settings := []mailer.Settings{
		{Domain: operatorWide.Domain, APIKey: operatorWide.APIKey, Recipient: "ops@example.com", APIBase: operatorWide.APIBase()},
		{Domain: team.Domain, APIKey: team.APIKey, Recipient: "ops@example.com", APIBase: team.APIBase()},
	}
	var lines []string
	log := funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{})
	creds := &credentials{mailers: mailer.NewPool(5*time.Second, 1, mailer.Limit{}), ttl: time.Minute, log: log}
	for i := range 10 {
		if err := creds.Verify(context.Background(), settings[i%2]); err == nil {
			t.Fatal("Verify passed while Mailgun answers 503")
		}
	}
	if a, b := operatorWide.DomainRequests(), team.DomainRequests(); a != 5 || b != 5 {
		t.Errorf("domain lookups %d and %d, want 5 each: a failed check is not cached", a, b)
	}
	if len(lines) != 2 {
		t.Errorf("%d log lines, want 2 (one per settings):\n%s", len(lines), strings.Join(lines, "\n"))
	}
}
