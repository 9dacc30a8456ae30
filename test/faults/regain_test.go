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
	"path/filepath"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/config"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/apiproxy"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/mailgunfake"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/poll"
)

// TestFrozenLeaderThatHoldsTheLeaseAgainSendsNothing drives, with two
// manager processes and real leader election, the case the fence's hold
// check is for, which the random chaos of TestExactlyOneEmailUnderFaults
// rarely lines up:
//
//  1. replica a, the leader, writes its claim on a MailgunCluster; the
//     apiserver applies it, and the answer is held back on its way (the
//     proxy in front of a);
//  2. a is frozen (SIGSTOP) past its Lease; b takes over, waits out the
//     settle time, finds no email in Mailgun's events, claims and sends;
//  3. b is stopped with SIGTERM, as in a rollout, and releases the Lease;
//  4. a wakes to a free Lease and holds it again in the same process;
//  5. only then does a's claim answer arrive: a's reconcile goes on to its
//     send with the Lease held and its own claim in hand.
//
// a must read the object (its hold began after its claim), find b's email
// and send nothing.
func TestFrozenLeaderThatHoldsTheLeaseAgainSendsNothing(t *testing.T) {
	t.Parallel()
	bin, logDir := managerAndLogDir(t, "regain")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const ns, leaseName, name = "regain", "capmg-regain", "mc-regain"
	env := startControlPlane(ctx, t, ns)
	c := env.Client
	fake := mailgunfake.Start(domain, apiKey)
	t.Cleanup(fake.Close)

	start := func(replicaName string) (*replica, *apiproxy.Proxy) {
		proxy, err := apiproxy.Start(env.Config, apiproxy.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(proxy.Close)
		kubeconfig, err := proxy.WriteKubeconfig(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		r := &replica{
			name: replicaName, logDir: logDir,
			args: []string{
				"--leader-elect", "--leader-election-id=" + leaseName, "--leader-election-namespace=" + ns,
				"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms",
				"--namespace=" + ns, "--config-namespace=",
				"--mailgun-timeout=1s", "--send-settle-time=5s", "--mailgun-recheck-interval=1s",
				"--health-probe-bind-address=0", "--metrics-bind-address=0", "--zap-log-level=debug",
			},
			env: []string{
				"KUBECONFIG=" + kubeconfig, "HOME=" + logDir,
				config.EnvDomain + "=" + domain, config.EnvAPIKey + "=" + apiKey,
				config.EnvRecipient + "=" + recipient, config.EnvAPIBase + "=" + fake.APIBase(),
			},
		}
		r.start(t, bin)
		return r, proxy
	}
	wait := func(what string, timeout time.Duration, cond func() (bool, string)) {
		t.Helper()
		if ok, state := poll.Until(ctx, timeout, 50*time.Millisecond, cond); !ok {
			t.Fatalf("%s: not within %s (%s)", what, timeout, state)
		}
	}
	lease := func() (holder string, renewed time.Time, err error) {
		l := &coordinationv1.Lease{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: leaseName}, l); err != nil {
			return "", time.Time{}, err
		}
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		if l.Spec.RenewTime != nil {
			renewed = l.Spec.RenewTime.Time
		}
		return holder, renewed, nil
	}
	aLog := filepath.Join(logDir, "replica-a-1.log")
	emails := func() int { return len(fake.MessagesWithVariable(mailer.VarCluster, ns+"/"+name)) }

	a, proxyA := start("replica-a")
	var aIdentity string
	wait("replica a holds the Lease", time.Minute, func() (bool, string) {
		var err error
		aIdentity, _, err = lease()
		return err == nil && aIdentity != "", fmt.Sprintf("holder %q, %v", aIdentity, err)
	})
	b, _ := start("replica-b")

	applied, release := proxyA.HoldNextWrite(ns, name)
	defer release()
	objects{ctx: ctx, t: t, c: c, ns: ns}.cluster(name, nil)
	select {
	case <-applied:
	case <-time.After(time.Minute):
		t.Fatal("replica a wrote no claim within a minute")
	}
	mc := &infrav1.MailgunCluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, mc); err != nil {
		t.Fatal(err)
	}
	if mc.Annotations[infrav1.SendAttemptedAtAnnotation] == "" {
		t.Fatalf("the held write was not replica a's claim: annotations %v", mc.Annotations)
	}
	// Freeze a right after a renewal of its Lease, not in the middle of
	// one (a renewal cut by the freeze fails on waking, and a exits).
	_, renewed, err := lease()
	if err != nil {
		t.Fatal(err)
	}
	wait("replica a renews its Lease", 10*time.Second, func() (bool, string) {
		_, r, err := lease()
		return err == nil && r.After(renewed), fmt.Sprintf("renewed %v, %v", r, err)
	})
	time.Sleep(100 * time.Millisecond)
	a.suspend()
	defer a.resume()
	wait("replica b records an email", time.Minute, func() (bool, string) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, mc); err != nil {
			return false, err.Error()
		}
		return mc.Status.MessageID != "", fmt.Sprintf("%d emails, conditions %v", emails(), mc.Status.Conditions)
	})
	b.stop()
	if holder, _, err := lease(); err != nil || holder != "" {
		t.Fatalf("replica b did not release the Lease on SIGTERM: held by %q (%v)", holder, err)
	}
	a.resume()
	wait("replica a holds the Lease again after its freeze", 30*time.Second, func() (bool, string) {
		holder, _, err := lease()
		return holder == aIdentity || a.exited(), fmt.Sprintf("holder %q, %v", holder, err)
	})
	if a.exited() {
		t.Fatalf("replica a exited on waking instead of taking the free Lease:\n%s", a.proc().Tail(20))
	}
	wait("replica a logs that it holds the Lease again", 5*time.Second, func() (bool, string) {
		return countInLogs(t, aLog, heldAgainLine) > 0, ""
	})
	release()
	// a withholds its send because the live object has b's email (so it
	// read the object), or sends a second email; and sends none later.
	const readAndWithheld = withheldLine + ": the live object already records an accepted email"
	wait("replica a decides about its claim", 30*time.Second, func() (bool, string) {
		return countInLogs(t, aLog, readAndWithheld) > 0 || emails() > 1, fmt.Sprintf("%d emails", emails())
	})
	poll.Until(ctx, 5*time.Second, 200*time.Millisecond, func() (bool, string) { return emails() > 1, "" })
	if n := emails(); n != 1 {
		t.Fatalf("%d emails for %s, want 1: the replica that held the Lease again sent under a claim its successor had replaced", n, name)
	}
	t.Log("replica a, frozen after its claim, held the Lease again after its successor sent and shut down; it read the object and sent nothing")
}
