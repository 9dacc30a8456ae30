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
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/config"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/operator"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/sendprotocol"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/logbuf"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/mailgunfake"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/proc"
)

// faultyClient fails chosen writes before they reach the apiserver, to
// test what happens when recording an accepted email fails.
type faultyClient struct {
	client.Client
	mu sync.Mutex
	// failRecord fails this many metadata patches that record an accepted
	// email.
	failRecord int
	// failStatus fails this many status writes.
	failStatus int
	// loseClaimReply lets this many send claims reach the apiserver, then
	// reports a failure, like a reply lost on the way back.
	loseClaimReply int
	failed         int
}

var errInjected = errors.New("injected apiserver write failure")

func (c *faultyClient) take(n *int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if *n > 0 {
		*n--
		c.failed++
		return true
	}
	return false
}

func (c *faultyClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	mc, ok := obj.(*infrav1.MailgunCluster)
	if ok && mc.Annotations[infrav1.AcceptedMessageIDAnnotation] != "" && c.take(&c.failRecord) {
		return errInjected
	}
	if ok && mc.Annotations[infrav1.SendAttemptedAtAnnotation] != "" && c.take(&c.loseClaimReply) {
		if err := c.Client.Patch(ctx, obj, patch, opts...); err != nil {
			return err
		}
		return errInjected
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *faultyClient) Status() client.SubResourceWriter {
	return &faultyStatus{SubResourceWriter: c.Client.Status(), c: c}
}

type faultyStatus struct {
	client.SubResourceWriter
	c *faultyClient
}

func (s *faultyStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if _, ok := obj.(*infrav1.MailgunCluster); ok && s.c.take(&s.c.failStatus) {
		return errInjected
	}
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

func (s *faultyStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if _, ok := obj.(*infrav1.MailgunCluster); ok && s.c.take(&s.c.failStatus) {
		return errInjected
	}
	return s.SubResourceWriter.Update(ctx, obj, opts...)
}

// TestFailedRecordWritesDoNotCauseASecondEmail: when writing the record of
// an accepted email fails, the process keeps the accepted ID until the
// record is written. Mailgun's events lag (here for longer than the
// settle time), so a lookup would find nothing and the email would go out
// again.
func TestFailedRecordWritesDoNotCauseASecondEmail(t *testing.T) {
	h := newHarness(t)
	h.fake.SetEventLag(time.Hour)
	fc := &faultyClient{failRecord: 2, failStatus: 3}
	h.startManager(func(o *operator.Options) {
		o.WrapClient = func(c client.Client) client.Client { fc.Client = c; return fc }
	})
	h.createOwned("flaky-writes")

	mc := h.waitForAccepted("flaky-writes", 30*time.Second)
	if fc.failed < 5 {
		t.Fatalf("only %d writes failed; the test did not exercise the failures", fc.failed)
	}
	emails := h.emailsFor("flaky-writes")
	if len(emails) != 1 {
		t.Fatalf("got %d emails, want exactly 1", len(emails))
	}
	if mc.Annotations[infrav1.AcceptedMessageIDAnnotation] != emails[0].ID || mc.Status.MessageID != emails[0].ID {
		t.Errorf("recorded annotation %q / status %q, want %q", mc.Annotations[infrav1.AcceptedMessageIDAnnotation], mc.Status.MessageID, emails[0].ID)
	}
}

// TestLostClaimReplyDoesNotWaitToSettle: when the reply to the claim write
// is lost, the claim may be stored, but this process knows it never sent
// under it, so it sends without waiting for Mailgun's events to settle.
func TestLostClaimReplyDoesNotWaitToSettle(t *testing.T) {
	h := newHarness(t)
	fc := &faultyClient{loseClaimReply: 1}
	h.startManager(func(o *operator.Options) {
		o.SettleTime = time.Minute
		o.WrapClient = func(c client.Client) client.Client { fc.Client = c; return fc }
	})
	h.createOwned("lost-claim-reply")
	h.waitForAccepted("lost-claim-reply", 20*time.Second)
	if fc.failed != 1 {
		t.Fatalf("%d claim replies lost, want 1", fc.failed)
	}
	if n := len(h.emailsFor("lost-claim-reply")); n != 1 {
		t.Errorf("got %d emails, want exactly 1", n)
	}
}

// managerBinary builds the manager once per test run.
var managerBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "capmg-manager-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "manager")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = env.RepoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return bin, nil
})

