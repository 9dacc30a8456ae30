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

// Command bench measures the operator against the minimal work: for N
// MailgunClusters it runs the manager binary against a real control plane
// and a Mailgun fake with send latency, then does the same job with bare
// clients that only send and make the writes they name (from the message ID
// in status alone up to the writes the exactly-once guarantee needs), each
// several times in rotating order, and compares the medians. It also
// compares the manager's memory with 10k cached objects to a bare informer.
// Run it with `make bench`; it prints a Markdown report.
package main

import (
	"bufio"
	"cmp"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/config"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/operator"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/apiproxy"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/mailgunfake"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/poll"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/proc"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/testenv"
)

// inFlight is how many creates or patches of its own the bench has in
// flight at a time.
const inFlight = 20

const (
	domain    = "mg.bench.example.com"
	apiKey    = "key-bench"
	recipient = "requests@example.com"
)

func main() {
	// The bench's own informers and clients log nothing worth keeping;
	// without a logger, controller-runtime prints a stack trace saying so.
	log.SetLogger(logr.Discard())
	if len(os.Args) > 1 && os.Args[1] == "informer" {
		// runInformer runs until it is killed; it returns only on failure.
		fmt.Fprintln(os.Stderr, runInformer(os.Args[2], os.Args[3]))
		os.Exit(1)
	}
	sizes := flag.String("n", "100,1000", "comma-separated numbers of MailgunClusters")
	latency := flag.Duration("latency", 20*time.Millisecond, "Mailgun send latency")
	concurrency := flag.Int("concurrency", 10, "concurrency of the bare clients (the operator runs with its default)")
	rssObjects := flag.Int("rss-objects", 10000, "cached objects for the memory comparison; 0 skips it")
	eventLag := flag.Duration("event-lag", 5*time.Minute, "how long the stand-in's events lag behind its sends (Mailgun documents up to about half an hour)")
	manager := flag.String("manager", "bin/manager", "manager binary")
	baseline := flag.String("baseline", "", "a second manager binary (an older build, say) whose rows run interleaved with -manager's, for a before/after comparison that runs on equal terms")
	runs := flag.Int("runs", 5, "runs of each contender per N; the report shows the median")
	flag.Parse()
	managers := []string{*manager}
	if *baseline != "" {
		managers = append(managers, *baseline)
	}
	if err := run(*sizes, *latency, *eventLag, *concurrency, *runs, *rssObjects, managers); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

type result struct {
	who string
	// operatorRun is the operatorRuns index of an operator's row, -1 for
	// a bare client's.
	operatorRun int
	// namespace holds the run's objects.
	namespace    string
	n            int
	converge     time.Duration
	p50, p99     time.Duration
	writesPerObj float64
	// conflictsPerObj are the writes the apiserver refused with 409.
	conflictsPerObj float64
	// requestsPerObj are the contender's requests to the apiserver, of
	// every verb and resource (reads, writes, events, watches started).
	requestsPerObj float64
	// mailgunPerObj are the requests to Mailgun: sends, lookups and domain
	// checks.
	mailgunPerObj float64
	// controlPlaneCPUPerObj is the CPU kube-apiserver and etcd spent per
	// object during the run above their idle rate (creates, the
	// contender's work and the measuring watch alike); contenderCPUPerObj
	// the manager's own, for the operator.
	controlPlaneCPUPerObj, contenderCPUPerObj time.Duration
	// window is how long the counters ran.
	window time.Duration
	// limited marks a bare client held to the default --mailgun-qps.
	limited    bool
	peakRSSMiB float64
}

// operatorRuns are the operator's rows: the shipped flags, and without the
// bound on requests to Mailgun, which the bare clients do not have either.
// Both track deliveries as shipped (polls every --delivery-poll-interval).
var operatorRuns = []struct {
	who  string
	args []string
}{
	{"operator, default flags", nil},
	{"operator, --mailgun-qps=0", []string{"--mailgun-qps=0"}},
}

// run measures managers[0] (and managers[1], the baseline, if given)
// against the bare clients.
func run(sizesFlag string, latency, eventLag time.Duration, concurrency, runs, rssObjects int, managers []string) error {
	ctx := context.Background()
	env, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	fake := mailgunfake.Start(domain, apiKey)
	defer fake.Close()
	fake.SetSendLatency(latency)
	fake.SetEventLag(eventLag)
	fake.SetAutoDeliver(true)
	proxy, err := apiproxy.Start(env.Config, apiproxy.Options{})
	if err != nil {
		return err
	}
	defer proxy.Close()
	dir, err := os.MkdirTemp("", "capmg-bench-")
	if err != nil {
		return err
	}
	defer func() {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintf(os.Stderr, "bench: removing %s: %v\n", dir, err)
		}
	}()
	kubeconfig, err := proxy.WriteKubeconfig(dir)
	if err != nil {
		return err
	}

	// The contenders: the operator and each bare client.
	type contender func(ctx context.Context, n, run int) (result, error)
	var contenders []contender
	for m, manager := range managers {
		label := ""
		if m > 0 {
			label = " (baseline)"
		}
		for i := range operatorRuns {
			op := operatorContender{manager: manager, label: label, which: i, id: len(contenders)}
			contenders = append(contenders, func(ctx context.Context, n, run int) (result, error) {
				return runOperator(ctx, env, proxy, fake, op, kubeconfig, dir, n, run)
			})
		}
	}
	for _, b := range bareClients {
		contenders = append(contenders, func(ctx context.Context, n, run int) (result, error) {
			return runBare(ctx, env, proxy, fake, b, n, run, concurrency)
		})
	}
	// An unmeasured warm-up: the first objects of a kind cost the apiserver
	// more than the rest (schema and validation set-up), which would count
	// against whichever contender runs first.
	warm, err := runBare(ctx, env, proxy, fake, bareClients[0], 50, -1, concurrency)
	if err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if err := cleanup(ctx, env.Client, warm.namespace); err != nil {
		return err
	}
	idle, err := idleCPU(ctx, proxy, fake, 30*time.Second)
	if err != nil {
		return err
	}

	var results []result
	for _, f := range strings.Split(sizesFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return err
		}
		// Every run takes the contenders in another order, so that none
		// always goes first or always follows the same one; the order is
		// seeded, so a bench run can be repeated as it was.
		byContender := make([][]result, len(contenders))
		for run := range runs {
			// The seed is two small counts; the order need not be unpredictable.
			order := rand.New(rand.NewPCG(uint64(n), uint64(run))).Perm(len(contenders)) //nolint:gosec // G404, G115: see above
			for _, i := range order {
				r, err := contenders[i](ctx, n, run)
				if err != nil {
					return err
				}
				r.controlPlaneCPUPerObj -= time.Duration(idle * float64(r.window) / float64(n))
				byContender[i] = append(byContender[i], r)
				// Later runs should not pay for the objects of earlier
				// ones (a bigger apiserver heap to garbage-collect).
				if err := cleanup(ctx, env.Client, r.namespace); err != nil {
					return err
				}
			}
		}
		for _, rs := range byContender {
			results = append(results, median(rs))
		}
	}
	var rssOp, rssBare float64
	if rssObjects > 0 {
		rssOp, rssBare, err = memory(ctx, env, managers[0], kubeconfig, dir, rssObjects)
		if err != nil {
			return err
		}
	}
	report(results, latency, eventLag, concurrency, runs, rssObjects, rssOp, rssBare, idle)
	return nil
}

