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
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/config"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/operator"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/logbuf"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/mailgunfake"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/proc"
)

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