// process is the manager binary running against the test control plane.
type process struct {
	*proc.Proc
	healthAddr string
}

func (h *harness) startBinary(extraArgs ...string) *process {
	h.t.Helper()
	bin, err := managerBinary()
	if err != nil {
		h.t.Fatalf("building manager: %v", err)
	}
	kubeconfig := filepath.Join(h.t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		h.t.Fatalf("writing kubeconfig: %v", err)
	}
	healthAddr := proc.FreeAddr(h.t)
	args := append([]string{
		"--metrics-bind-address=0",
		"--health-probe-bind-address=" + healthAddr,
		"--namespace=" + h.ns,
		"--config-namespace=" + h.ns,
		"--mailgun-timeout=1s", "--send-settle-time=2s",
		"--mailgun-recheck-interval=1s",
		"--zap-log-level=debug",
	}, extraArgs...)
	environ := []string{"KUBECONFIG=" + kubeconfig, "HOME=" + h.t.TempDir()}
	for k, v := range h.env {
		environ = append(environ, k+"="+v)
	}
	// The output goes to the harness's log buffer, which the "API key never
	// logged" check reads.
	return &process{Proc: proc.StartWithOutput(h.t, "manager", bin, args, environ, h.logs), healthAddr: healthAddr}
}

// probe GETs a path of the health endpoint.
func (p *process) probe(path string) (int, string) {
	return proc.HTTPGet(p.healthAddr, path)
}

func TestCrashBetweenSendAndRecordSendsOnce(t *testing.T) {
	h := newHarness(t)
	// Mailgun accepts the message but the reply never arrives before the
	// process dies.
	h.fake.FailSends(mailgunfake.Fault{Kind: mailgunfake.AcceptAndHang})
	// The send hangs for the timeout, long enough to be killed in; the
	// settle time must outlast it (Validate).
	p := h.startBinary("--mailgun-timeout=1m", "--send-settle-time=2m")
	h.createOwned("crash")

	h.eventually(60*time.Second, "Mailgun to accept the email", func() (bool, string) {
		return len(h.emailsFor("crash")) == 1, "no email yet"
	})
	p.Kill() // as a node failure or an OOM kill would

	mc := h.get("crash")
	if mc.Annotations[infrav1.SendAttemptedAtAnnotation] == "" || mc.Annotations[infrav1.AcceptedMessageIDAnnotation] != "" {
		t.Fatalf("after the crash the object should hold an unsettled attempt and no record; annotations: %v", mc.Annotations)
	}

	h.startBinary()
	mc = h.waitForAccepted("crash", 60*time.Second)
	emails := h.emailsFor("crash")
	if len(emails) != 1 {
		t.Fatalf("got %d emails, want exactly 1", len(emails))
	}
	if mc.Status.MessageID != emails[0].ID {
		t.Errorf("recorded %q, want %q", mc.Status.MessageID, emails[0].ID)
	}
}