// operatorContender is one of the operator's rows: a manager binary with
// operatorRuns[which]'s flags; label tells its rows from another binary's,
// and id its runs' namespaces.
type operatorContender struct {
	manager, label string
	which, id      int
}

// runOperator runs op's manager binary on n new MailgunClusters and
// measures until each has its message ID recorded.
func runOperator(ctx context.Context, env *testenv.Env, proxy *apiproxy.Proxy, fake *mailgunfake.Server,
	op operatorContender, kubeconfig, dir string, n, run int) (result, error) {
	ns := fmt.Sprintf("bench-operator-%d-%d-%d", op.id, n, run)
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return result{}, err
	}
	probes, err := proc.LoopbackAddr()
	if err != nil {
		return result{}, err
	}
	// Only the namespaces, the probe address and the log level differ from
	// the shipped Deployment: no metrics endpoint, settings from the
	// environment. Leader election is on, as the Deployment has it (one
	// replica, which takes the run's new Lease at once).
	cmd := exec.Command(op.manager, append([]string{"--namespace=" + ns, "--config-namespace=",
		"--leader-elect", "--leader-election-namespace=" + ns,
		"--metrics-bind-address=0", "--health-probe-bind-address=" + probes, "--zap-log-level=error"}, operatorRuns[op.which].args...)...)
	cmd.Env = []string{"KUBECONFIG=" + kubeconfig, "HOME=" + dir,
		config.EnvDomain + "=" + domain, config.EnvAPIKey + "=" + apiKey, config.EnvRecipient + "=" + recipient, config.EnvAPIBase + "=" + fake.APIBase()}
	logFile, _ := os.Create(filepath.Join(dir, ns+".log"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	// The clock starts once the manager is ready: this measures throughput,
	// not start-up.
	if err := waitReady(ctx, probes, 30*time.Second); err != nil {
		return result{}, fmt.Errorf("operator run: %w (log %s)", err, logFile.Name())
	}

	pid := cmd.Process.Pid
	before := countersOf(proxy, fake, pid)
	created, recorded, start, err := createAndWait(ctx, env.Client, env.Config, ns, n, nil)
	if err != nil {
		return result{}, fmt.Errorf("operator run: %w (log %s)", err, logFile.Name())
	}
	r := summarise(operatorRuns[op.which].who+op.label, n, created, recorded, start)
	r.operatorRun = op.which
	r.namespace = ns
	countersOf(proxy, fake, pid).since(before).per(n, &r)
	r.peakRSSMiB = peakRSS(pid)
	return r, nil
}

// A bareClient is the limit the operator is compared with: the same job
// at the same concurrency with nothing but the writes it names. Each is fed
// new objects by the measuring informer, so it pays for no watch of its own.
type bareClient struct {
	name string
	// claim writes the Message-Id into an annotation, locked to the version
	// read, before sending: what makes a crash or lost reply unable to cause
	// a second email.
	claim bool
	// annotate records the accepted ID in an annotation, which, unlike
	// status, survives clusterctl move.
	annotate bool
	// limited holds its sends to the operator's default --mailgun-qps and
	// --mailgun-burst: what the same writes cost the control plane when
	// spread over the rate limit's floor rather than made at full speed.
	limited bool
}

var bareClients = []bareClient{
	{name: "bare: status only"},
	{name: "bare: annotation + status", annotate: true},
	{name: "bare: claim + annotation + status", claim: true, annotate: true},
	{name: "bare: claim + annotation + status, default --mailgun-qps", claim: true, annotate: true, limited: true},
}

// waitReady waits until the manager's /readyz answers 200, i.e. its caches
// have synced and the Mailgun settings checked out.
func waitReady(ctx context.Context, addr string, timeout time.Duration) error {
	if ok, last := poll.Until(ctx, timeout, 100*time.Millisecond, func() (bool, string) {
		code, body := proc.HTTPGet(addr, "/readyz")
		return code == http.StatusOK, fmt.Sprintf("%d %s", code, body)
	}); !ok {
		return fmt.Errorf("manager not ready after %v: %s", timeout, last)
	}
	return nil
}

// runBare does the job with a bare client: send, then write the message ID
// into status (and initialization.provisioned, which Cluster API waits
// for), plus the writes b names. No conditions, no finalizer, no events,
// no retries.
func runBare(ctx context.Context, env *testenv.Env, proxy *apiproxy.Proxy, fake *mailgunfake.Server, b bareClient, n, run, concurrency int) (result, error) {
	ns := fmt.Sprintf("bench-bare-%d-%d-run%d", n, slices.Index(bareClients, b), run)
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return result{}, err
	}
	pc, err := client.New(proxy.Config(), client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		return result{}, err
	}
	var limit mailer.Limit
	if b.limited {
		o := operator.DefaultOptions()
		limit = mailer.Limit{QPS: o.MailgunQPS, Burst: o.MailgunBurst}
	}
	m := mailer.NewPool(10*time.Second, concurrency, limit).Client(mailer.Settings{Domain: domain, APIKey: apiKey, Recipient: recipient, APIBase: fake.APIBase()})
	work := make(chan *infrav1.MailgunCluster, n)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for mc := range work {
				if err := bareOne(ctx, pc, m, b, mc); err != nil {
					fmt.Fprintf(os.Stderr, "%s: %s: %v\n", b.name, mc.Name, err)
				}
			}
		}()
	}
	before := countersOf(proxy, fake, 0)
	created, recorded, start, err := createAndWait(ctx, env.Client, env.Config, ns, n, work)
	close(work)
	wg.Wait()
	if err != nil {
		return result{}, fmt.Errorf("%s: %w", b.name, err)
	}
	r := summarise(b.name, n, created, recorded, start)
	r.operatorRun = -1
	r.limited = b.limited
	r.namespace = ns
	countersOf(proxy, fake, 0).since(before).per(n, &r)
	return r, nil
}

