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

// Package config loads the operator's Mailgun settings. They come from
// environment variables (compatible with the original tutorial provider)
// overlaid by a Secret and a ConfigMap in the operator's namespace, which are
// watched so that a change applies without a restart.
package config

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/mailgun/mailgun-go/v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
)

// Environment variables.
const (
	EnvDomain    = "MAILGUN_DOMAIN"
	EnvAPIKey    = "MAILGUN_API_KEY" //nolint:gosec // G101: the name of the environment variable, not a key
	EnvRecipient = "MAIL_RECIPIENT"
	EnvAPIBase   = "MAILGUN_API_BASE"
)

// Keys of the Secret and the ConfigMap.
const (
	SecretAPIKeyKey = "api_key"
	// SecretAPIBaseKey holds a MailgunClusterIdentity's API base in its
	// Secret, next to the key it is for.
	SecretAPIBaseKey      = "api_base"
	ConfigMapDomainKey    = "mailgun_domain"
	ConfigMapRecipientKey = "mail_recipient"
	ConfigMapAPIBaseKey   = "mailgun_api_base"
)

// Default names of the Secret and ConfigMap. No installer ships them: the
// operator creates them if missing (UserObjects), so that they are the
// user's and survive upgrades.
const (
	DefaultSecretName    = "capmg-mailgun-credentials" //nolint:gosec // G101: the name of a Secret object, not a credential
	DefaultConfigMapName = "capmg-mailgun-config"
)

// Source reads the Mailgun settings. A value set in the Secret or ConfigMap
// wins over the environment, so the shipped (empty) placeholders never hide
// settings given as environment variables.
type Source struct {
	// Reader reads the ConfigMap, and the Secrets unless Secrets is set;
	// usually the manager's cache, restricted to Namespace.
	Reader client.Reader
	// Secrets, if set, reads the Secrets (the operator-wide one and the
	// MailgunClusterIdentities'); the operator uses a *SecretReader, so
	// that it holds no other Secret of its namespace.
	Secrets interface {
		GetSecret(ctx context.Context, key client.ObjectKey, secret *corev1.Secret) error
	}
	// Namespace holds the Secret and ConfigMap. Empty disables them.
	Namespace     string
	SecretName    string
	ConfigMapName string
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
}

// Load returns the settings, with surrounding whitespace trimmed (a key
// pasted with a trailing newline is a common mistake) and the US API base
// as the default. It fails only if the Secret or ConfigMap cannot be read;
// their absence is not an error. Use Check to see whether the result is
// usable.
func (s Source) Load(ctx context.Context) (mailer.Settings, error) {
	getenv := s.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	settings := mailer.Settings{
		Domain:    getenv(EnvDomain),
		APIKey:    getenv(EnvAPIKey),
		Recipient: getenv(EnvRecipient),
		APIBase:   getenv(EnvAPIBase),
	}
	if s.Namespace != "" && s.SecretName != "" {
		secret := &corev1.Secret{}
		if err := s.getSecret(ctx, s.SecretName, secret); err != nil && !apierrors.IsNotFound(err) {
			return mailer.Settings{}, fmt.Errorf("reading Secret %s/%s: %w", s.Namespace, s.SecretName, err)
		}
		overlay(&settings.APIKey, string(secret.Data[SecretAPIKeyKey]))
	}
	if s.Namespace != "" && s.ConfigMapName != "" {
		cm := &corev1.ConfigMap{}
		if err := s.get(ctx, s.ConfigMapName, cm); err != nil {
			return mailer.Settings{}, err
		}
		overlay(&settings.Domain, cm.Data[ConfigMapDomainKey])
		overlay(&settings.Recipient, cm.Data[ConfigMapRecipientKey])
		overlay(&settings.APIBase, cm.Data[ConfigMapAPIBaseKey])
	}
	settings.Domain = strings.TrimSpace(settings.Domain)
	settings.APIKey = strings.TrimSpace(settings.APIKey)
	settings.Recipient = strings.TrimSpace(settings.Recipient)
	settings.APIBase = strings.TrimRight(strings.TrimSpace(settings.APIBase), "/")
	if settings.APIBase == "" {
		settings.APIBase = mailgun.APIBaseUS
	}
	return settings, nil
}

func (s Source) get(ctx context.Context, name string, obj client.Object) error {
	err := s.Reader.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: name}, obj)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading %T %s/%s: %w", obj, s.Namespace, name, err)
	}
	return nil
}