func TestBinaryReportsMissingConfiguration(t *testing.T) {
	h := newHarness(t)
	h.env = map[string]string{}
	p := h.startBinary()

	h.eventually(60*time.Second, "the readiness endpoint to answer", func() (bool, string) {
		code, body := p.probe("/readyz?exclude=" + operator.ConfigCheckName)
		return code == http.StatusOK, fmt.Sprintf("%d %s", code, body)
	})
	if code, body := p.probe("/readyz"); code != http.StatusInternalServerError || !strings.Contains(body, "[-]"+operator.ConfigCheckName+" failed") {
		t.Errorf("/readyz = %d %q, want 500 naming the %s check", code, body, operator.ConfigCheckName)
	}
	h.eventually(10*time.Second, "the log to say what is missing", func() (bool, string) {
		logs := h.logs.String()
		return strings.Contains(logs, "Mailgun API key is not set") && strings.Contains(logs, `key \"api_key\" of Secret `+h.ns), "not logged yet"
	})

	// Filling in the ConfigMap and Secret fixes it without a restart.
	createSecret(h, testAPIKey)
	cm := newConfigMap(h.ns, map[string]string{
		config.ConfigMapDomainKey: testDomain, config.ConfigMapRecipientKey: testRecipient,
		config.ConfigMapAPIBaseKey: h.fake.APIBase(),
	})
	if err := setSettings(h, cm); err != nil {
		t.Fatalf("creating ConfigMap: %v", err)
	}
	h.eventually(30*time.Second, "/readyz to pass", func() (bool, string) {
		code, body := p.probe("/readyz")
		return code == http.StatusOK, fmt.Sprintf("%d %s", code, body)
	})
	h.createOwned("configured-later")
	h.waitForAccepted("configured-later", 30*time.Second)
}

// staleReader serves, once the real object records an accepted email, an
// old copy of it from before the first send: what a lagging cache shows.
type staleReader struct {
	client.Client
	mu       sync.Mutex
	pristine map[client.ObjectKey]*infrav1.MailgunCluster
	served   int
}