// counters are the proxy's and the stand-in's running totals, and the CPU
// the control plane's processes and the manager (if any) have used.
type counters struct {
	// at is when they were read; window, in a difference, how long they
	// ran.
	at                            time.Time
	window                        time.Duration
	writes, conflicts, mailgun    int64
	requests                      int64
	controlPlaneCPU, contenderCPU time.Duration
}

// countersOf reads the totals; manager is the manager's pid, 0 for a bare
// client (whose CPU is the bench's own and not counted).
func countersOf(proxy *apiproxy.Proxy, fake *mailgunfake.Server, manager int) counters {
	sends, lookups := fake.Requests()
	c := counters{at: time.Now(), writes: proxy.Writes.Load(), conflicts: proxy.Conflicts.Load(), mailgun: int64(sends + lookups + fake.DomainRequests()),
		requests: proxy.Requests.Load()}
	for _, pid := range controlPlanePIDs() {
		c.controlPlaneCPU += processCPU(pid)
	}
	if manager != 0 {
		c.contenderCPU = processCPU(manager)
	}
	return c
}

func (c counters) since(before counters) counters {
	return counters{at: before.at, window: c.at.Sub(before.at), writes: c.writes - before.writes, conflicts: c.conflicts - before.conflicts, mailgun: c.mailgun - before.mailgun,
		requests: c.requests - before.requests, controlPlaneCPU: c.controlPlaneCPU - before.controlPlaneCPU, contenderCPU: c.contenderCPU - before.contenderCPU}
}

