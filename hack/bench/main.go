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
// and a Mailgun fake with send latency, then does the same job with a bare
// client that only sends and writes the message ID, and compares. It also
// compares the manager's memory with 10k cached objects to a bare informer.
// Run it with `make bench`; it prints a Markdown report.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/apiproxy"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/config"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailgunfake"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/testenv"
)

const (
	domain    = "mg.bench.example.com"
	apiKey    = "key-bench"
	recipient = "requests@example.com"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "informer" {
		if err := runInformer(os.Args[2], os.Args[3]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	sizes := flag.String("n", "100,1000", "comma-separated numbers of MailgunClusters")
	latency := flag.Duration("latency", 20*time.Millisecond, "Mailgun send latency")
	concurrency := flag.Int("concurrency", 10, "reconcile concurrency of the manager and the bare client")
	rssObjects := flag.Int("rss-objects", 10000, "cached objects for the memory comparison; 0 skips it")
	manager := flag.String("manager", "bin/manager", "manager binary")
	flag.Parse()
	if err := run(*sizes, *latency, *concurrency, *rssObjects, *manager); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

type result struct {
	who          string
	n            int
	converge     time.Duration
	p50, p99     time.Duration
	writesPerObj float64
	peakRSSMiB   float64
}

func run(sizesFlag string, latency time.Duration, concurrency, rssObjects int, manager string) error {
	ctx := context.Background()
	env, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	fake := mailgunfake.Start(domain, apiKey)
	defer fake.Close()
	fake.SetSendLatency(latency)
	proxy, err := apiproxy.Start(env.Config, apiproxy.Options{})
	if err != nil {
		return err
	}
	defer proxy.Close()
	dir, err := os.MkdirTemp("", "capmg-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	kubeconfig, err := proxy.WriteKubeconfig(dir)
	if err != nil {
		return err
	}

	var results []result
	for _, f := range strings.Split(sizesFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return err
		}
		op, err := runOperator(ctx, env, proxy, fake, manager, kubeconfig, dir, n, concurrency)
		if err != nil {
			return err
		}
		bare, err := runBare(ctx, env, proxy, fake, n, concurrency)
		if err != nil {
			return err
		}
		results = append(results, op, bare)
	}
	var rssOp, rssBare float64
	if rssObjects > 0 {
		rssOp, rssBare, err = memory(ctx, env, manager, kubeconfig, dir, rssObjects)
		if err != nil {
			return err
		}
	}
	report(results, latency, concurrency, rssObjects, rssOp, rssBare)
	return nil
}

// runOperator runs the manager binary on n new MailgunClusters and measures
// until each has its message ID recorded.
func runOperator(ctx context.Context, env *testenv.Env, proxy *apiproxy.Proxy, fake *mailgunfake.Server,
	manager, kubeconfig, dir string, n, concurrency int) (result, error) {
	ns := fmt.Sprintf("bench-operator-%d", n)
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return result{}, err
	}
	cmd := exec.Command(manager, "--namespace="+ns, "--config-namespace=", fmt.Sprintf("--mailguncluster-concurrency=%d", concurrency),
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--delivery-poll-interval=1h", "--zap-log-level=error")
	cmd.Env = []string{"KUBECONFIG=" + kubeconfig, "HOME=" + dir,
		config.EnvDomain + "=" + domain, config.EnvAPIKey + "=" + apiKey, config.EnvRecipient + "=" + recipient, config.EnvAPIBase + "=" + fake.APIBase()}
	logFile, _ := os.Create(filepath.Join(dir, ns+".log"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	time.Sleep(2 * time.Second) // let the manager start its caches

	writesBefore := proxy.Writes.Load()
	created, recorded, start, err := createAndWait(ctx, env.Client, env.Config, ns, n, nil)
	if err != nil {
		return result{}, fmt.Errorf("operator run: %w (log %s)", err, logFile.Name())
	}
	r := summarise("operator", n, created, recorded, start)
	r.writesPerObj = float64(proxy.Writes.Load()-writesBefore) / float64(n)
	r.peakRSSMiB = peakRSS(cmd.Process.Pid)
	return r, nil
}

// runBare does the minimal job at the same concurrency: watch the objects,
// send each email, write its message ID into status. No crash safety, no
// conditions, no finalizer.
func runBare(ctx context.Context, env *testenv.Env, proxy *apiproxy.Proxy, fake *mailgunfake.Server, n, concurrency int) (result, error) {
	ns := fmt.Sprintf("bench-bare-%d", n)
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return result{}, err
	}
	pc, err := client.New(proxy.Config(), client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		return result{}, err
	}
	m := mailer.New(mailer.Settings{Domain: domain, APIKey: apiKey, Recipient: recipient, APIBase: fake.APIBase()}, 10*time.Second)
	work := make(chan *infrav1.MailgunCluster, n)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for mc := range work {
				id, err := m.Send(ctx, mailer.Request{MessageID: fmt.Sprintf("<%s@%s>", mc.UID, domain), Priority: string(mc.Spec.Priority),
					Body: mc.Spec.Request, Requester: mc.Spec.Requester, Object: ns + "/" + mc.Name, UID: string(mc.UID)})
				if err != nil {
					fmt.Fprintf(os.Stderr, "bare send: %v\n", err)
					continue
				}
				base := mc.DeepCopy()
				mc.Status.MessageID = id
				if err := pc.Status().Patch(ctx, mc, client.MergeFrom(base)); err != nil {
					fmt.Fprintf(os.Stderr, "bare status write: %v\n", err)
				}
			}
		}()
	}
	writesBefore := proxy.Writes.Load()
	created, recorded, start, err := createAndWait(ctx, env.Client, env.Config, ns, n, work)
	close(work)
	wg.Wait()
	if err != nil {
		return result{}, fmt.Errorf("bare run: %w", err)
	}
	r := summarise("bare client", n, created, recorded, start)
	r.writesPerObj = float64(proxy.Writes.Load()-writesBefore) / float64(n)
	return r, nil
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
		sem := make(chan struct{}, 20)
		var wg sync.WaitGroup
		for i := range n {
			sem <- struct{}{}
			wg.Add(1)
			go func(i int) {
				defer func() { <-sem; wg.Done() }()
				name := fmt.Sprintf("mc-%05d", i)
				cluster := testenv.ClusterFor(ns, name)
				if err := c.Create(ctx, cluster); err != nil {
					fmt.Fprintf(os.Stderr, "create: %v\n", err)
					return
				}
				mc := &infrav1.MailgunCluster{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: []metav1.OwnerReference{testenv.OwnerRef(cluster)}},
					Spec:       infrav1.MailgunClusterSpec{Priority: infrav1.PriorityUrgent, Request: "bench " + name, Requester: "ops@example.com"},
				}
				t := time.Now()
				if err := c.Create(ctx, mc); err != nil {
					fmt.Fprintf(os.Stderr, "create: %v\n", err)
					return
				}
				mu.Lock()
				created[name] = t
				mu.Unlock()
			}(i)
		}
		wg.Wait()
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
	sem := make(chan struct{}, 20)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			mc := &infrav1.MailgunCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("mc-%05d", i)},
				Spec: infrav1.MailgunClusterSpec{Priority: infrav1.PriorityUrgent, Request: "memory", Requester: "ops@example.com"}}
			if err := env.Client.Create(ctx, mc); err != nil {
				fmt.Fprintf(os.Stderr, "create: %v\n", err)
			}
		}(i)
	}
	wg.Wait()

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
		v := settledRSS(cmd.Process.Pid)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		rss = append(rss, v)
	}
	return rss[0], rss[1], nil
}

