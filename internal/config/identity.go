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

package config

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/mailgun/mailgun-go/v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
)

// Unusable is a settings problem only the user can fix: nothing is sent
// until the objects it names change. It is not an error of the operator.
// Reason is the EmailSent condition reason; Message names the field to fix
// and never holds a secret.
type Unusable struct {
	Reason  string
	Message string
}

// Settings resolves the Mailgun settings a MailgunCluster sends with:
// those of the MailgunClusterIdentity it names, or the operator-wide ones.
type Settings struct {
	// Operator gives the operator-wide settings; its Namespace holds the
	// identities' Secrets too.
	Operator Source
	// Reader reads identities and namespaces; the identities' Secrets are
	// read like the operator-wide one, through Operator.
	Reader client.Reader
}

// For returns the settings a MailgunCluster in namespace, naming ref
// (nil: none), sends with, or what the user has to fix first. The error
// says that an object could not be read.
func (s Settings) For(ctx context.Context, namespace string, ref *infrav1.MailgunClusterIdentityReference) (mailer.Settings, *Unusable, error) {
	none := mailer.Settings{}
	if ref == nil {
		operator, err := s.Operator.Load(ctx)
		if err != nil {
			return none, nil, err
		}
		if u := notConfigured(s.Operator.Check(operator)); u != nil {
			return none, u, nil
		}
		return operator, nil, nil
	}

	id := &infrav1.MailgunClusterIdentity{}
	if err := s.Reader.Get(ctx, types.NamespacedName{Name: ref.Name}, id); err != nil {
		if apierrors.IsNotFound(err) {
			return none, &Unusable{Reason: infrav1.IdentityNotFoundReason, Message: fmt.Sprintf(
				"MailgunClusterIdentity %q (spec.identityRef.name) does not exist: create it or fix spec.identityRef.name", ref.Name)}, nil
		}
		return none, nil, fmt.Errorf("reading MailgunClusterIdentity %s: %w", ref.Name, err)
	}
	if u, err := s.allowed(ctx, id, namespace); u != nil || err != nil {
		return none, u, err
	}

	secretName := id.Spec.SecretRef.Name
	if secretName == s.Operator.SecretName {
		// Whoever may write identities could otherwise send the
		// operator-wide key to a host of their choosing.
		return none, &Unusable{Reason: infrav1.IdentityNotAllowedReason, Message: fmt.Sprintf(
			"spec.secretRef.name of MailgunClusterIdentity %s names the operator-wide Secret %s: an identity needs a Secret of its own, "+
				"with the API key under key %q (and the API base under key %q)", id.Name, secretName, SecretAPIKeyKey, SecretAPIBaseKey)}, nil
	}
	if s.Operator.Namespace == "" {
		return none, &Unusable{Reason: infrav1.IdentitySecretNotFoundReason, Message: fmt.Sprintf(
			"the operator runs without a namespace for Secrets (--config-namespace is empty), so the Secret %s of MailgunClusterIdentity %s cannot be read",
			secretName, id.Name)}, nil
	}
	secret := &corev1.Secret{}
	err := s.Operator.getSecret(ctx, secretName, secret)
	switch {
	case apierrors.IsNotFound(err):
		return none, &Unusable{Reason: infrav1.IdentitySecretNotFoundReason, Message: fmt.Sprintf(
			"Secret %s/%s, named by spec.secretRef.name of MailgunClusterIdentity %s, does not exist: create it with the API key under key %q",
			s.Operator.Namespace, secretName, id.Name, SecretAPIKeyKey)}, nil
	case err != nil:
		return none, nil, fmt.Errorf("reading Secret %s/%s of MailgunClusterIdentity %s: %w", s.Operator.Namespace, secretName, id.Name, err)
	}
	key := strings.TrimSpace(string(secret.Data[SecretAPIKeyKey]))
	if key == "" {
		return none, &Unusable{Reason: infrav1.IdentitySecretNotFoundReason, Message: fmt.Sprintf(
			"Secret %s/%s, named by spec.secretRef.name of MailgunClusterIdentity %s, has no key %q: put the API key there",
			s.Operator.Namespace, secretName, id.Name, SecretAPIKeyKey)}, nil
	}

	// The API base comes from the Secret, next to the key: the key goes
	// only where whoever wrote the Secret sent it. spec.apiBase, where
	// earlier versions read it, may only repeat it.
	apiBase := strings.TrimRight(strings.TrimSpace(string(secret.Data[SecretAPIBaseKey])), "/")
	if apiBase == "" {
		apiBase = mailgun.APIBaseUS
	}
	if spec := strings.TrimRight(strings.TrimSpace(id.Spec.APIBase), "/"); spec != "" && spec != apiBase {
		return none, &Unusable{Reason: infrav1.IdentityNotAllowedReason, Message: fmt.Sprintf(
			"spec.apiBase of MailgunClusterIdentity %s is %q, but key %q of its Secret %s/%s gives %q (the US API base when the key is absent): "+
				"the API key is only sent to the API base in its Secret; put the API base there and remove spec.apiBase",
			id.Name, spec, SecretAPIBaseKey, s.Operator.Namespace, secretName, apiBase)}, nil
	}
	settings := mailer.Settings{
		Domain:    strings.TrimSpace(id.Spec.Domain),
		APIKey:    key,
		Recipient: strings.TrimSpace(id.Spec.Recipient),
		APIBase:   apiBase,
		Sender:    strings.TrimSpace(id.Spec.Sender),
	}
	recipientAt := fmt.Sprintf("spec.recipient of MailgunClusterIdentity %s", id.Name)
	if settings.Recipient == "" {
		// Only then are the operator-wide settings read.
		operator, err := s.Operator.Load(ctx)
		if err != nil {
			return none, nil, err
		}
		settings.Recipient = operator.Recipient
		recipientAt += " (or the operator-wide recipient)"
	}
	at := func(field string) string { return fmt.Sprintf("%s of MailgunClusterIdentity %s", field, id.Name) }
	if u := notConfigured(check(settings, fields{
		domain:    at("spec.domain"),
		apiKey:    fmt.Sprintf("key %q of Secret %s/%s", SecretAPIKeyKey, s.Operator.Namespace, secretName),
		recipient: recipientAt,
		apiBase:   fmt.Sprintf("key %q of Secret %s/%s", SecretAPIBaseKey, s.Operator.Namespace, secretName),
		sender:    at("spec.sender"),
	})); u != nil {
		return none, u, nil
	}
	return settings, nil, nil
}