// per sets r's per-object figures from c, counted over n objects' run.
func (c counters) per(n int, r *result) {
	r.writesPerObj = float64(c.writes) / float64(n)
	r.conflictsPerObj = float64(c.conflicts) / float64(n)
	r.requestsPerObj = float64(c.requests) / float64(n)
	r.mailgunPerObj = float64(c.mailgun) / float64(n)
	r.controlPlaneCPUPerObj = c.controlPlaneCPU / time.Duration(n)
	r.contenderCPUPerObj = c.contenderCPU / time.Duration(n)
	r.window = c.window
}

// idleCPU measures the control plane's CPU use with no contender running,
// in CPU seconds per second: its own housekeeping, which every run pays
// for as long as it lasts and which is not the objects' cost.
func idleCPU(ctx context.Context, proxy *apiproxy.Proxy, fake *mailgunfake.Server, d time.Duration) (float64, error) {
	if pids := controlPlanePIDs(); len(pids) != 2 {
		return 0, fmt.Errorf("found %d kube-apiserver and etcd processes among the bench's children, want 2", len(pids))
	}
	before := countersOf(proxy, fake, 0)
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(d):
	}
	idle := countersOf(proxy, fake, 0).since(before)
	return float64(idle.controlPlaneCPU) / float64(idle.window), nil
}

// controlPlanePIDs are the bench's kube-apiserver and etcd: the children of
// this process with those names (envtest starts them).
func controlPlanePIDs() []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		name, ppid, _, ok := procStat(pid)
		if ok && ppid == os.Getpid() && (name == "kube-apiserver" || name == "etcd") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// processCPU is the user and system CPU time pid has used, all threads.
func processCPU(pid int) time.Duration {
	_, _, cpu, _ := procStat(pid)
	return cpu
}

// clockTick is Linux's USER_HZ, the unit of /proc/<pid>/stat's times: 100
// on every architecture Go supports there.
const clockTick = 10 * time.Millisecond

