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
	"flag"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/config"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/operator"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/logbuf"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/mailgunfake"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/poll"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/testenv"
)

const (
	testDomain    = "mg.example.com"
	testAPIKey    = "key-test-5f3c9a0e7b2d4c1a-do-not-log" //nolint:gosec // G101: a made-up key for the Mailgun fake
	testRecipient = "capi-requests@example.com"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// make test-unit: only the tests that need no control plane run;
		// newHarness skips the others.
		os.Exit(m.Run())
	}
	var err error
	env, err = testenv.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting test control plane: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping test control plane: %v\n", err)
	}
	os.Exit(code)
}

// harness is one test's namespace, Mailgun fake and manager.
type harness struct {
	t    *testing.T
	ctx  context.Context
	c    client.Client
	ns   string
	fake *mailgunfake.Server
	// env is the manager's environment; tests change it before starting it.
	env  map[string]string
	logs *logbuf.Buffer
	// registry holds the metrics of the last manager started.
	registry *prometheus.Registry
	// mailgunDown lets fault functions fail until a test flips it.
	mailgunDown atomic.Bool

	stop func()
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	if env == nil {
		t.Skip("needs the test control plane: run by make test, not make test-unit")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	h := &harness{
		t:    t,
		ctx:  ctx,
		c:    env.Client,
		ns:   "test-" + rand.String(6),
		fake: mailgunfake.Start(testDomain, testAPIKey),
		logs: &logbuf.Buffer{},
	}
	t.Cleanup(h.fake.Close)
	h.env = map[string]string{
		config.EnvDomain:    testDomain,
		config.EnvAPIKey:    testAPIKey,
		config.EnvRecipient: testRecipient,
		config.EnvAPIBase:   h.fake.APIBase(),
	}
	if err := h.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: h.ns}}); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("manager logs:\n%s", h.logs.String())
		}
		if strings.Contains(h.logs.String(), testAPIKey) {
			t.Errorf("the manager logged the Mailgun API key")
		}
	})
	return h
}

// options are the manager options the tests use: short timings, its own
// namespace, its own metrics registry.
func (h *harness) options() operator.Options {
	o := operator.DefaultOptions()
	o.MetricsBindAddress = "0"
	o.HealthProbeBindAddress = "0"
	o.WatchNamespace = h.ns
	o.ConfigNamespace = h.ns
	o.Concurrency = 4
	o.MailgunTimeout = 500 * time.Millisecond
	o.SettleTime = 2 * time.Second
	o.RecheckInterval = time.Second
	o.DeliveryPollInterval = 200 * time.Millisecond
	o.DeliveryTrackingTimeout = time.Minute
	o.CredentialsCheckInterval = 500 * time.Millisecond
	o.Getenv = func(k string) string { return h.env[k] }
	h.registry = prometheus.NewRegistry()
	o.MetricsRegistry = h.registry
	o.SkipNameValidation = true
	// V(4) shows the send protocol's steps. Not V(5): controller-runtime
	// v0.24's priority queue then dumps its items every 10s while another
	// goroutine changes them, a data race the race detector reports.
	logger := zap.New(zap.WriteTo(h.logs), zap.UseDevMode(true), zap.Level(zapcore.Level(-4)))
	o.Logger = &logger
	return o
}

// startManager runs a manager until the test ends or it is stopped, and
// returns its stop function; stopManager stops the last one started.
func (h *harness) startManager(mutate ...func(*operator.Options)) (stop func()) {
	h.t.Helper()
	o := h.options()
	for _, m := range mutate {
		m(&o)
	}
	stop = testenv.StartOperator(h.ctx, h.t, "controllers suite", env.Config, o)
	h.stop = stop
	return stop
}

func (h *harness) stopManager() {
	if h.stop != nil {
		h.stop()
	}
}

// createCluster creates a Cluster API Cluster whose infrastructureRef names
// a MailgunCluster of the same name.
func (h *harness) createCluster(name string, mutate ...func(*clusterv1.Cluster)) *clusterv1.Cluster {
	h.t.Helper()
	cluster := testenv.ClusterFor(h.ns, name)
	for _, m := range mutate {
		m(cluster)
	}
	if err := h.c.Create(h.ctx, cluster); err != nil {
		h.t.Fatalf("creating Cluster: %v", err)
	}
	return cluster
}

func newMailgunCluster(ns, name string) *infrav1.MailgunCluster {
	return &infrav1.MailgunCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: infrav1.MailgunClusterSpec{
			Priority:  infrav1.PriorityUrgent,
			Request:   "Three control plane nodes, please.",
			Requester: "alice@example.com",
		},
	}
}