// runInformer is the bare informer: a controller-runtime cache of the
// namespace's MailgunClusters and nothing else.
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
func settledRSS(pid int) float64 {
	var last float64
	stable := 0
	for i := 0; i < 180 && stable < 10; i++ {
		time.Sleep(500 * time.Millisecond)
		v := procStatus(pid, "VmRSS:")
		if v > 0 && v-last < 0.5 {
			stable++
		} else {
			stable = 0
		}
		last = v
	}
	return last
}

func peakRSS(pid int) float64 { return procStatus(pid, "VmHWM:") }

// procStatus reads a kB field of /proc/<pid>/status, in MiB.
func procStatus(pid int, field string) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), field); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

func report(results []result, latency time.Duration, concurrency, rssObjects int, rssOp, rssBare float64) {
	fmt.Printf("Send latency %v, concurrency %d, %s.\n\n", latency, concurrency, machine())
	fmt.Println("| N | who | converge | emails/s | p50 create→recorded | p99 | apiserver writes/object | peak RSS |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range results {
		rss := "-"
		if r.peakRSSMiB > 0 {
			rss = fmt.Sprintf("%.0f MiB", r.peakRSSMiB)
		}
		fmt.Printf("| %d | %s | %.2fs | %.0f | %v | %v | %.2f | %s |\n", r.n, r.who, r.converge.Seconds(),
			float64(r.n)/r.converge.Seconds(), r.p50.Round(time.Millisecond), r.p99.Round(time.Millisecond), r.writesPerObj, rss)
	}
	fmt.Println()
	for i := 0; i+1 < len(results); i += 2 {
		fmt.Printf("- N=%d: the operator takes %.2f× the bare client's time to converge.\n", results[i].n,
			results[i].converge.Seconds()/results[i+1].converge.Seconds())
	}
	if rssObjects > 0 {
		fmt.Printf("- Memory with %d cached MailgunClusters: manager %.0f MiB, bare informer %.0f MiB (%.2f×).\n",
			rssObjects, rssOp, rssBare, rssOp/rssBare)
	}
}

func machine() string {
	return fmt.Sprintf("%d CPUs", goruntime.NumCPU())
}
