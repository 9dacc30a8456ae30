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

package controllers_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/config"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/mailgunfake"
)

const (
	teamDomain = "mg.payments.example.com"
	teamAPIKey = "key-team-7d41c0b9e2a85f36-do-not-log" //nolint:gosec // G101: a made-up key for a second Mailgun fake
	teamSender = "Payments cluster requests <clusters@mg.payments.example.com>"
)

// newIdentity returns a MailgunClusterIdentity for the team's Mailgun
// account (fake), named after the test's namespace: identities are
// cluster-scoped, tests share the control plane.
func newIdentity(h *harness, fake *mailgunfake.Server, allowed *infrav1.AllowedNamespaces) *infrav1.MailgunClusterIdentity {
	return &infrav1.MailgunClusterIdentity{
		ObjectMeta: metav1.ObjectMeta{Name: "payments-" + h.ns},
		Spec: infrav1.MailgunClusterIdentitySpec{
			SecretRef:         infrav1.SecretReference{Name: "payments-mailgun"},
			Domain:            fake.Domain,
			Sender:            teamSender,
			AllowedNamespaces: allowed,
		},
	}
}

func (h *harness) createIdentity(id *infrav1.MailgunClusterIdentity) {
	h.t.Helper()
	if err := h.c.Create(h.ctx, id); err != nil {
		h.t.Fatalf("creating MailgunClusterIdentity: %v", err)
	}
	h.t.Cleanup(func() { _ = env.Client.Delete(h.ctx, id) })
}

// createTeamSecret creates the identity's Secret: the key, and the API
// base it may be sent to.
func (h *harness) createTeamSecret(key, apiBase string) *corev1.Secret {
	h.t.Helper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "payments-mailgun"},
		StringData: map[string]string{config.SecretAPIKeyKey: key, config.SecretAPIBaseKey: apiBase},
	}
	if err := h.c.Create(h.ctx, s); err != nil {
		h.t.Fatalf("creating the identity's Secret: %v", err)
	}
	return s
}

func usesIdentity(name string) func(*infrav1.MailgunCluster) {
	return func(mc *infrav1.MailgunCluster) {
		mc.Spec.IdentityRef = &infrav1.MailgunClusterIdentityReference{Name: name}
	}
}