// getSecret reads the Secret name of Namespace.
func (s Source) getSecret(ctx context.Context, name string, secret *corev1.Secret) error {
	key := types.NamespacedName{Namespace: s.Namespace, Name: name}
	if s.Secrets != nil {
		return s.Secrets.GetSecret(ctx, key, secret)
	}
	return s.Reader.Get(ctx, key, secret)
}

func overlay(dst *string, value string) {
	if strings.TrimSpace(value) != "" {
		*dst = value
	}
}

// Check reports every problem with settings, each naming where to fix it.
// It returns nil if the settings can be used.
func (s Source) Check(settings mailer.Settings) error {
	where := func(env, kind, name, key string) string {
		if s.Namespace == "" || name == "" {
			return fmt.Sprintf("environment variable %s", env)
		}
		return fmt.Sprintf("key %q of %s %s/%s (or environment variable %s)", key, kind, s.Namespace, name, env)
	}
	return check(settings, fields{
		domain:    where(EnvDomain, "ConfigMap", s.ConfigMapName, ConfigMapDomainKey),
		apiKey:    where(EnvAPIKey, "Secret", s.SecretName, SecretAPIKeyKey),
		recipient: where(EnvRecipient, "ConfigMap", s.ConfigMapName, ConfigMapRecipientKey),
		apiBase:   where(EnvAPIBase, "ConfigMap", s.ConfigMapName, ConfigMapAPIBaseKey),
	})
}

// fields says, for each setting, where the user sets it.
type fields struct {
	domain, apiKey, recipient, apiBase, sender string
}

// check reports every problem with settings, each naming the field at
// which to fix it, or nil if they can be used.
func check(settings mailer.Settings, at fields) error {
	var problems []error
	switch {
	case settings.Domain == "":
		problems = append(problems, fmt.Errorf("Mailgun domain is not set: set %s", at.domain))
	case !domainPattern.MatchString(settings.Domain):
		problems = append(problems, fmt.Errorf("Mailgun domain %q is not a valid domain name: fix %s", settings.Domain, at.domain))
	}
	switch {
	case settings.APIKey == "":
		problems = append(problems, fmt.Errorf("Mailgun API key is not set: set %s", at.apiKey))
	case strings.ContainsFunc(settings.APIKey, isSpaceOrControl):
		// Never echo the key itself.
		problems = append(problems, fmt.Errorf("Mailgun API key contains whitespace or control characters: fix %s", at.apiKey))
	}
	if settings.Recipient == "" {
		problems = append(problems, fmt.Errorf("recipient address is not set: set %s", at.recipient))
	} else if err := checkAddress(settings.Recipient); err != nil {
		problems = append(problems, fmt.Errorf("recipient %q is not a valid email address (%w): fix %s", settings.Recipient, err, at.recipient))
	}
	if err := checkAPIBase(settings.APIBase); err != nil {
		problems = append(problems, fmt.Errorf("Mailgun API base %q is not usable (%w): fix %s", settings.APIBase, err, at.apiBase))
	}
	if settings.Sender != "" {
		if err := checkAddress(settings.Sender); err != nil {
			problems = append(problems, fmt.Errorf("sender %q is not a valid email address (%w): fix %s", settings.Sender, err, at.sender))
		}
	}
	return errors.Join(problems...)
}

var domainPattern = regexp.MustCompile(`^([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)

func isSpaceOrControl(r rune) bool {
	return r <= ' ' || r == 0x7f
}

func checkAddress(addr string) error {
	if strings.ContainsFunc(addr, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return errors.New("contains control characters")
	}
	_, err := mail.ParseAddress(addr)
	return err
}

// apiVersionPath is the path an API base ends in: mailgun-go appends the
// endpoints to it, and without it every call fails as if Mailgun had not
// answered.
var apiVersionPath = regexp.MustCompile(`/v[0-9]+$`)

// checkAPIBase accepts https URLs, and plain http only for loopback hosts
// (a local Mailgun stand-in): the API key travels in every request. The
// path must end in the API version.
func checkAPIBase(base string) error {
	u, err := url.Parse(base)
	if err != nil {
		return err
	}
	if u.Host == "" {
		return errors.New("no host")
	}
	if !apiVersionPath.MatchString(u.Path) {
		return fmt.Errorf("the path %q does not end in the API version, e.g. https://api.mailgun.net/v3", u.Path)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
			return nil
		}
		return errors.New("plain http is only allowed for loopback addresses; use https")
	default:
		return fmt.Errorf("scheme %q is not http(s)", u.Scheme)
	}
}
