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
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/config"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
)

const teamKey = "team-secret-key"

func identity(mutate func(*infrav1.MailgunClusterIdentitySpec)) *infrav1.MailgunClusterIdentity {
	id := &infrav1.MailgunClusterIdentity{
		ObjectMeta: metav1.ObjectMeta{Name: "payments"},
		Spec: infrav1.MailgunClusterIdentitySpec{
			SecretRef:         infrav1.SecretReference{Name: "payments-key"},
			Domain:            "mg.payments.example.com",
			AllowedNamespaces: &infrav1.AllowedNamespaces{List: []string{"payments"}},
		},
	}
	if mutate != nil {
		mutate(&id.Spec)
	}
	return id
}

func teamSecret(data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "payments-key"}, Data: data}
}

func namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// TestSettingsFor: a MailgunCluster sends with its identity's settings only
// if the identity exists, allows its namespace and has its key; otherwise
// the reason names what to fix, and never the key.
func TestSettingsFor(t *testing.T) {
	operatorWide := []client.Object{
		secret("operator-key"),
		configMap(map[string]string{config.ConfigMapDomainKey: "mg.example.com", config.ConfigMapRecipientKey: "infra@example.com"}),
	}
	withKey := teamSecret(map[string][]byte{config.SecretAPIKeyKey: []byte(teamKey + "\n")})
	withEUBase := teamSecret(map[string][]byte{config.SecretAPIKeyKey: []byte(teamKey), config.SecretAPIBaseKey: []byte("https://api.eu.mailgun.net/v3\n")})
	ref := &infrav1.MailgunClusterIdentityReference{Name: "payments"}
	tests := []struct {
		name      string
		namespace string
		ref       *infrav1.MailgunClusterIdentityReference
		objs      []client.Object
		// noNamespace runs the operator with settings from the
		// environment only.
		noNamespace bool
		want        mailer.Settings
		// wantReason is the Unusable reason; the message must contain
		// every wantIn.
		wantReason string
		wantIn     []string
	}{
		{
			name: "no identityRef: the operator-wide settings", namespace: "payments", objs: operatorWide,
			want: mailer.Settings{Domain: "mg.example.com", APIKey: "operator-key", Recipient: "infra@example.com", APIBase: "https://api.mailgun.net/v3"},
		},
		{
			name: "no identityRef, operator-wide settings incomplete", namespace: "payments",
			objs:       []client.Object{secret("operator-key")},
			wantReason: infrav1.MailgunNotConfiguredReason, wantIn: []string{"Mailgun domain is not set"},
		},
		{
			name: "identity in the list: its account, API base, domain and sender, the operator-wide recipient", namespace: "payments", ref: ref,
			objs: append([]client.Object{withEUBase, identity(func(s *infrav1.MailgunClusterIdentitySpec) {
				s.Sender = "Payments <clusters@mg.payments.example.com>"
			})}, operatorWide...),
			want: mailer.Settings{
				Domain: "mg.payments.example.com", APIKey: teamKey, Recipient: "infra@example.com",
				APIBase: "https://api.eu.mailgun.net/v3", Sender: "Payments <clusters@mg.payments.example.com>",
			},
		},
		{
			name: "an identity naming the operator-wide Secret is refused", namespace: "payments", ref: ref,
			objs: append([]client.Object{identity(func(s *infrav1.MailgunClusterIdentitySpec) {
				s.SecretRef.Name = config.DefaultSecretName
			})}, operatorWide...),
			wantReason: infrav1.IdentityNotAllowedReason, wantIn: []string{"spec.secretRef.name", "names the operator-wide Secret " + config.DefaultSecretName},
		},
		{
			name: "spec.apiBase other than the Secret's is refused: the key goes only where its Secret says", namespace: "payments", ref: ref,
			objs: append([]client.Object{withKey, identity(func(s *infrav1.MailgunClusterIdentitySpec) {
				s.APIBase = "https://collector.example.net/v3"
			})}, operatorWide...),
			wantReason: infrav1.IdentityNotAllowedReason, wantIn: []string{`spec.apiBase of MailgunClusterIdentity payments is "https://collector.example.net/v3"`, `key "api_base"`},
		},
		{
			name: "spec.apiBase repeating the Secret's is fine", namespace: "payments", ref: ref,
			objs: append([]client.Object{withEUBase, identity(func(s *infrav1.MailgunClusterIdentitySpec) {
				s.APIBase = "https://api.eu.mailgun.net/v3/"
				s.Sender = "Payments <clusters@mg.payments.example.com>"
			})}, operatorWide...),
			want: mailer.Settings{
				Domain: "mg.payments.example.com", APIKey: teamKey, Recipient: "infra@example.com",
				APIBase: "https://api.eu.mailgun.net/v3", Sender: "Payments <clusters@mg.payments.example.com>",
			},
		},
		{
			name: "identity with its own recipient, no operator-wide settings", namespace: "payments", ref: ref,
			objs: []client.Object{withKey, identity(func(s *infrav1.MailgunClusterIdentitySpec) { s.Recipient = "payments-infra@example.com" })},
			want: mailer.Settings{Domain: "mg.payments.example.com", APIKey: teamKey, Recipient: "payments-infra@example.com", APIBase: "https://api.mailgun.net/v3"},
		},
		{
			name: "no recipient anywhere", namespace: "payments", ref: ref,
			objs:       []client.Object{withKey, identity(nil)},
			wantReason: infrav1.MailgunNotConfiguredReason, wantIn: []string{"recipient address is not set", "spec.recipient of MailgunClusterIdentity payments"},
		},
		{
			name: "identity missing", namespace: "payments", ref: ref, objs: operatorWide,
			wantReason: infrav1.IdentityNotFoundReason, wantIn: []string{`MailgunClusterIdentity "payments"`, "spec.identityRef.name"},
		},
		{
			name: "namespace not in the list", namespace: "checkout", ref: ref,
			objs:       append([]client.Object{withKey, identity(nil)}, operatorWide...),
			wantReason: infrav1.IdentityNotAllowedReason, wantIn: []string{`does not allow namespace "checkout"`, "spec.allowedNamespaces.list"},
		},
		{
			name: "allowedNamespaces omitted allows no namespace", namespace: "payments", ref: ref,
			objs:       append([]client.Object{withKey, identity(func(s *infrav1.MailgunClusterIdentitySpec) { s.AllowedNamespaces = nil })}, operatorWide...),
			wantReason: infrav1.IdentityNotAllowedReason, wantIn: []string{"spec.allowedNamespaces is not set"},
		},
		{
			name: "allowedNamespaces {} allows every namespace", namespace: "checkout", ref: ref,
			objs: append([]client.Object{withKey, identity(func(s *infrav1.MailgunClusterIdentitySpec) {
				s.AllowedNamespaces = &infrav1.AllowedNamespaces{}
			})}, operatorWide...),
			want: mailer.Settings{Domain: "mg.payments.example.com", APIKey: teamKey, Recipient: "infra@example.com", APIBase: "https://api.mailgun.net/v3"},
		},
		{
			name: "an empty selector next to a list matches no namespace", namespace: "checkout", ref: ref,
			objs: append([]client.Object{withKey, namespace("checkout", nil), identity(func(s *infrav1.MailgunClusterIdentitySpec) {
				s.AllowedNamespaces.Selector = &metav1.LabelSelector{}
			})}, operatorWide...),
			wantReason: infrav1.IdentityNotAllowedReason, wantIn: []string{"an empty spec.allowedNamespaces.selector matches no namespace"},
		},
		{
			name: "namespace labels match the selector", namespace: "checkout", ref: ref,
			objs: append([]client.Object{withKey, namespace("checkout", map[string]string{"team": "payments"}), identity(func(s *infrav1.MailgunClusterIdentitySpec) {
				s.AllowedNamespaces.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "payments"}}
			})}, operatorWide...),
			want: mailer.Settings{Domain: "mg.payments.example.com", APIKey: teamKey, Recipient: "infra@example.com", APIBase: "https://api.mailgun.net/v3"},
		},
		{
			name: "namespace labels do not match the selector", namespace: "checkout", ref: ref,
			objs: append([]client.Object{withKey, namespace("checkout", map[string]string{"team": "checkout"}), identity(func(s *infrav1.MailgunClusterIdentitySpec) {
				s.AllowedNamespaces.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "payments"}}
			})}, operatorWide...),
			wantReason: infrav1.IdentityNotAllowedReason, wantIn: []string{"do not match spec.allowedNamespaces.selector"},
		},
		{
			name: "Secret missing", namespace: "payments", ref: ref,
			objs:       append([]client.Object{identity(nil)}, operatorWide...),
			wantReason: infrav1.IdentitySecretNotFoundReason, wantIn: []string{"Secret " + ns + "/payments-key", "spec.secretRef.name", "does not exist"},
		},
		{
			name: "operator without a namespace for Secrets", namespace: "payments", ref: ref, noNamespace: true,
			objs:       append([]client.Object{withKey, identity(nil)}, operatorWide...),
			wantReason: infrav1.IdentitySecretNotFoundReason, wantIn: []string{"--config-namespace is empty"},
		},
		{
			name: "Secret without api_key", namespace: "payments", ref: ref,
			objs:       append([]client.Object{teamSecret(map[string][]byte{"apiKey": []byte(teamKey)}), identity(nil)}, operatorWide...),
			wantReason: infrav1.IdentitySecretNotFoundReason, wantIn: []string{`has no key "api_key"`},
		},
		{
			name: "key with inner whitespace", namespace: "payments", ref: ref,
			objs:       append([]client.Object{teamSecret(map[string][]byte{config.SecretAPIKeyKey: []byte("team secret")}), identity(nil)}, operatorWide...),
			wantReason: infrav1.MailgunNotConfiguredReason, wantIn: []string{"contains whitespace", `key "api_key" of Secret ` + ns + "/payments-key"},
		},
		{
			name: "invalid sender", namespace: "payments", ref: ref,
			objs:       append([]client.Object{withKey, identity(func(s *infrav1.MailgunClusterIdentitySpec) { s.Sender = "clusters at example" })}, operatorWide...),
			wantReason: infrav1.MailgunNotConfiguredReason, wantIn: []string{`sender "clusters at example"`, "spec.sender of MailgunClusterIdentity payments"},
		},
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := infrav1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tt.objs...).Build()
			s := config.Settings{
				Operator: config.Source{Reader: reader, Namespace: ns, SecretName: config.DefaultSecretName, ConfigMapName: config.DefaultConfigMapName,
					Getenv: func(string) string { return "" }},
				Reader: reader,
			}
			if tt.noNamespace {
				s.Operator.Namespace = ""
			}
			got, u, err := s.For(context.Background(), tt.namespace, tt.ref)
			if err != nil {
				t.Fatalf("For: %v", err)
			}
			if tt.wantReason == "" {
				if u != nil {
					t.Fatalf("For: %s: %s", u.Reason, u.Message)
				}
				if got != tt.want { // the key included, which %s hides
					t.Fatalf("For = %s, want %s (or another API key)", got, tt.want)
				}
				return
			}
			if u == nil {
				t.Fatalf("For = %s; want an Unusable %s", got, tt.wantReason)
			}
			if u.Reason != tt.wantReason {
				t.Errorf("reason %s, want %s (%s)", u.Reason, tt.wantReason, u.Message)
			}
			for _, w := range tt.wantIn {
				if !strings.Contains(u.Message, w) {
					t.Errorf("message %q does not contain %q", u.Message, w)
				}
			}
			if strings.Contains(u.Message, "team secret") || strings.Contains(u.Message, teamKey) || strings.Contains(u.Message, "operator-key") {
				t.Errorf("message %q reveals an API key", u.Message)
			}
		})
	}
}