// TestIdentityIsRequiredAllowedAndComplete walks one MailgunCluster through
// a missing identity, one that refuses its namespace, a namespace label that
// lets it in, a missing Secret and the Secret's arrival: nothing is sent
// until all is well, each step is reported with its reason, each fix is
// picked up by a watch, and the one email goes through the identity's
// account, domain and sender. Changing the identity afterwards sends
// nothing more.
func TestIdentityIsRequiredAllowedAndComplete(t *testing.T) {
	h := newHarness(t)
	team := mailgunfake.Start(teamDomain, teamAPIKey)
	t.Cleanup(team.Close)
	h.startManager()
	id := newIdentity(h, team, &infrav1.AllowedNamespaces{List: []string{"someone-else"}})
	h.createOwned("team", usesIdentity(id.Name))

	nothingSent := func(what string) {
		t.Helper()
		if a, b := len(h.fake.Messages()), len(team.Messages()); a+b != 0 {
			t.Fatalf("%s: %d emails sent through the operator-wide account and %d through the identity's", what, a, b)
		}
	}
	mc := h.waitForReason("team", infrav1.IdentityNotFoundReason, 20*time.Second)
	if msg := conditions.GetMessage(mc, infrav1.EmailSentCondition); !strings.Contains(msg, "spec.identityRef.name") {
		t.Errorf("IdentityNotFound message %q does not name spec.identityRef.name", msg)
	}
	nothingSent("identity missing")

	h.createIdentity(id)
	mc = h.waitForReason("team", infrav1.IdentityNotAllowedReason, 20*time.Second)
	if msg := conditions.GetMessage(mc, infrav1.EmailSentCondition); !strings.Contains(msg, fmt.Sprintf("does not allow namespace %q", h.ns)) {
		t.Errorf("IdentityNotAllowed message %q does not name the namespace", msg)
	}
	nothingSent("namespace not allowed")

	patchObj(h, id, func() {
		id.Spec.AllowedNamespaces.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "payments"}}
	})
	h.consistently(time.Second, "still refused: the namespace lacks the label", func() (bool, string) {
		reason := conditions.GetReason(h.get("team"), infrav1.EmailSentCondition)
		return reason == infrav1.IdentityNotAllowedReason, reason
	})
	ns := &corev1.Namespace{}
	if err := h.c.Get(h.ctx, client.ObjectKey{Name: h.ns}, ns); err != nil {
		t.Fatalf("getting namespace: %v", err)
	}
	patchObj(h, ns, func() { ns.Labels["team"] = "payments" })
	mc = h.waitForReason("team", infrav1.IdentitySecretNotFoundReason, 20*time.Second)
	if msg := conditions.GetMessage(mc, infrav1.EmailSentCondition); !strings.Contains(msg, h.ns+"/payments-mailgun") {
		t.Errorf("IdentitySecretNotFound message %q does not name the Secret", msg)
	}
	nothingSent("Secret missing")

	h.createTeamSecret(teamAPIKey, team.APIBase())
	mc = h.waitForAccepted("team", 20*time.Second)
	emails := team.Messages()
	if len(emails) != 1 || len(h.fake.Messages()) != 0 {
		t.Fatalf("%d emails through the identity's account and %d through the operator-wide one, want 1 and 0", len(emails), len(h.fake.Messages()))
	}
	if e := emails[0]; e.Domain != teamDomain || e.From != teamSender || e.ID != mc.Status.MessageID {
		t.Errorf("email domain %q from %q id %q; want %q from %q id %q", e.Domain, e.From, e.ID, teamDomain, teamSender, mc.Status.MessageID)
	}

	patchObj(h, id, func() { id.Spec.Sender = "Someone else <other@mg.payments.example.com>" })
	h.consistently(2*time.Second, "no second email after the identity changed", func() (bool, string) {
		n := len(team.Messages()) + len(h.fake.Messages())
		return n == 1, fmt.Sprintf("%d emails", n)
	})
	if strings.Contains(h.logs.String(), teamAPIKey) {
		t.Error("the manager logged the identity's API key")
	}
	h.noErrorLogged()
}

// TestKeysGoOnlyWhereTheirSecretSays: whoever may write identities cannot
// send a key to a host of their choosing. An identity naming the
// operator-wide Secret is refused, and so is one whose spec.apiBase is not
// the API base in its own Secret; a second Mailgun (a collector) receives
// nothing, neither a send nor a domain check with the key.
func TestKeysGoOnlyWhereTheirSecretSays(t *testing.T) {
	h := newHarness(t)
	team := mailgunfake.Start(teamDomain, teamAPIKey)
	t.Cleanup(team.Close)
	collector := mailgunfake.Start(teamDomain, testAPIKey)
	t.Cleanup(collector.Close)
	operatorWide := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: config.DefaultSecretName},
		StringData: map[string]string{config.SecretAPIKeyKey: testAPIKey},
	}
	if err := h.c.Create(h.ctx, operatorWide); err != nil {
		t.Fatal(err)
	}
	h.createTeamSecret(teamAPIKey, team.APIBase())

	borrowing := newIdentity(h, team, &infrav1.AllowedNamespaces{})
	borrowing.Name = "borrowing-" + h.ns
	borrowing.Spec.SecretRef.Name = config.DefaultSecretName
	borrowing.Spec.APIBase = collector.APIBase()
	h.createIdentity(borrowing)
	redirected := newIdentity(h, team, &infrav1.AllowedNamespaces{})
	redirected.Spec.APIBase = collector.APIBase()
	h.createIdentity(redirected)
	h.startManager()
	h.createOwned("borrowing", usesIdentity(borrowing.Name))
	h.createOwned("redirected", usesIdentity(redirected.Name))

	mc := h.waitForReason("borrowing", infrav1.IdentityNotAllowedReason, 20*time.Second)
	if msg := conditions.GetMessage(mc, infrav1.EmailSentCondition); !strings.Contains(msg, "names the operator-wide Secret") {
		t.Errorf("IdentityNotAllowed message %q does not say the Secret is the operator-wide one", msg)
	}
	mc = h.waitForReason("redirected", infrav1.IdentityNotAllowedReason, 20*time.Second)
	if msg := conditions.GetMessage(mc, infrav1.EmailSentCondition); !strings.Contains(msg, "spec.apiBase") {
		t.Errorf("IdentityNotAllowed message %q does not name spec.apiBase", msg)
	}
	h.consistently(2*time.Second, "the collector receives nothing", func() (bool, string) {
		sends, lookups := collector.Requests()
		domains := collector.DomainRequests()
		return sends+lookups+domains == 0, fmt.Sprintf("%d sends, %d lookups, %d domain checks", sends, lookups, domains)
	})

	// Without spec.apiBase the identity sends where its Secret says.
	patchObj(h, redirected, func() { redirected.Spec.APIBase = "" })
	h.waitForAccepted("redirected", 20*time.Second)
	if n := len(team.Messages()); n != 1 {
		t.Errorf("%d emails through the Secret's API base, want 1", n)
	}
	h.noErrorLogged()
}