func (c *staleReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	mc, ok := obj.(*infrav1.MailgunCluster)
	if !ok {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old, seen := c.pristine[key]
	switch {
	case !seen && mc.Annotations[infrav1.MessageIDAnnotation] == "":
		c.pristine[key] = mc.DeepCopy()
	case seen && mc.Annotations[infrav1.AcceptedMessageIDAnnotation] != "" && c.served < 3:
		c.served++
		old.DeepCopyInto(mc)
	}
	return nil
}

func TestStaleCacheDoesNotCauseASecondEmail(t *testing.T) {
	h := newHarness(t)
	sr := &staleReader{pristine: map[client.ObjectKey]*infrav1.MailgunCluster{}}
	h.startManager(func(o *operator.Options) {
		o.WrapClient = func(c client.Client) client.Client { sr.Client = c; return sr }
	})
	h.createOwned("stale")
	h.waitForAccepted("stale", 20*time.Second)

	// Any change triggers reconciles, which now see the stale copy.
	mc := h.get("stale")
	patchObj(h, mc, func() { mc.Labels = map[string]string{"touched": "yes"} })
	h.eventually(10*time.Second, "the stale copy to be served", func() (bool, string) {
		sr.mu.Lock()
		defer sr.mu.Unlock()
		return sr.served > 0, "not yet"
	})
	h.consistently(2*time.Second, "exactly one email, and Ready kept", func() (bool, string) {
		n := len(h.emailsFor("stale"))
		// A status write from the stale copy would replace the conditions
		// list; optimistic locking makes it fail instead.
		ready := conditions.IsTrue(h.get("stale"), infrav1.ReadyCondition)
		return n == 1 && ready, fmt.Sprintf("%d emails, Ready=%v", n, ready)
	})
	if got := h.get("stale"); got.Status.MessageID == "" || got.Annotations[infrav1.AcceptedMessageIDAnnotation] == "" {
		t.Errorf("the record was lost: status %q, annotations %v", got.Status.MessageID, got.Annotations)
	}
}

// TestLeaderElectionLetsOneReplicaSend runs two replicas with leader
// election: only one may run the controller, the other stands by, and
// neither logs an error when they stop (controller-runtime reports the
// lease release on shutdown as "leader election lost").
func TestLeaderElectionLetsOneReplicaSend(t *testing.T) {
	h := newHarness(t)
	replicas := []*logbuf.Buffer{{}, {}}
	var stops []func()
	for _, logs := range replicas {
		stops = append(stops, h.startManager(func(o *operator.Options) {
			o.LeaderElect = true
			o.LeaderElectionID = "capmg-" + h.ns
			// The settle time must outlast a send's timeout plus the
			// renew deadline (Validate).
			o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 4*time.Second, time.Second, 500*time.Millisecond
			logger := zap.New(zap.WriteTo(io.MultiWriter(logs, h.logs)), zap.UseDevMode(true))
			o.Logger = &logger
		}))
	}
	for i := range 5 {
		h.createOwned(fmt.Sprintf("replicated-%d", i))
	}
	for i := range 5 {
		h.waitForAccepted(fmt.Sprintf("replicated-%d", i), 60*time.Second)
	}
	h.consistently(time.Second, "exactly one email per object", func() (bool, string) {
		n := len(h.fake.Messages())
		return n == 5, fmt.Sprintf("%d emails for 5 objects", n)
	})
	// "Starting workers" is logged by a controller that runs; a standby
	// replica never logs it.
	running := 0
	for _, logs := range replicas {
		if strings.Contains(logs.String(), "Starting workers") {
			running++
		}
	}
	if running != 1 {
		t.Errorf("%d replicas ran the controller, want exactly 1", running)
	}
	for _, stop := range stops {
		stop()
	}
	for i, logs := range replicas {
		for _, line := range logs.ErrorLines() {
			t.Errorf("replica %d logged an error: %s", i, line)
		}
	}
}

// takeoverClient plays a successor that took over while this replica was
// frozen right after its claim write: once the claim is stored, the
// successor sends the email itself and writes its own claim, before this
// replica goes on.
type takeoverClient struct {
	client.Client
	takeover func(ctx context.Context, mc *infrav1.MailgunCluster)
	once     sync.Once
}

func (c *takeoverClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := c.Client.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	if mc, ok := obj.(*infrav1.MailgunCluster); ok && mc.Annotations[infrav1.SendAttemptedAtAnnotation] != "" {
		c.once.Do(func() { c.takeover(ctx, mc.DeepCopy()) })
	}
	return nil
}

// TestStaleClaimIsNotSent: a replica whose claim was replaced by a
// successor's (it was frozen after its claim; the successor took over,
// settled and sent) does not send: right before sending it reads the live
// object and finds the claim is not its own. It then finds the successor's
// email in Mailgun's events and records it.
func TestStaleClaimIsNotSent(t *testing.T) {
	h := newHarness(t)
	successor := mailer.New(mailer.Settings{Domain: testDomain, APIKey: testAPIKey, Recipient: testRecipient, APIBase: h.fake.APIBase()}, time.Second)
	tc := &takeoverClient{takeover: func(ctx context.Context, mc *infrav1.MailgunCluster) {
		if _, err := successor.Send(ctx, mailer.ClusterEmail{
			Priority: string(mc.Spec.Priority), Request: mc.Spec.Request, Requester: mc.Spec.Requester,
			Object: h.ns + "/" + mc.Name, UID: string(mc.UID),
		}.Email(mc.Annotations[infrav1.MessageIDAnnotation])); err != nil {
			t.Errorf("the successor's send: %v", err)
		}
		live := h.get(mc.Name)
		patchObj(h, live, func() {
			live.Annotations[infrav1.SendAttemptedAtAnnotation] = sendprotocol.ClaimValue(time.Now(), "successor")
		})
	}}
	h.startManager(func(o *operator.Options) {
		o.WrapClient = func(c client.Client) client.Client { tc.Client = c; return tc }
	})
	h.createOwned("stale-claim")
	h.waitForAccepted("stale-claim", 20*time.Second)
	if n := len(h.emailsFor("stale-claim")); n != 1 {
		t.Errorf("got %d emails, want exactly the successor's", n)
	}
	h.noErrorLogged()
}
