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
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	capicluster "sigs.k8s.io/cluster-api/core/reconcilers/cluster"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/operator"
)

// startClusterAPI runs Cluster API v1.14's own Cluster reconciler (the core
// provider's, in-process) against the test control plane, for the test's
// namespace.
func (h *harness) startClusterAPI() {
	h.t.Helper()
	scheme, err := operator.NewScheme()
	if err != nil {
		h.t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{h.ns: {}}},
		Logger:                 ctrl.Log.WithName("capi-core"),
	})
	if err != nil {
		h.t.Fatalf("creating Cluster API manager: %v", err)
	}
	ctx, cancel := context.WithCancel(h.ctx)
	skip := controller.Options{SkipNameValidation: ptr.To(true)}
	cc, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: mgr.GetClient(),
		Client:       clustercache.ClientOptions{UserAgent: "capmg-tests-capi-core"},
	}, skip)
	if err != nil {
		cancel()
		h.t.Fatalf("setting up the cluster cache: %v", err)
	}
	r := &capicluster.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: cc,
		RemoteConnectionGracePeriod: 50 * time.Second,
	}
	if err := r.SetupWithManager(ctx, mgr, skip); err != nil {
		cancel()
		h.t.Fatalf("setting up Cluster API's Cluster reconciler: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			h.t.Errorf("Cluster API manager: %v", err)
		}
	}()
	h.t.Cleanup(func() { cancel(); <-done })
}

func TestClusterAPICoreDrivesTheProvider(t *testing.T) {
	h := newHarness(t)
	h.startManager()
	h.startClusterAPI()

	// Applied as a user would: no owner reference, no labels.
	cluster := h.createCluster("capi")
	if err := h.c.Create(h.ctx, newMailgunCluster(h.ns, "capi")); err != nil {
		t.Fatalf("creating MailgunCluster: %v", err)
	}

	mc := h.waitForAccepted("capi", 30*time.Second)
	if mc.Labels[clusterv1.ClusterNameLabel] != "capi" {
		t.Errorf("Cluster API did not label the MailgunCluster with its cluster: %v", mc.Labels)
	}
	owned := false
	for _, ref := range mc.OwnerReferences {
		owned = owned || (ref.Kind == "Cluster" && ref.Name == "capi" && ref.UID == cluster.UID)
	}
	if !owned {
		t.Errorf("Cluster API did not set the owner reference: %v", mc.OwnerReferences)
	}
	h.eventually(30*time.Second, "the Cluster to see its infrastructure provisioned", func() (bool, string) {
		got := &clusterv1.Cluster{}
		if err := h.c.Get(h.ctx, client.ObjectKeyFromObject(cluster), got); err != nil {
			return false, err.Error()
		}
		c := conditions.Get(got, clusterv1.ClusterInfrastructureReadyCondition)
		provisioned := ptr.Deref(got.Status.Initialization.InfrastructureProvisioned, false)
		return provisioned && c != nil && c.Status == "True",
			fmt.Sprintf("infrastructureProvisioned=%v InfrastructureReady=%+v", provisioned, c)
	})
	if n := len(h.emailsFor("capi")); n != 1 {
		t.Errorf("%d emails, want 1", n)
	}

	// Deleting the Cluster deletes the MailgunCluster, through our finalizer.
	if err := h.c.Delete(h.ctx, cluster); err != nil {
		t.Fatalf("deleting Cluster: %v", err)
	}
	h.eventually(60*time.Second, "the Cluster and MailgunCluster to be gone", func() (bool, string) {
		errC := h.c.Get(h.ctx, client.ObjectKeyFromObject(cluster), &clusterv1.Cluster{})
		errM := h.c.Get(h.ctx, client.ObjectKeyFromObject(mc), &infrav1.MailgunCluster{})
		return apierrors.IsNotFound(errC) && apierrors.IsNotFound(errM), fmt.Sprintf("cluster: %v, mailguncluster: %v", errC, errM)
	})
	if n := len(h.emailsFor("capi")); n != 1 {
		t.Errorf("%d emails after deletion, want 1", n)
	}
	// Create, Cluster API's own writes, delete: all normal operation.
	h.noErrorLogged()
}

func TestClusterAPIPausedClusterStopsTheProvider(t *testing.T) {
	h := newHarness(t)
	h.startManager()
	h.startClusterAPI()

	cluster := h.createCluster("capi-paused", func(c *clusterv1.Cluster) { c.Spec.Paused = ptr.To(true) })
	if err := h.c.Create(h.ctx, newMailgunCluster(h.ns, "capi-paused")); err != nil {
		t.Fatalf("creating MailgunCluster: %v", err)
	}
	// A paused Cluster is not reconciled by Cluster API either, so no owner
	// reference appears; unpausing lets both proceed.
	h.consistently(2*time.Second, "no email while the Cluster is paused", func() (bool, string) {
		return len(h.fake.Messages()) == 0, "an email was sent"
	})
	patchObj(h, cluster, func() { cluster.Spec.Paused = ptr.To(false) })
	h.waitForAccepted("capi-paused", 30*time.Second)

	// Pausing again stops us: the Paused condition turns True.
	patchObj(h, cluster, func() { cluster.Spec.Paused = ptr.To(true) })
	h.eventually(20*time.Second, "Paused=True on the MailgunCluster", func() (bool, string) {
		got := h.get("capi-paused")
		return conditions.IsTrue(got, infrav1.PausedCondition), fmt.Sprintf("%+v", got.Status.Conditions)
	})
}