// TestIdentityChangedDuringSendIsNotResolvedBlindly: a send whose outcome
// is unknown can only be looked up in the domain it was made with. If the
// identity moves to another domain meanwhile, the operator says so and
// neither looks elsewhere nor sends again; pointing the identity back lets
// it find the email. Without the check, the lookup in the new domain finds
// nothing and, after the settle time, a second email goes out.
func TestIdentityChangedDuringSendIsNotResolvedBlindly(t *testing.T) {
	h := newHarness(t)
	team := mailgunfake.Start(teamDomain, teamAPIKey)
	t.Cleanup(team.Close)
	other := mailgunfake.Start("mg.other.example.com", teamAPIKey)
	t.Cleanup(other.Close)
	// Mailgun takes the email but the reply is lost, and its events cannot
	// be read for now: the outcome stays unknown.
	team.FailSends(mailgunfake.Fault{Kind: mailgunfake.AcceptAndDropReply})
	var eventsDown atomic.Bool
	eventsDown.Store(true)
	team.SetFaultFunc(func(endpoint string) *mailgunfake.Fault {
		if endpoint == "events" && eventsDown.Load() {
			f := mailgunfake.StatusFault(503, "events unavailable")
			return &f
		}
		return nil
	})
	secret := h.createTeamSecret(teamAPIKey, team.APIBase())
	id := newIdentity(h, team, &infrav1.AllowedNamespaces{})
	h.createIdentity(id)
	h.startManager()
	h.createOwned("moving", usesIdentity(id.Name))
	h.waitForReason("moving", infrav1.MailgunUnavailableReason, 20*time.Second)

	patchObj(h, secret, func() { secret.StringData = map[string]string{config.SecretAPIBaseKey: other.APIBase()} })
	patchObj(h, id, func() { id.Spec.Domain = other.Domain })
	mc := h.waitForReason("moving", infrav1.SettingsChangedDuringSendReason, 20*time.Second)
	if msg := conditions.GetMessage(mc, infrav1.EmailSentCondition); !strings.Contains(msg, fmt.Sprintf("%q", teamDomain)) {
		t.Errorf("SettingsChangedDuringSend message %q does not name the domain the attempt was made with", msg)
	}
	// Longer than the settle time (2s): nothing is sent through the new
	// domain, nothing looked up there.
	h.consistently(3*time.Second, "no send and no lookup through the new domain", func() (bool, string) {
		sends, lookups := other.Requests()
		return sends == 0 && lookups == 0 && len(team.Messages()) == 1, fmt.Sprintf("%d sends and %d lookups through the new domain", sends, lookups)
	})

	eventsDown.Store(false)
	patchObj(h, secret, func() { secret.StringData = map[string]string{config.SecretAPIBaseKey: team.APIBase()} })
	patchObj(h, id, func() { id.Spec.Domain = team.Domain })
	mc = h.waitForAccepted("moving", 20*time.Second)
	if n := len(team.Messages()) + len(other.Messages()); n != 1 || mc.Status.MessageID != team.Messages()[0].ID {
		t.Errorf("%d emails, recorded %q; want the one accepted email", n, mc.Status.MessageID)
	}
	h.noErrorLogged()
}