// procStat reads a process's name, parent and CPU time (utime + stime)
// from /proc/<pid>/stat.
func procStat(pid int) (name string, ppid int, cpu time.Duration, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, 0, false
	}
	// The name is in parentheses and may hold spaces; the fields after it
	// are space-separated: state, ppid, ..., utime (14th field), stime.
	open, end := strings.IndexByte(string(b), '('), strings.LastIndexByte(string(b), ')')
	if open < 0 || end < open {
		return "", 0, 0, false
	}
	fields := strings.Fields(string(b[end+1:]))
	if len(fields) < 13 {
		return "", 0, 0, false
	}
	ppid, _ = strconv.Atoi(fields[1])
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return string(b[open+1 : end]), ppid, time.Duration(utime+stime) * clockTick, true
}

func bareOne(ctx context.Context, c client.Client, m *mailer.Client, b bareClient, mc *infrav1.MailgunCluster) error {
	messageID := fmt.Sprintf("<%s@%s>", mc.UID, domain)
	if b.claim {
		base := mc.DeepCopy()
		mc.Annotations = map[string]string{infrav1.MessageIDAnnotation: messageID}
		if err := c.Patch(ctx, mc, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("claim: %w", err)
		}
	}
	id, err := m.Send(ctx, mailer.ClusterEmail{Priority: string(mc.Spec.Priority),
		Request: mc.Spec.Request, Requester: mc.Spec.Requester, Object: mc.Namespace + "/" + mc.Name, UID: string(mc.UID)}.Email(messageID))
	if err != nil {
		return fmt.Errorf("send: %w", err)
	}
	if b.annotate {
		base := mc.DeepCopy()
		if mc.Annotations == nil {
			mc.Annotations = map[string]string{}
		}
		mc.Annotations[infrav1.AcceptedMessageIDAnnotation] = id
		if err := c.Patch(ctx, mc, client.MergeFrom(base)); err != nil {
			return fmt.Errorf("annotation: %w", err)
		}
	}
	base := mc.DeepCopy()
	mc.Status.MessageID = id
	mc.Status.Initialization.Provisioned = ptr.To(true)
	if err := c.Status().Patch(ctx, mc, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	return nil
}

// createAndWait creates n owned MailgunClusters (20 at a time) and watches
// until each has status.messageID; new objects are also handed to work, if
// set. It returns per-object creation and recording times.
func createAndWait(ctx context.Context, c client.Client, cfg *rest.Config, ns string, n int, work chan<- *infrav1.MailgunCluster) (map[string]time.Time, map[string]time.Time, time.Time, error) {
	var mu sync.Mutex
	recorded := map[string]time.Time{}
	done := make(chan struct{})
	seen := map[string]bool{}
	observe := func(obj any) {
		mc, ok := obj.(*infrav1.MailgunCluster)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !seen[mc.Name] {
			seen[mc.Name] = true
			if work != nil {
				work <- mc.DeepCopy()
			}
		}
		if _, ok := recorded[mc.Name]; !ok && mc.Status.MessageID != "" {
			recorded[mc.Name] = time.Now()
			if len(recorded) == n {
				close(done)
			}
		}
	}
	// An informer, which re-establishes its watch when the apiserver ends it.
	informers, err := cache.New(cfg, cache.Options{Scheme: c.Scheme(), DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	inf, err := informers.GetInformer(ctx, &infrav1.MailgunCluster{})
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
	}); err != nil {
		return nil, nil, time.Time{}, err
	}
	informerCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = informers.Start(informerCtx) }()
	informers.WaitForCacheSync(informerCtx)

	created := map[string]time.Time{}
	start := time.Now()
	go func() {
		var g errgroup.Group
		g.SetLimit(inFlight)
		for i := range n {
			g.Go(func() error {
				name := fmt.Sprintf("mc-%05d", i)
				cluster := testenv.ClusterFor(ns, name)
				if err := c.Create(ctx, cluster); err != nil {
					fmt.Fprintf(os.Stderr, "create: %v\n", err)
					return nil
				}
				mc := &infrav1.MailgunCluster{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: []metav1.OwnerReference{testenv.OwnerRef(cluster)}},
					Spec:       infrav1.MailgunClusterSpec{Priority: infrav1.PriorityUrgent, Request: "bench " + name, Requester: "ops@example.com"},
				}
				t := time.Now()
				if err := c.Create(ctx, mc); err != nil {
					fmt.Fprintf(os.Stderr, "create: %v\n", err)
					return nil
				}
				mu.Lock()
				created[name] = t
				mu.Unlock()
				return nil
			})
		}
		_ = g.Wait()
	}()

	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		mu.Lock()
		defer mu.Unlock()
		return nil, nil, start, fmt.Errorf("only %d of %d recorded after 10 minutes", len(recorded), n)
	}
	mu.Lock()
	defer mu.Unlock()
	return maps(created), maps(recorded), start, nil
}

