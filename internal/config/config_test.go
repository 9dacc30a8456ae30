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

package config_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/config"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
)

const ns = "capmg-system"

func secret(key string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: config.DefaultSecretName},
		Data:       map[string][]byte{config.SecretAPIKeyKey: []byte(key)},
	}
}

func configMap(data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: config.DefaultConfigMapName}, Data: data}
}

func source(env map[string]string, objs ...client.Object) config.Source {
	return config.Source{
		Reader:        fake.NewClientBuilder().WithObjects(objs...).Build(),
		Namespace:     ns,
		SecretName:    config.DefaultSecretName,
		ConfigMapName: config.DefaultConfigMapName,
		Getenv:        func(k string) string { return env[k] },
	}
}

func TestLoad(t *testing.T) {
	fullEnv := map[string]string{
		config.EnvDomain: "env.example.com", config.EnvAPIKey: "env-key",
		config.EnvRecipient: "env@example.com", config.EnvAPIBase: "https://api.eu.mailgun.net/v3",
	}
	tests := []struct {
		name string
		env  map[string]string
		objs []client.Object
		want mailer.Settings
	}{
		{
			name: "environment only, default API base",
			env:  map[string]string{config.EnvDomain: "mg.example.com", config.EnvAPIKey: "k", config.EnvRecipient: "a@example.com"},
			want: mailer.Settings{Domain: "mg.example.com", APIKey: "k", Recipient: "a@example.com", APIBase: "https://api.mailgun.net/v3"},
		},
		{
			name: "objects win over environment",
			env:  fullEnv,
			objs: []client.Object{secret("obj-key"), configMap(map[string]string{
				config.ConfigMapDomainKey: "obj.example.com", config.ConfigMapRecipientKey: "obj@example.com",
				config.ConfigMapAPIBaseKey: "https://api.mailgun.net/v3/",
			})},
			want: mailer.Settings{Domain: "obj.example.com", APIKey: "obj-key", Recipient: "obj@example.com", APIBase: "https://api.mailgun.net/v3"},
		},
		{
			name: "empty placeholders do not hide the environment",
			env:  fullEnv,
			objs: []client.Object{secret(""), configMap(map[string]string{config.ConfigMapDomainKey: " "})},
			want: mailer.Settings{Domain: "env.example.com", APIKey: "env-key", Recipient: "env@example.com", APIBase: "https://api.eu.mailgun.net/v3"},
		},
		{
			name: "whitespace around values is trimmed",
			objs: []client.Object{secret("key-abc\n"), configMap(map[string]string{config.ConfigMapDomainKey: " mg.example.com\n"})},
			want: mailer.Settings{Domain: "mg.example.com", APIKey: "key-abc", APIBase: "https://api.mailgun.net/v3"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := source(tt.env, tt.objs...).Load(context.Background())
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if got != tt.want {
				t.Errorf("Load = %v (key %q), want %v (key %q)", got, got.APIKey, tt.want, tt.want.APIKey)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	valid := mailer.Settings{Domain: "mg.example.com", APIKey: "key-abc", Recipient: "ops@example.com", APIBase: "https://api.mailgun.net/v3"}
	tests := []struct {
		name   string
		mutate func(*mailer.Settings)
		want   []string // substrings of the error; none means valid
	}{
		{name: "valid"},
		{name: "loopback http is fine for a local stand-in", mutate: func(s *mailer.Settings) { s.APIBase = "http://127.0.0.1:8080/v3" }},
		{name: "everything missing", mutate: func(s *mailer.Settings) { *s = mailer.Settings{APIBase: s.APIBase} }, want: []string{
			`Mailgun domain is not set: set key "mailgun_domain" of ConfigMap capmg-system/capmg-mailgun-config (or environment variable MAILGUN_DOMAIN)`,
			`Mailgun API key is not set: set key "api_key" of Secret capmg-system/capmg-mailgun-credentials (or environment variable MAILGUN_API_KEY)`,
			`recipient address is not set`,
		}},
		{name: "bad domain", mutate: func(s *mailer.Settings) { s.Domain = "not a domain" }, want: []string{"not a valid domain name"}},
		{name: "key with inner whitespace", mutate: func(s *mailer.Settings) { s.APIKey = "key abc" }, want: []string{"API key contains whitespace"}},
		{name: "bad recipient", mutate: func(s *mailer.Settings) { s.Recipient = "ops" }, want: []string{`recipient "ops" is not a valid email address`}},
		{name: "header injection in recipient", mutate: func(s *mailer.Settings) { s.Recipient = "ops@example.com\r\nBcc: x@evil.test" }, want: []string{"control characters"}},
		{name: "plain http to a remote host", mutate: func(s *mailer.Settings) { s.APIBase = "http://api.mailgun.net/v3" }, want: []string{"only allowed for loopback"}},
		{name: "not a URL", mutate: func(s *mailer.Settings) { s.APIBase = "api.mailgun.net" }, want: []string{"no host"}},
		{name: "no API version in the path", mutate: func(s *mailer.Settings) { s.APIBase = "https://api.eu.mailgun.net" }, want: []string{
			`Mailgun API base "https://api.eu.mailgun.net" is not usable`, "does not end in the API version"}},
		{name: "another path", mutate: func(s *mailer.Settings) { s.APIBase = "https://proxy.example.com/mailgun" }, want: []string{"does not end in the API version"}},
		{name: "a version path behind a proxy prefix is fine", mutate: func(s *mailer.Settings) { s.APIBase = "https://proxy.example.com/mailgun/v3" }},
	}
	src := source(nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := valid
			if tt.mutate != nil {
				tt.mutate(&s)
			}
			err := src.Check(s)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Check = nil, want errors %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Check = %q, want it to contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "key-abc") || (s.APIKey != "" && strings.Contains(err.Error(), s.APIKey)) {
				t.Errorf("Check error %q reveals the API key", err)
			}
		})
	}
}