// TestInvalidIdentitiesAreRejected: the apiserver refuses an identity or
// reference it could not send with, naming the field.
func TestInvalidIdentitiesAreRejected(t *testing.T) {
	h := newHarness(t)
	tests := []struct {
		name   string
		mutate func(*infrav1.MailgunClusterIdentitySpec)
		want   string
	}{
		{"plain http to a remote host", func(s *infrav1.MailgunClusterIdentitySpec) { s.APIBase = "http://api.mailgun.net/v3" }, "spec.apiBase must be an https URL"},
		{"not a URL", func(s *infrav1.MailgunClusterIdentitySpec) { s.APIBase = "api.mailgun.net" }, "spec.apiBase must be an https URL"},
		{"a URL without a host", func(s *infrav1.MailgunClusterIdentitySpec) { s.APIBase = "https:///v3" }, "spec.apiBase must be an https URL"},
		{"no API version in the path", func(s *infrav1.MailgunClusterIdentitySpec) { s.APIBase = "https://api.eu.mailgun.net" }, "spec.apiBase must end in the API version"},
		{"domain with a space", func(s *infrav1.MailgunClusterIdentitySpec) { s.Domain = "mg example.com" }, "spec.domain must be a domain name"},
		{"header injection in sender", func(s *infrav1.MailgunClusterIdentitySpec) {
			s.Sender = "a@mg.example.com\r\nBcc: everyone@example.com"
		}, "spec.sender must be a single-line email address"},
		{"Secret name with a slash", func(s *infrav1.MailgunClusterIdentitySpec) { s.SecretRef.Name = "other-ns/key" }, "spec.secretRef.name must be a Secret name"},
		{"namespace name with capitals", func(s *infrav1.MailgunClusterIdentitySpec) {
			s.AllowedNamespaces = &infrav1.AllowedNamespaces{List: []string{"Payments"}}
		}, "spec.allowedNamespaces.list[0]"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := &infrav1.MailgunClusterIdentity{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bad-%d-%s", i, h.ns)},
				Spec:       infrav1.MailgunClusterIdentitySpec{SecretRef: infrav1.SecretReference{Name: "k"}, Domain: "mg.example.com"},
			}
			tt.mutate(&id.Spec)
			err := h.c.Create(h.ctx, id)
			if err == nil {
				_ = h.c.Delete(h.ctx, id)
				t.Fatal("the apiserver accepted the identity")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
		})
	}
	t.Run("an empty allowedNamespaces.list", func(t *testing.T) {
		// Sent as written: a typed client would drop the empty list.
		id := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": infrav1.GroupVersion.String(), "kind": "MailgunClusterIdentity",
			"metadata": map[string]any{"name": "bad-empty-list-" + h.ns},
			"spec": map[string]any{
				"secretRef": map[string]any{"name": "k"}, "domain": "mg.example.com",
				"allowedNamespaces": map[string]any{"list": []any{}},
			},
		}}
		err := h.c.Create(h.ctx, id)
		if err == nil {
			_ = h.c.Delete(h.ctx, id)
		}
		if err == nil || !strings.Contains(err.Error(), "spec.allowedNamespaces.list") {
			t.Errorf("creating an identity with allowedNamespaces.list []: %v", err)
		}
	})
	t.Run("identityRef with a namespace", func(t *testing.T) {
		mc := newMailgunCluster(h.ns, "bad-ref")
		usesIdentity("team/payments")(mc)
		err := h.c.Create(h.ctx, mc)
		if err == nil || !strings.Contains(err.Error(), "spec.identityRef.name must be the name of a MailgunClusterIdentity") {
			t.Errorf("creating a MailgunCluster with identityRef.name %q: %v", "team/payments", err)
		}
	})
}