// ownedBy sets the owner reference Cluster API's Cluster controller sets.
func ownedBy(mc *infrav1.MailgunCluster, cluster *clusterv1.Cluster) {
	mc.OwnerReferences = append(mc.OwnerReferences, testenv.OwnerRef(cluster))
}

// createOwned creates a Cluster and its MailgunCluster, owned as Cluster
// API would own it.
func (h *harness) createOwned(name string, mutate ...func(*infrav1.MailgunCluster)) (*clusterv1.Cluster, *infrav1.MailgunCluster) {
	h.t.Helper()
	cluster := h.createCluster(name)
	mc := newMailgunCluster(h.ns, name)
	ownedBy(mc, cluster)
	for _, m := range mutate {
		m(mc)
	}
	if err := h.c.Create(h.ctx, mc); err != nil {
		h.t.Fatalf("creating MailgunCluster: %v", err)
	}
	return cluster, mc
}

func (h *harness) get(name string) *infrav1.MailgunCluster {
	h.t.Helper()
	mc := &infrav1.MailgunCluster{}
	if err := h.c.Get(h.ctx, types.NamespacedName{Namespace: h.ns, Name: name}, mc); err != nil {
		h.t.Fatalf("getting MailgunCluster %s: %v", name, err)
	}
	return mc
}

// eventually polls cond every 100ms until it holds or timeout passes.
func (h *harness) eventually(timeout time.Duration, what string, cond func() (bool, string)) {
	h.t.Helper()
	if ok, last := poll.Until(h.ctx, timeout, 100*time.Millisecond, cond); !ok {
		h.t.Fatalf("timed out after %v waiting for %s; last state: %s", timeout, what, last)
	}
}

// waitForReason waits until the EmailSent condition of the MailgunCluster
// name has reason.
func (h *harness) waitForReason(name, reason string, timeout time.Duration) *infrav1.MailgunCluster {
	h.t.Helper()
	return kindHarness{harness: h, kind: mailgunClusterKind}.waitForSendReason(name, reason, timeout).(*infrav1.MailgunCluster)
}

// waitForAccepted waits until the MailgunCluster records an accepted email.
func (h *harness) waitForAccepted(name string, timeout time.Duration) *infrav1.MailgunCluster {
	h.t.Helper()
	mc := h.waitForReason(name, infrav1.EmailAcceptedReason, timeout)
	h.eventually(timeout, "status.messageID on "+name, func() (bool, string) {
		mc = h.get(name)
		return mc.Status.MessageID != "", fmt.Sprintf("status %+v", mc.Status)
	})
	return mc
}

// failWhileMailgunDown makes the fake answer every request (sends, event
// lookups, domain checks) with 503 while h.mailgunDown is set.
func (h *harness) failWhileMailgunDown() {
	h.fake.SetFaultFunc(func(string) *mailgunfake.Fault {
		if h.mailgunDown.Load() {
			f := mailgunfake.StatusFault(503, "maintenance")
			return &f
		}
		return nil
	})
}

// noErrorLogged fails the test for every error-level line the manager
// logged: normal operation logs none.
func (h *harness) noErrorLogged() {
	h.t.Helper()
	for _, line := range h.logs.ErrorLines() {
		h.t.Errorf("the manager logged an error: %s", line)
	}
}

// emailsFor returns the accepted emails for a MailgunCluster, found by the
// object variable every request carries.
func (h *harness) emailsFor(name string) []mailgunfake.Message {
	return h.fake.MessagesWithVariable(mailer.VarCluster, h.ns+"/"+name)
}

// consistently checks cond holds every 100ms for d.
func (h *harness) consistently(d time.Duration, what string, cond func() (bool, string)) {
	h.t.Helper()
	stopped, state := poll.Until(h.ctx, d, 100*time.Millisecond, func() (bool, string) {
		ok, state := cond()
		return !ok, state
	})
	if stopped {
		h.t.Fatalf("expected %s to hold for %v; it stopped: %s", what, d, state)
	}
}

func (h *harness) events(name string) []eventsv1.Event {
	h.t.Helper()
	list := &eventsv1.EventList{}
	if err := h.c.List(h.ctx, list, client.InNamespace(h.ns)); err != nil {
		h.t.Fatalf("listing events: %v", err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Regarding.Kind == "MailgunCluster" {
			out = append(out, e)
		}
	}
	return out
}

// metric returns the value of a counter or the sample count of a histogram
// in the last manager's registry, summed over series matching labels.
func (h *harness) metric(name string, labels map[string]string) float64 {
	h.t.Helper()
	families, err := h.registry.Gather()
	if err != nil {
		h.t.Fatalf("gathering metrics: %v", err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}
