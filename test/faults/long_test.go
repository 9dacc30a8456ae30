//go:build faults

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

package faults

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/config"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/apiproxy"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/mailgunfake"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/poll"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/proc"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/testenv"
)

// TestLongFailuresCostLittleAndSendOnce runs the manager binary with the
// flags of the shipped Deployment (leader election, the default timings)
// through failures that last, as a user meets them:
//
//   - Mailgun unreachable (connection refused) for FAULTS_LONG_FAILURE
//     (10m by default), for the MailgunClusters of one identity;
//   - 429 without Retry-After or X-RateLimit-Reset as long, for another's;
//   - Mailgun queueing the first send of others and answering 503, with
//     events that lag 3 minutes, longer than the old 2-minute settle time;
//   - then resend requests with reused values (a, b, a).
//
// Each object of the first two groups costs at most 12 Mailgun calls and
// 25 apiserver writes in the failure; the test reports what they cost. In
// the end every object has exactly one email (the resent one, one per
// request, each with its own Message-Id), recorded.
func TestLongFailuresCostLittleAndSendOnce(t *testing.T) {
	t.Parallel()
	bin, logDir := managerAndLogDir(t, "long")
	failure := envDuration("FAULTS_LONG_FAILURE", 10*time.Minute)
	// FAULTS_LONG_OBJECTS sizes the refused and rate-limited groups, e.g.
	// 1000 to see what a fleet costs the apiserver in an outage.
	failing := envInt("FAULTS_LONG_OBJECTS", 5)
	const (
		laggingObjects = 5
		eventLag       = 3 * time.Minute
		maxBackoff     = 5 * time.Minute // the default --mailgun-max-backoff
	)
	ctx, cancel := context.WithTimeout(context.Background(), failure+2*maxBackoff+10*time.Minute)
	defer cancel()

	ns := "long"
	env := startControlPlane(ctx, t, ns)
	c := env.Client

	// The operator-wide account: queues the first sends and answers 503,
	// and its events lag.
	lagging := mailgunfake.Start("mg.lag.example.com", apiKey)
	t.Cleanup(lagging.Close)
	lagging.SetEventLag(eventLag)
	for range laggingObjects {
		lagging.FailSends(mailgunfake.Fault{Kind: mailgunfake.AcceptAndFail, Status: 503, Body: `{"message":"internal error"}`})
	}
	// Two identities' accounts: one refuses connections, one answers 429
	// without saying when to retry.
	refusing := mailgunfake.Start("mg.unreachable.example.com", apiKey)
	t.Cleanup(refusing.Close)
	if err := refusing.RefuseConnections(true); err != nil {
		t.Fatal(err)
	}
	limited := mailgunfake.Start("mg.limited.example.com", apiKey)
	t.Cleanup(limited.Close)
	var limiting atomic.Bool
	limiting.Store(true)
	limited.SetFaultFunc(func(string) *mailgunfake.Fault {
		if limiting.Load() {
			return &mailgunfake.Fault{Kind: mailgunfake.Status, Status: 429, Body: `{"message":"too many requests"}`}
		}
		return nil
	})
	for name, fake := range map[string]*mailgunfake.Server{"unreachable": refusing, "limited": limited} {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-mailgun"},
			StringData: map[string]string{config.SecretAPIKeyKey: apiKey, config.SecretAPIBaseKey: fake.APIBase()}}
		id := &infrav1.MailgunClusterIdentity{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: infrav1.MailgunClusterIdentitySpec{SecretRef: infrav1.SecretReference{Name: secret.Name}, Domain: fake.Domain,
				AllowedNamespaces: &infrav1.AllowedNamespaces{}}}
		for _, obj := range []client.Object{secret, id} {
			if err := c.Create(ctx, obj); err != nil {
				t.Fatal(err)
			}
		}
	}

	proxy, err := apiproxy.Start(env.Config, apiproxy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	kubeconfig, err := proxy.WriteKubeconfig(logDir)
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := proc.FreeAddr(t)
	r := &replica{
		name: "replica", logDir: logDir, metricsAddr: metricsAddr,
		// The Deployment's flags; the rest only place the operator in
		// the test's namespace and serve metrics in plain HTTP.
		args: []string{
			"--leader-elect", "--metrics-bind-address=" + metricsAddr, "--health-probe-bind-address=0",
			"--leader-election-namespace=" + ns, "--namespace=" + ns, "--config-namespace=" + ns, "--metrics-secure=false",
		},
		env: []string{
			"KUBECONFIG=" + kubeconfig, "HOME=" + logDir,
			config.EnvDomain + "=" + lagging.Domain, config.EnvAPIKey + "=" + apiKey,
			config.EnvRecipient + "=" + recipient, config.EnvAPIBase + "=" + lagging.APIBase(),
		},
	}
	r.start(t, bin)

	groups := map[string]struct {
		identity string
		objects  int
	}{"unreachable": {"unreachable", failing}, "limited": {"limited", failing}, "lag": {"", laggingObjects}}
	var names []string
	for group, g := range groups {
		identity := g.identity
		for i := range g.objects {
			name := fmt.Sprintf("%s-%d", group, i)
			names = append(names, name)
			cluster := testenv.ClusterFor(ns, name)
			if err := c.Create(ctx, cluster); err != nil {
				t.Fatal(err)
			}
			mc := &infrav1.MailgunCluster{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: []metav1.OwnerReference{testenv.OwnerRef(cluster)}},
				Spec:       infrav1.MailgunClusterSpec{Priority: infrav1.PriorityUrgent, Request: "cluster " + name, Requester: "ops@example.com"},
			}
			if identity != "" {
				mc.Spec.IdentityRef = &infrav1.MailgunClusterIdentityReference{Name: identity}
			}
			if err := c.Create(ctx, mc); err != nil {
				t.Fatal(err)
			}
		}
	}
	start := time.Now()

	// The lagging group resolves during the failure: its queued messages
	// show in the events after the lag, and are recorded, not resent.
	time.Sleep(time.Until(start.Add(failure)))
	limitedCalls := func() int {
		sends, lookups := limited.Requests()
		return sends + lookups + limited.DomainRequests()
	}()
	refusedSends := scrapeCounter(t, metricsAddr, `capmg_email_send_failures_total{class="Unreachable",kind="MailgunCluster"}`)
	// The other accounts' failures and retries took nothing from the
	// operator-wide account (--mailgun-qps is per account): its objects
	// were settled and recorded during them, once their events showed.
	if failure > 2*eventLag {
		for i := range laggingObjects {
			mc := &infrav1.MailgunCluster{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("lag-%d", i)}, mc); err != nil {
				t.Fatal(err)
			}
			if mc.Status.MessageID == "" {
				t.Errorf("lag-%d: no email recorded after %s; the failing accounts held up a healthy one", i, failure)
			}
		}
	}
	limiting.Store(false)
	if err := refusing.RefuseConnections(false); err != nil {
		t.Fatal(err)
	}
	for _, group := range []string{"unreachable", "limited"} {
		writes, maxWrites := 0, 0
		for i := range failing {
			w := proxy.WritesTo(ns, fmt.Sprintf("%s-%d", group, i))
			writes += w
			maxWrites = max(maxWrites, w)
		}
		t.Logf("%s for %s: %d objects wrote %d times in all (at most %d each)", group, failure, failing, writes, maxWrites)
		if maxWrites > 25 {
			t.Errorf("%s: an object wrote %d times in %s, want at most 25", group, maxWrites, failure)
		}
	}
	t.Logf("429 without a retry hint for %s: %d Mailgun calls for %d objects (%.1f each)", failure, limitedCalls, failing, float64(limitedCalls)/float64(failing))
	t.Logf("connection refused for %s: %.0f send attempts for %d objects (%.1f each), besides one domain check each", failure, refusedSends, failing, refusedSends/float64(failing))
	if limitedCalls > 12*failing || refusedSends > float64(11*failing) {
		t.Errorf("%d calls under 429 and %.0f send attempts refused, want at most %d and %d", limitedCalls, refusedSends, 12*failing, 11*failing)
	}

	// Once Mailgun answers, each object's next try is at most the maximum
	// backoff away.
	if ok, state := poll.Until(ctx, 2*maxBackoff, 2*time.Second, func() (bool, string) {
		pending := notConverged(ctx, t, c, ns)
		return len(pending) == 0, fmt.Sprintf("not accepted: %v", pending)
	}); !ok {
		t.Fatalf("after the failures ended: %s", state)
	}
	t.Logf("all %d objects accepted %s after the failures ended", len(names), time.Since(start.Add(failure)).Round(time.Second))

	// Resend values reused: three requests, three emails, no two with the
	// same Message-Id (a lookup for one must never find another).
	resent := "lag-0"
	for _, value := range []string{"a", "b", "a"} {
		mc := &infrav1.MailgunCluster{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: resent}, mc); err != nil {
			t.Fatal(err)
		}
		before := mc.Status.MessageID
		mc.Annotations[infrav1.ResendRequestAnnotation] = value
		if err := c.Update(ctx, mc); err != nil {
			t.Fatal(err)
		}
		if ok, state := poll.Until(ctx, time.Minute, 500*time.Millisecond, func() (bool, string) {
			got := &infrav1.MailgunCluster{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(mc), got); err != nil {
				return false, err.Error()
			}
			return got.Status.MessageID != before && got.Annotations[infrav1.AcceptedMessageIDAnnotation] == got.Status.MessageID,
				fmt.Sprintf("status.messageID %q", got.Status.MessageID)
		}); !ok {
			t.Fatalf("resend %q not accepted: %s", value, state)
		}
	}

	duplicates, lost := 0, 0
	for _, name := range names {
		mc := &infrav1.MailgunCluster{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, mc); err != nil {
			t.Fatal(err)
		}
		var emails []mailgunfake.Message
		for _, f := range []*mailgunfake.Server{lagging, refusing, limited} {
			emails = append(emails, f.MessagesWithVariable(mailer.VarCluster, ns+"/"+name)...)
		}
		want := 1
		if name == resent {
			want = 4
		}
		ids := map[string]bool{}
		for _, e := range emails {
			ids[e.ID] = true
		}
		switch {
		case len(emails) < want:
			lost += want - len(emails)
			t.Errorf("%s: %d emails, want %d", name, len(emails), want)
		case len(emails) > want || len(ids) != len(emails):
			duplicates += len(emails) - len(ids) + max(0, len(ids)-want)
			t.Errorf("%s: %d emails with %d Message-Ids, want %d", name, len(emails), len(ids), want)
		case mc.Status.MessageID != emails[len(emails)-1].ID:
			t.Errorf("%s: records %q, the last email was %q", name, mc.Status.MessageID, emails[len(emails)-1].ID)
		}
	}
	t.Logf("%d objects: %d duplicates, %d lost", len(names), duplicates, lost)
}

// scrapeCounter reads the value of the metric line that starts with series
// from the manager's metrics endpoint; 0 if there is none.
func scrapeCounter(t *testing.T, addr, series string) float64 {
	t.Helper()
	text, err := scrape(addr)
	if err != nil {
		t.Fatalf("scraping metrics: %v", err)
	}
	for line := range strings.Lines(text) {
		if v, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("metric %s: %v", series, err)
			}
			return f
		}
	}
	return 0
}
