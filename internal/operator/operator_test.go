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

package operator_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/config"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/operator"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/testca"
)

func TestDefaultOptionsFromEnvironment(t *testing.T) {
	tests := []struct {
		name                      string
		env                       map[string]string
		wantNS, wantSec, wantConf string
	}{
		{name: "defaults", wantSec: config.DefaultSecretName, wantConf: config.DefaultConfigMapName},
		{
			name: "OLM target namespace and user-owned settings objects",
			env: map[string]string{
				operator.EnvWatchNamespace: "tenant-a", operator.EnvSecretName: "my-mailgun-credentials",
				operator.EnvConfigMapName: "my-mailgun-config",
			},
			wantNS: "tenant-a", wantSec: "my-mailgun-credentials", wantConf: "my-mailgun-config",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{operator.EnvWatchNamespace, operator.EnvSecretName, operator.EnvConfigMapName, operator.EnvMetricsCertPath} {
				t.Setenv(k, tt.env[k])
			}
			o := operator.DefaultOptions()
			if o.WatchNamespace != tt.wantNS || o.SecretName != tt.wantSec || o.ConfigMapName != tt.wantConf {
				t.Errorf("namespace/secret/configmap = %q/%q/%q, want %q/%q/%q",
					o.WatchNamespace, o.SecretName, o.ConfigMapName, tt.wantNS, tt.wantSec, tt.wantConf)
			}
			if err := o.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

// TestMetricsCertPathFromEnvironment: METRICS_CERT_PATH, which a
// Subscription's spec.config.env can set where OLM keeps the CSV's
// arguments, is the default of --metrics-cert-path; the flag still wins.
func TestMetricsCertPathFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	issued := testca.Issue(t, []string{"metrics.example"}, nil)
	for name, data := range map[string][]byte{"tls.crt": issued.CertPEM, "tls.key": issued.KeyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(operator.EnvMetricsCertPath, dir)
	o := operator.DefaultOptions()
	if o.MetricsCertPath != dir {
		t.Fatalf("--metrics-cert-path defaults to %q, want $%s %q", o.MetricsCertPath, operator.EnvMetricsCertPath, dir)
	}
	if err := o.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	o.BindFlags(fs)
	if err := fs.Parse([]string{"--metrics-cert-path=/etc/other-certs"}); err != nil {
		t.Fatal(err)
	}
	if o.MetricsCertPath != "/etc/other-certs" {
		t.Errorf("--metrics-cert-path = %q with the flag given, want the flag's", o.MetricsCertPath)
	}

	// A directory without the files is refused at start, naming the
	// variable that set it.
	t.Setenv(operator.EnvMetricsCertPath, t.TempDir())
	o = operator.DefaultOptions()
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "$"+operator.EnvMetricsCertPath) {
		t.Errorf("Validate with an empty certificate directory = %v, want an error naming $%s", err, operator.EnvMetricsCertPath)
	}
}

func TestValidateRejects(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*operator.Options)
		want   string
	}{
		{"several namespaces (OLM MultiNamespace)", func(o *operator.Options) { o.WatchNamespace = "a,b" }, "names several namespaces"},
		{"no workers", func(o *operator.Options) { o.Concurrency = 0 }, "--mailguncluster-concurrency"},
		{"zero timeout", func(o *operator.Options) { o.MailgunTimeout = 0 }, "must be positive"},
		{"negative request rate", func(o *operator.Options) { o.MailgunQPS = -1 }, "--mailgun-qps"},
		{"request rate without a burst", func(o *operator.Options) { o.MailgunBurst = 0 }, "--mailgun-burst"},
		{"metrics certificate directory without the files", func(o *operator.Options) { o.MetricsCertPath = "/nonexistent/certs" },
			"--metrics-cert-path (or $METRICS_CERT_PATH) /nonexistent/certs: the metrics serving certificate and key"},
		{"metrics certificate on plain HTTP", func(o *operator.Options) { o.MetricsCertPath, o.SecureMetrics = "/nonexistent/certs", false },
			"--metrics-secure=false"},
		{"settle time within the send timeout", func(o *operator.Options) {
			o.MailgunTimeout, o.SettleTime = 30*time.Second, 30*time.Second
		}, "--send-settle-time (30s) must be longer than"},
		{"settle time within the send timeout and the lease's write deadline", func(o *operator.Options) {
			o.LeaderElect, o.MailgunTimeout, o.RenewDeadline, o.SettleTime = true, 30*time.Second, 10*time.Second, 39*time.Second
		}, "must be longer than a send can be in flight after its claim, 40s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := operator.DefaultOptions()
			tt.mutate(&o)
			if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