func maps(m map[string]time.Time) map[string]time.Time {
	out := make(map[string]time.Time, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// cleanup deletes a run's MailgunClusters, finalizers first (no manager is
// left to remove them), and Clusters.
func cleanup(ctx context.Context, c client.Client, ns string) error {
	list := &infrav1.MailgunClusterList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return err
	}
	var g errgroup.Group
	g.SetLimit(inFlight)
	for i := range list.Items {
		mc := &list.Items[i]
		if len(mc.Finalizers) == 0 {
			continue
		}
		g.Go(func() error {
			base := mc.DeepCopy()
			mc.Finalizers = nil
			return c.Patch(ctx, mc, client.MergeFrom(base))
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("removing finalizers in %s: %w", ns, err)
	}
	if err := c.DeleteAllOf(ctx, &infrav1.MailgunCluster{}, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("deleting MailgunClusters in %s: %w", ns, err)
	}
	if err := c.DeleteAllOf(ctx, &clusterv1.Cluster{}, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("deleting Clusters in %s: %w", ns, err)
	}
	return nil
}

// median returns the run with the median time to converge (its other
// figures are that run's).
func median(rs []result) result {
	sorted := slices.Clone(rs)
	slices.SortFunc(sorted, func(a, b result) int { return cmp.Compare(a.converge, b.converge) })
	return sorted[len(sorted)/2]
}

func summarise(who string, n int, created, recorded map[string]time.Time, start time.Time) result {
	var latencies []time.Duration
	var last time.Time
	for name, at := range recorded {
		if c, ok := created[name]; ok {
			latencies = append(latencies, at.Sub(c))
		}
		if at.After(last) {
			last = at
		}
	}
	slices.Sort(latencies)
	pct := func(p float64) time.Duration {
		if len(latencies) == 0 {
			return 0
		}
		return latencies[min(len(latencies)-1, int(p*float64(len(latencies))))]
	}
	return result{who: who, n: n, converge: last.Sub(start), p50: pct(0.50), p99: pct(0.99)}
}

// memory compares the manager's resident memory with 10k cached
// MailgunClusters to a bare informer caching the same objects.
func memory(ctx context.Context, env *testenv.Env, manager, kubeconfig, dir string, n int) (float64, float64, error) {
	ns := "bench-memory"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return 0, 0, err
	}
	var g errgroup.Group
	g.SetLimit(inFlight)
	for i := range n {
		g.Go(func() error {
			mc := &infrav1.MailgunCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("mc-%05d", i)},
				Spec: infrav1.MailgunClusterSpec{Priority: infrav1.PriorityUrgent, Request: "memory", Requester: "ops@example.com"}}
			if err := env.Client.Create(ctx, mc); err != nil {
				fmt.Fprintf(os.Stderr, "create: %v\n", err)
			}
			return nil
		})
	}
	_ = g.Wait()

	// The watch filter keeps the manager from reconciling (and writing):
	// it caches every object but acts on none.
	op := exec.Command(manager, "--namespace="+ns, "--config-namespace=", "--watch-filter=bench-none",
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--zap-log-level=error")
	op.Env = []string{"KUBECONFIG=" + kubeconfig, "HOME=" + dir}
	self, err := os.Executable()
	if err != nil {
		return 0, 0, err
	}
	bare := exec.Command(self, "informer", kubeconfig, ns)
	var rss []float64
	for _, cmd := range []*exec.Cmd{op, bare} {
		if err := cmd.Start(); err != nil {
			return 0, 0, err
		}
		v := settledRSS(ctx, cmd.Process.Pid)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		rss = append(rss, v)
	}
	return rss[0], rss[1], nil
}

// runInformer is the bare informer: a controller-runtime cache of the
// namespace's MailgunClusters and nothing else. It runs until the process is
// killed and returns only on failure.
func runInformer(kubeconfig, ns string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := infrav1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := cache.New(cfg, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		return err
	}
	ctx := context.Background()
	if _, err := c.GetInformer(ctx, &infrav1.MailgunCluster{}); err != nil {
		return err
	}
	go func() { _ = c.Start(ctx) }()
	c.WaitForCacheSync(ctx)
	select {}
}

// settledRSS waits until the process's resident memory stops growing (at
// most 90s) and returns it in MiB.
func settledRSS(ctx context.Context, pid int) float64 {
	var last float64
	stable := 0
	poll.Until(ctx, 90*time.Second, 500*time.Millisecond, func() (bool, string) {
		v := procStatus(pid, "VmRSS:")
		if v > 0 && v-last < 0.5 {
			stable++
		} else {
			stable = 0
		}
		last = v
		return stable >= 10, ""
	})
	return last
}

func peakRSS(pid int) float64 { return procStatus(pid, "VmHWM:") }

// procStatus reads a kB field of /proc/<pid>/status, in MiB.
func procStatus(pid int, field string) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	// Read only: a close error cannot change what was read.
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), field); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

