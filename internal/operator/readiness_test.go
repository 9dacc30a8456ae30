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
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/config"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/mailgunfake"
)

// TestReadinessIsTheOperatorsNotMailguns: the readiness check fails for
// settings that are missing or that Mailgun refuses, and passes, within a
// probe's timeout, while Mailgun is down or hangs.
func TestReadinessIsTheOperatorsNotMailguns(t *testing.T) {
	const domain, key = "mg.example.com", "key-readiness-0a1b2c"
	tests := []struct {
		name      string
		key       string
		fault     *mailgunfake.Fault
		wantReady bool
	}{
		{name: "Mailgun accepts the settings", key: key, wantReady: true},
		{name: "Mailgun refuses the key", key: "key-wrong", wantReady: false},
		{name: "settings missing", key: "", wantReady: false},
		{name: "Mailgun answers 503", key: key, fault: &mailgunfake.Fault{Kind: mailgunfake.Status, Status: 503, Body: `{"message":"down"}`}, wantReady: true},
		{name: "Mailgun hangs", key: key, fault: &mailgunfake.Fault{Kind: mailgunfake.Hang}, wantReady: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := mailgunfake.Start(domain, key)
			defer fake.Close()
			if tt.fault != nil {
				fake.SetFaultFunc(func(string) *mailgunfake.Fault { f := *tt.fault; return &f })
			}
			env := map[string]string{config.EnvDomain: domain, config.EnvAPIKey: tt.key, config.EnvRecipient: "ops@example.com", config.EnvAPIBase: fake.APIBase()}
			source := &config.Source{Getenv: func(k string) string { return env[k] }}
			creds := &credentials{mailers: mailer.NewPool(30*time.Second, 1, mailer.Limit{}), ttl: time.Minute, log: logr.Discard()}
			start := time.Now()
			err := checkConfig(context.Background(), source, creds)
			if (err == nil) != tt.wantReady {
				t.Errorf("checkConfig = %v, want ready %v", err, tt.wantReady)
			}
			if elapsed := time.Since(start); elapsed > time.Second {
				t.Errorf("the check took %v, longer than a probe's 1s timeout", elapsed)
			}
		})
	}
}
