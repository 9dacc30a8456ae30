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

// Package faults runs the manager binary through crashes, a flaky Mailgun
// and a flaky apiserver, and checks that every MailgunCluster and
// MailgunMachine still gets exactly one email. Run it with `make test-faults`.
package faults

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/config"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/apiproxy"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/mailgunfake"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/poll"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/proc"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/testenv"
)

// chaosMaxBackoff is the chaos test's --mailgun-max-backoff.
const chaosMaxBackoff = 30 * time.Second

// Log lines the suite counts: a replica that holds the leader election
// Lease again after a break in the same process, and a send the fence
// withheld (debug).
const (
	heldAgainLine = "Holding the leader election lease again after a break"
	withheldLine  = "Retrying soon: not sending"
)

const (
	domain    = "mg.faults.example.com"
	apiKey    = "key-faults-7c1e0d9b3a5f-never-log-me" //nolint:gosec // G101: a made-up key for the Mailgun fake
	recipient = "requests@example.com"
)

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// envSeed is the seed in environment variable name, or a random one below
// 1e9 (short enough to copy from the log) if it is unset or not a positive
// integer.
func envSeed(name string) uint64 {
	if v, err := strconv.ParseUint(os.Getenv(name), 10, 64); err == nil && v > 0 {
		return v
	}
	return rand.Uint64N(1e9)
}

// replica is one manager process of those that share leader election,
// started again whenever the test kills or stops it, or it exits.
type replica struct {
	name        string
	args        []string
	env         []string
	logDir      string
	metricsAddr string

	mu       sync.Mutex
	p        *proc.Proc
	restarts int
}

func (r *replica) start(t *testing.T, bin string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.restarts++
	r.p = proc.Start(t, r.logDir, fmt.Sprintf("%s-%d", r.name, r.restarts), bin, r.args, r.env)
}

func (r *replica) kill() { r.proc().Kill() }

// stop ends the replica gracefully (SIGTERM), as a rollout does: it
// releases the Lease on its way out.
func (r *replica) stop() { r.proc().Stop() }

// suspend freezes the replica (SIGSTOP) until resume.
func (r *replica) suspend() { r.proc().Suspend() }

// resume continues the replica after suspend.
func (r *replica) resume() { r.proc().Resume() }

// exited reports whether the replica's current process has exited.
func (r *replica) exited() bool { return r.proc().Exited() }

func (r *replica) proc() *proc.Proc {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.p
}

// freeze stops the replica for d and continues it.
func (r *replica) freeze(d time.Duration) { r.proc().Freeze(d) }

// leader is the index of the only replica whose metrics say it holds the
// leader election Lease id, or -1 if none or both do (a deposed leader says
// so until its renew deadline has passed) or a replica does not answer yet.
func leader(replicas []*replica, id string) int {
	found := -1
	for i, r := range replicas {
		text, err := scrape(r.metricsAddr)
		if err != nil {
			return -1
		}
		if strings.Contains(text, `leader_election_master_status{name="`+id+`"} 1`) {
			if found >= 0 {
				return -1
			}
			found = i
		}
	}
	return found
}