// notConfigured turns the problems Check or check found into an Unusable,
// nil if there are none.
func notConfigured(problems error) *Unusable {
	if problems == nil {
		return nil
	}
	return &Unusable{Reason: infrav1.MailgunNotConfiguredReason, Message: problems.Error()}
}

// allowed says why id's spec.allowedNamespaces does not allow namespace,
// nil if it does.
func (s Settings) allowed(ctx context.Context, id *infrav1.MailgunClusterIdentity, namespace string) (*Unusable, error) {
	refuse := func(why string) *Unusable {
		return &Unusable{Reason: infrav1.IdentityNotAllowedReason, Message: fmt.Sprintf(
			"MailgunClusterIdentity %s does not allow namespace %q: %s", id.Name, namespace, why)}
	}
	allowed := id.Spec.AllowedNamespaces
	switch {
	case allowed == nil:
		return refuse("its spec.allowedNamespaces is not set, which allows no namespace"), nil
	case allowed.List == nil && allowed.Selector == nil:
		return nil, nil // {} allows every namespace.
	case slices.Contains(allowed.List, namespace):
		return nil, nil
	case allowed.Selector == nil:
		return refuse("it is not in spec.allowedNamespaces.list"), nil
	case len(allowed.Selector.MatchLabels) == 0 && len(allowed.Selector.MatchExpressions) == 0:
		// As in CAPA: only allowedNamespaces {} allows every namespace;
		// an empty selector next to a list must not widen it to all.
		return refuse("it is not in spec.allowedNamespaces.list, and an empty spec.allowedNamespaces.selector matches no namespace (allowedNamespaces: {} allows all)"), nil
	}
	selector, err := metav1.LabelSelectorAsSelector(allowed.Selector)
	if err != nil {
		return refuse(fmt.Sprintf("spec.allowedNamespaces.selector is invalid: %v", err)), nil
	}
	ns := &corev1.Namespace{}
	if err := s.Reader.Get(ctx, types.NamespacedName{Name: namespace}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return refuse("the namespace does not exist"), nil
		}
		return nil, fmt.Errorf("reading namespace %s: %w", namespace, err)
	}
	if !selector.Matches(labels.Set(ns.Labels)) {
		return refuse("it is not in spec.allowedNamespaces.list and its labels do not match spec.allowedNamespaces.selector"), nil
	}
	return nil, nil
}