func report(results []result, latency, eventLag time.Duration, concurrency, runs, rssObjects int, rssOp, rssBare, idle float64) {
	fmt.Printf("Send latency %v, events lagging %v, bare clients' concurrency %d, %s; each row is the run with the median time to converge of %d runs. "+
		"The apiserver + etcd CPU is net of their idle use (%.0f ms per second, measured before the runs).\n\n",
		latency, eventLag, concurrency, machine(), runs, idle*1000)
	fmt.Println("| N | who | converge | emails/s | p50 create→recorded | p99 | apiserver writes/object | conflicts/object | apiserver requests/object | Mailgun calls/object | apiserver + etcd CPU/object | manager CPU/object | peak RSS |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range results {
		rss, managerCPU := "-", "-"
		if r.operatorRun >= 0 {
			rss = fmt.Sprintf("%.0f MiB", r.peakRSSMiB)
			managerCPU = fmt.Sprintf("%.1f ms", ms(r.contenderCPUPerObj))
		}
		fmt.Printf("| %d | %s | %.2fs | %.0f | %v | %v | %.2f | %.2f | %.2f | %.2f | %.1f ms | %s | %s |\n", r.n, r.who, r.converge.Seconds(),
			float64(r.n)/r.converge.Seconds(), r.p50.Round(time.Millisecond), r.p99.Round(time.Millisecond), r.writesPerObj,
			r.conflictsPerObj, r.requestsPerObj, r.mailgunPerObj, ms(r.controlPlaneCPUPerObj), managerCPU, rss)
	}
	fmt.Println()
	for _, r := range results {
		switch r.operatorRun {
		case 0:
			// The shipped bound: after the burst, qps sends a second.
			o := operator.DefaultOptions()
			floor := float64(max(0, r.n-o.MailgunBurst)) / o.MailgunQPS
			fmt.Printf("- N=%d: %s takes %.2f× the floor of --mailgun-qps (%.1fs).\n", r.n, r.who, r.converge.Seconds()/floor, floor)
		case 1:
			for _, b := range results {
				if b.operatorRun < 0 && !b.limited && b.n == r.n {
					fmt.Printf("- N=%d: %s takes %.2f× the time of %s to converge.\n", r.n, r.who, r.converge.Seconds()/b.converge.Seconds(), b.who)
				}
			}
		}
	}
	if rssObjects > 0 {
		fmt.Printf("- Memory with %d cached MailgunClusters: manager %.0f MiB, bare informer %.0f MiB (%.2f×).\n",
			rssObjects, rssOp, rssBare, rssOp/rssBare)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func machine() string {
	return fmt.Sprintf("%d CPUs", goruntime.NumCPU())
}