func TestExactlyOneEmailUnderFaults(t *testing.T) {
	t.Parallel()
	n := envInt("FAULTS_OBJECTS", 300)
	seed := envSeed("FAULTS_SEED")
	t.Logf("objects=%d seed=%d (set FAULTS_SEED to reproduce)", n, seed)
	bin, logDir := managerAndLogDir(t, "")
	replicaLogs := filepath.Join(logDir, "replica*.log")
	outageLen := envDuration("FAULTS_OUTAGE", time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute+2*outageLen)
	defer cancel()
	ns := "faults"
	env := startControlPlane(ctx, t, ns)
	c := env.Client

	// Mailgun fails 38% of sends: 5xx, 429, hangs past the client timeout,
	// accepted messages whose reply is lost, and accepted messages answered
	// with 500/502/503/504. Event and domain lookups fail 10%.
	fake := mailgunfake.Start(domain, apiKey)
	t.Cleanup(fake.Close)
	var rngMu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	var outage atomic.Bool
	fake.SetFaultFunc(func(endpoint string) *mailgunfake.Fault {
		if outage.Load() {
			f := mailgunfake.StatusFault(503, "outage")
			return &f
		}
		rngMu.Lock()
		x := rng.Float64()
		rngMu.Unlock()
		if endpoint == "events" || endpoint == "domains" {
			if x < 0.10 {
				f := mailgunfake.StatusFault(503, endpoint+" unavailable")
				return &f
			}
			return nil
		}
		switch {
		case x < 0.10:
			f := mailgunfake.StatusFault(503, "service unavailable")
			return &f
		case x < 0.17:
			return &mailgunfake.Fault{Kind: mailgunfake.Status, Status: 429, Body: `{"message":"rate limited"}`,
				Header: http.Header{"Retry-After": {"1"}}}
		case x < 0.22:
			return &mailgunfake.Fault{Kind: mailgunfake.Hang}
		case x < 0.30:
			return &mailgunfake.Fault{Kind: mailgunfake.AcceptAndDropReply}
		case x < 0.38:
			// Queued, and still a 5xx: Mailgun says a 5xx does not mean
			// the message was not queued.
			statuses := []int{500, 502, 503, 504}
			rngMu.Lock()
			status := statuses[rng.IntN(len(statuses))]
			rngMu.Unlock()
			return &mailgunfake.Fault{Kind: mailgunfake.AcceptAndFail, Status: status, Body: `{"message":"internal error"}`}
		}
		return nil
	})

	// 30% of the operator's writes to MailgunClusters and MailgunMachines
	// fail; a third of those are applied by the apiserver and only the
	// answer is lost.
	proxy, err := apiproxy.Start(env.Config, apiproxy.Options{Seed: seed, FailRate: 0.30, LostRate: 0.10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	kubeconfig, err := proxy.WriteKubeconfig(logDir)
	if err != nil {
		t.Fatal(err)
	}

	var replicas []*replica
	for i := range 2 {
		r := &replica{
			name: fmt.Sprintf("replica%d", i), logDir: logDir, metricsAddr: proc.FreeAddr(t),
			args: []string{
				"--leader-elect", "--leader-election-id=capmg-faults", "--leader-election-namespace=" + ns,
				"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms",
				"--namespace=" + ns, "--config-namespace=",
				"--mailguncluster-concurrency=10",
				"--mailgun-timeout=1s", "--send-settle-time=5s", "--mailgun-recheck-interval=1s",
				// The failure count is kept until an acceptance, and Mailgun
				// keeps failing 38% of sends after the outage: with the
				// default 5m cap an object may wait minutes between tries.
				// TestLongFailuresCostLittleAndSendOnce runs the defaults.
				"--mailgun-max-backoff=" + chaosMaxBackoff.String(),
				"--delivery-poll-interval=30s", "--health-probe-bind-address=0",
				"--zap-log-level=debug",
			},
			env: []string{
				"KUBECONFIG=" + kubeconfig, "HOME=" + logDir,
				config.EnvDomain + "=" + domain, config.EnvAPIKey + "=" + apiKey,
				config.EnvRecipient + "=" + recipient, config.EnvAPIBase + "=" + fake.APIBase(),
			},
		}
		r.args = append(r.args, "--metrics-secure=false", "--metrics-bind-address="+r.metricsAddr)
		r.start(t, bin)
		replicas = append(replicas, r)
	}

	// Create the objects while the chaos runs.
	chaosCtx, stopChaos := context.WithTimeout(ctx, 60*time.Second)
	defer stopChaos()
	// Blows land on the leader when the replicas' metrics say which one it
	// is (a standby has nothing in flight), else on either. A third of them
	// kill it (SIGKILL). A third freeze it (SIGSTOP) for twice the lease
	// duration: a stale leader that wakes up after a successor took over,
	// possibly between its claim and its send. A third freeze it and, while
	// it sleeps, roll the other (SIGTERM: it finishes its reconciles and
	// releases the Lease, as in a rollout): the frozen one may wake to a
	// free Lease and hold it again in the same process, after its successor
	// re-claimed and sent.
	type blows struct{ kills, freezes, rollouts, onLeader, exits int }
	// restartExited starts again the replicas that exited on their own, as
	// their Deployment would: a frozen leader gives up once it wakes to a
	// successor's valid Lease. It reports how many it started.
	restartExited := func() int {
		n := 0
		for _, r := range replicas {
			if r.exited() {
				r.start(t, bin)
				n++
			}
		}
		return n
	}
	chaos := make(chan blows, 1)
	go func() {
		var b blows
		defer func() { chaos <- b }()
		for chaosCtx.Err() == nil {
			rngMu.Lock()
			wait := time.Duration(2000+rng.IntN(4000)) * time.Millisecond
			i := rng.IntN(len(replicas))
			blow := rng.IntN(3)
			rngMu.Unlock()
			select {
			case <-chaosCtx.Done():
				return
			case <-time.After(wait):
			}
			b.exits += restartExited()
			if l := leader(replicas, "capmg-faults"); l >= 0 {
				i = l
				b.onLeader++
			}
			victim, other := replicas[i], replicas[1-i]
			switch blow {
			case 0:
				b.kills++
				victim.kill()
				victim.start(t, bin)
			case 1:
				b.freezes++
				victim.freeze(8 * time.Second)
			case 2:
				b.rollouts++
				// The other takes the Lease about a lease duration (4s)
				// into the freeze, and re-claims what the frozen one had
				// claimed once the settle time (5s) since those claims has
				// passed. It is stopped at 8s and started again only after
				// the frozen one wakes at 11s, so that the Lease is free
				// then.
				frozen := make(chan struct{})
				go func() {
					defer close(frozen)
					victim.freeze(11 * time.Second)
				}()
				time.Sleep(8 * time.Second)
				other.stop()
				<-frozen
				other.start(t, bin)
			}
		}
	}()
	// A failing test waits for the chaos to end: a blow under way when it
	// returns would start a replica after it.
	chaosOver := false
	defer func() {
		if !chaosOver {
			stopChaos()
			<-chaos
		}
	}()
	// Every third cluster has a control-plane machine: both kinds meet the
	// same faults through the one send path.
	objs := objects{ctx: ctx, t: t, c: c, ns: ns}
	machines := 0
	for i := range n {
		name := fmt.Sprintf("mc-%03d", i)
		objs.cluster(name, nil)
		if i%3 == 0 {
			objs.machine(name, name+"-cp", nil)
			machines++
		}
		if i%20 == 0 {
			time.Sleep(time.Second) // spread creations across the chaos window
		}
	}
	// Copies of objects with another one's send record, as GitOps or a
	// restore under a new name makes them: each must send its own email.
	copies := createCopies(ctx, t, objs, 20)
	<-chaosCtx.Done()
	b := <-chaos
	chaosOver = true
	b.exits += restartExited()
	t.Logf("chaos over: %d blows, %d of them on the leader its metrics named: %d manager kills, %d freezes, %d rollouts during a freeze; "+
		"%d times a replica held the Lease again after a break, %d times one exited on its own; "+
		"apiserver writes %d (refused %d, applied-then-failed %d); Mailgun sends %d",
		b.kills+b.freezes+b.rollouts, b.onLeader, b.kills, b.freezes, b.rollouts,
		countInLogs(t, replicaLogs, heldAgainLine), b.exits,
		proxy.Writes.Load(), proxy.Refused.Load(), proxy.Lost.Load(), sendCount(fake))

	// Faults keep going; every object must converge.
	converge(ctx, t, c, ns, "the chaos ended", 6*time.Minute)

	// A Mailgun outage: every send, lookup and domain check answers 503
	// while new objects arrive. Each costs a bounded number of calls (the
	// backoff doubles from 1s, capped at --mailgun-max-backoff), and gets
	// exactly one email once Mailgun is back.
	const outageObjects = 5
	sends0, lookups0 := fake.Requests()
	domains0 := fake.DomainRequests()
	outage.Store(true)
	for i := range outageObjects {
		name := fmt.Sprintf("outage-%d", i)
		objs.cluster(name, nil)
		objs.machine(name, name+"-cp", nil)
		machines++
	}
	time.Sleep(outageLen)
	outage.Store(false)
	// The delivery tracker keeps reading the events of the accepted
	// objects meanwhile; count only the new objects' lookups.
	sends1, lookups1 := fake.Requests()
	lookups, outageSendObjects := 0, 0
	for _, o := range listSendObjects(ctx, t, c, ns) {
		if strings.HasPrefix(o.name, "outage-") {
			lookups += fake.EventRequestsFor(o.annotations[infrav1.MessageIDAnnotation])
			outageSendObjects++
		}
	}
	domains := fake.DomainRequests() - domains0
	calls := sends1 - sends0 + lookups + domains
	t.Logf("during a %s Mailgun outage, %d new objects cost %d Mailgun calls (%d sends, %d event lookups, %d domain checks): %.1f each; "+
		"%d events requests in all, with the delivery tracker's reads",
		outageLen, outageSendObjects, calls, sends1-sends0, lookups, domains, float64(calls)/float64(outageSendObjects), lookups1-lookups0)
	// Waits of 1s, 2s, 4s, ... up to the cap: one call per wait that fits
	// in the outage, plus the first call and the domain check; twice that
	// leaves room for restarts of the leader.
	tries := 0
	for at, wait := time.Duration(0), time.Second; at <= outageLen; at, wait = at+wait, min(2*wait, chaosMaxBackoff) {
		tries++
	}
	if limit := 2 * outageSendObjects * (tries + 1); calls > limit {
		t.Errorf("%d Mailgun calls during the outage, want at most %d", calls, limit)
	}
	// An object's next try may be up to --mailgun-max-backoff away when
	// the outage ends, and as much again for each try that meets a fault.
	converge(ctx, t, c, ns, "the outage ended", 6*time.Minute)

	// Exactly one accepted email per object, of either kind, and it is the
	// one recorded.
	list := listSendObjects(ctx, t, c, ns)
	duplicates, lost, perKind := 0, 0, map[string]int{}
	for _, o := range list {
		perKind[o.kind]++
		var ids []string
		for _, m := range fake.MessagesWithVariable(o.variable, ns+"/"+o.name) {
			ids = append(ids, m.ID)
		}
		switch {
		case len(ids) == 0:
			lost++
			t.Errorf("%s %s: no email", o.kind, o.name)
		case len(ids) > 1:
			duplicates++
			t.Errorf("%s %s: %d emails: %v", o.kind, o.name, len(ids), ids)
		case o.messageID != ids[0] || o.annotations[infrav1.AcceptedMessageIDAnnotation] != ids[0]:
			t.Errorf("%s %s: recorded status %q / annotation %q, sent %q", o.kind, o.name, o.messageID, o.annotations[infrav1.AcceptedMessageIDAnnotation], ids[0])
		}
	}
	t.Logf("%d objects (%v): %d duplicates, %d lost; %d emails accepted in total; %d sends withheld by the fence",
		len(list), perKind, duplicates, lost, len(fake.Messages()), countInLogs(t, replicaLogs, withheldLine))
	if want := n + outageObjects + copies.clusters; perKind["MailgunCluster"] != want {
		t.Errorf("%d MailgunClusters, want %d", perKind["MailgunCluster"], want)
	}
	if want := machines + copies.machines; perKind["MailgunMachine"] != want {
		t.Errorf("%d MailgunMachines, want %d", perKind["MailgunMachine"], want)
	}

	// The API key appears nowhere: logs, events, status, metrics.
	checkKeyNowhere(ctx, t, c, ns, logDir, replicas, list)
}

// managerAndLogDir returns the manager binary to run and the directory,
// sub in FAULTS_LOG_DIR (or a temporary one), for its logs.
func managerAndLogDir(t *testing.T, sub string) (bin, logDir string) {
	t.Helper()
	bin = os.Getenv("MANAGER")
	if bin == "" {
		t.Fatal("MANAGER is not set; run through `make test-faults`")
	}
	logDir = t.TempDir()
	if dir := os.Getenv("FAULTS_LOG_DIR"); dir != "" {
		logDir = filepath.Join(dir, sub)
	}
	if err := os.MkdirAll(logDir, 0o750); err != nil {
		t.Fatal(err)
	}
	// The suite counts lines in this run's logs; a reused directory holds
	// an earlier run's (replicas append to their log file).
	old, err := filepath.Glob(filepath.Join(logDir, "replica*.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	return bin, logDir
}

// startControlPlane starts a test control plane of the test's own, with
// namespace ns.
func startControlPlane(ctx context.Context, t *testing.T, ns string) *testenv.Env {
	t.Helper()
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	return env
}

// scrape returns the text of the metrics a manager serves at addr; it
// gives up after 5s (a frozen manager accepts the connection and never
// answers).
func scrape(addr string) (string, error) {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/metrics")
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }() // read only: a close error cannot change what was read
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// converge waits until every object records its accepted email.
func converge(ctx context.Context, t *testing.T, c client.Client, ns, after string, timeout time.Duration) {
	t.Helper()
	var pending []string
	start := time.Now()
	poll.Until(ctx, timeout, 2*time.Second, func() (bool, string) {
		pending = notConverged(ctx, t, c, ns)
		return len(pending) == 0, ""
	})
	t.Logf("converged %v after %s (%d objects pending)", time.Since(start).Round(time.Second), after, len(pending))
	if len(pending) > 0 {
		t.Errorf("%d objects did not converge; first ones:\n%s", len(pending), strings.Join(pending[:min(10, len(pending))], "\n"))
	}
}

// copyCounts counts the copies createCopies made, per kind.
type copyCounts struct{ clusters, machines int }

// createCopies creates, for up to half of maxCopies objects of each kind
// accepted by then, an object of its own name that carries the original's
// send-record annotations, as GitOps or a restore under a new name makes
// them: each must send an email of its own. A MailgunMachine copy carries
// the annotations only: one that also carries spec.providerID names the
// original machine and sends nothing (TestCopiedMailgunMachineSendsNothing).
// A copied MailgunMachine belongs to the original's Cluster.
func createCopies(ctx context.Context, t *testing.T, objs objects, maxCopies int) copyCounts {
	t.Helper()
	var made copyCounts
	for _, o := range listSendObjects(ctx, t, objs.c, objs.ns) {
		if o.annotations[infrav1.AcceptedMessageIDAnnotation] == "" {
			continue
		}
		record := map[string]string{}
		for k, v := range o.annotations {
			if strings.HasPrefix(k, "mailgun.infrastructure.cluster.x-k8s.io/") {
				record[k] = v
			}
		}
		switch {
		case o.kind == "MailgunCluster" && made.clusters < maxCopies/2:
			objs.cluster("copy-of-"+o.name, record)
			made.clusters++
		case o.kind == "MailgunMachine" && made.machines < maxCopies/2:
			objs.machine(o.cluster, "copy-of-"+o.name, record)
			made.machines++
		}
	}
	t.Logf("created copies of accepted objects' send records: %d MailgunClusters, %d MailgunMachines", made.clusters, made.machines)
	return made
}

func sendCount(f *mailgunfake.Server) int {
	sends, _ := f.Requests()
	return sends
}

// notConverged describes the objects of either kind in ns that do not
// record an accepted email yet.
func notConverged(ctx context.Context, t *testing.T, c client.Client, ns string) []string {
	var out []string
	for _, o := range listSendObjects(ctx, t, c, ns) {
		if o.recorded() {
			continue
		}
		state := "no EmailSent condition"
		if c := meta.FindStatusCondition(o.conditions, infrav1.EmailSentCondition); c != nil {
			state = fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
		}
		out = append(out, o.kind+" "+o.name+": "+state)
	}
	return out
}

// countInLogs counts the occurrences of s in the log files that match
// pattern.
func countInLogs(t *testing.T, pattern, s string) int {
	files, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n += strings.Count(string(b), s)
	}
	return n
}

func checkKeyNowhere(ctx context.Context, t *testing.T, c client.Client, ns, logDir string, replicas []*replica, list []sendObject) {
	files, _ := filepath.Glob(filepath.Join(logDir, "replica*.log"))
	if len(files) == 0 {
		t.Errorf("no manager logs to check")
	}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if strings.Contains(string(b), apiKey) {
			t.Errorf("the API key appears in %s", f)
		}
	}
	events := &eventsv1.EventList{}
	if err := c.List(ctx, events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if strings.Contains(e.Note, apiKey) {
			t.Errorf("the API key appears in event %s", e.Name)
		}
	}
	for _, o := range list {
		for _, cond := range o.conditions {
			if strings.Contains(cond.Message, apiKey) {
				t.Errorf("the API key appears in a condition of %s %s", o.kind, o.name)
			}
		}
	}
	scraped := 0
	for _, r := range replicas {
		text, err := scrape(r.metricsAddr)
		if err != nil {
			continue
		}
		scraped++
		if strings.Contains(text, apiKey) {
			t.Errorf("the API key appears in the metrics of %s", r.name)
		}
		if !strings.Contains(text, "capmg_emails_sent_total") {
			t.Errorf("metrics of %s lack capmg_emails_sent_total", r.name)
		}
	}
	if scraped == 0 {
		t.Errorf("no replica's metrics could be scraped")
	}
}
