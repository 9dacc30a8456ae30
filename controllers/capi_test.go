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
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	capicluster "sigs.k8s.io/cluster-api/core/reconcilers/cluster"
	capiclusterclass "sigs.k8s.io/cluster-api/core/reconcilers/clusterclass"
	capimachine "sigs.k8s.io/cluster-api/core/reconcilers/machine"
	capimd "sigs.k8s.io/cluster-api/core/reconcilers/machinedeployment"
	capims "sigs.k8s.io/cluster-api/core/reconcilers/machineset"
	capitopologycluster "sigs.k8s.io/cluster-api/core/reconcilers/topology/cluster"
	capitopologymd "sigs.k8s.io/cluster-api/core/reconcilers/topology/machinedeployment"
	capitopologyms "sigs.k8s.io/cluster-api/core/reconcilers/topology/machineset"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/index"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/operator"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/logbuf"
)

// capiControllers says which of Cluster API's core controllers a test runs.
type capiControllers int

const (
	// capiClusters is the Cluster reconciler alone.
	capiClusters capiControllers = iota
	// capiMachines adds the MachineDeployment, MachineSet and Machine
	// reconcilers.
	capiMachines
	// capiTopology adds the ClusterClass and managed topology reconcilers
	// (Cluster, MachineDeployment and MachineSet), which Cluster API's
	// manager runs with its ClusterTopology feature gate. The gate itself
	// stays off in the test process (it is global): for topology Clusters
	// it only adds MachineSet preflight checks that hold Machines back
	// while the control plane's version differs from the topology's, and
	// the test's control plane is always at that version.
	capiTopology
)

// startClusterAPI runs Cluster API v1.14's own reconcilers (the core
// provider's, in-process) against the test control plane: its Cluster
// reconciler alone caches only the test's namespace; with more than
// capiClusters, all of them cache the whole cluster.
func (h *harness) startClusterAPI(which capiControllers) {
	h.t.Helper()
	// Cluster API's errors (e.g. a MachineDeployment it cannot roll out)
	// explain a test that waits in vain.
	capiLogs := &logbuf.Buffer{}
	h.t.Cleanup(func() {
		if h.t.Failed() {
			// The last lines, without their stack traces.
			lines := capiLogs.ErrorLines()
			lines = lines[max(0, len(lines)-20):]
			for i, l := range lines {
				if cut := strings.Index(l, `"errorVerbose"`); cut > 0 {
					lines[i] = l[:cut] + "…"
				}
			}
			h.t.Logf("Cluster API's last error lines:\n%s", strings.Join(lines, "\n"))
		}
	})
	// Cluster API's MachineSet and MachineDeployment reconcilers need
	// informers of the whole cluster (a namespaced cache's do not cast to
	// SharedIndexInformer); the Cluster reconciler alone keeps to the
	// test's namespace.
	cacheOptions := cache.Options{DefaultNamespaces: map[string]cache.Config{h.ns: {}}}
	if which > capiClusters {
		cacheOptions = cache.Options{}
	}
	scheme, err := operator.NewScheme()
	if err == nil {
		// The ClusterClass reconciler watches ExtensionConfigs.
		err = runtimev1.AddToScheme(scheme)
	}
	if err != nil {
		h.t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cacheOptions,
		Logger:                 zap.New(zap.WriteTo(capiLogs), zap.UseDevMode(true)).WithName("capi-core"),
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
	type reconciler interface {
		SetupWithManager(context.Context, ctrl.Manager, controller.Options) error
	}
	c, api := mgr.GetClient(), mgr.GetAPIReader()
	reconcilers := []reconciler{&capicluster.Reconciler{Client: c, APIReader: api, ClusterCache: cc, RemoteConnectionGracePeriod: 50 * time.Second}}
	if which >= capiMachines {
		reconcilers = append(reconcilers,
			&capimd.Reconciler{Client: c, APIReader: api},
			&capims.Reconciler{Client: c, APIReader: api, ClusterCache: cc},
			&capimachine.Reconciler{Client: c, APIReader: api, ClusterCache: cc, RemoteConditionsGracePeriod: 5 * time.Minute})
	}
	if which >= capiTopology {
		// The index the ClusterClass and topology reconcilers list
		// Clusters by.
		if err := index.ByClusterClassRef(ctx, mgr); err != nil {
			cancel()
			h.t.Fatalf("indexing Clusters by ClusterClass: %v", err)
		}
		reconcilers = append(reconcilers,
			&capiclusterclass.Reconciler{Client: c},
			&capitopologycluster.Reconciler{Client: c, APIReader: api, ClusterCache: cc},
			&capitopologymd.Reconciler{Client: c, APIReader: api},
			&capitopologyms.Reconciler{Client: c, APIReader: api})
	}
	for _, r := range reconcilers {
		if err := r.SetupWithManager(ctx, mgr, skip); err != nil {
			cancel()
			h.t.Fatalf("setting up Cluster API's %T: %v", r, err)
		}
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
	h.startClusterAPI(capiClusters)

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
	h.startClusterAPI(capiClusters)

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

// TestClusterAPIMachineDeploymentRequestsOneEmailPerMachine runs Cluster
// API's MachineDeployment, MachineSet, Machine and Cluster reconcilers
// beside the operator: a MachineDeployment of 3 whose machines are
// MailgunMachines gets one email per machine, with distinct provider IDs
// that Cluster API copies to its Machines, none holding the bootstrap
// data; the count holds over Cluster API's writes, a restart, scaling
// down and deleting the Cluster.
func TestClusterAPIMachineDeploymentRequestsOneEmailPerMachine(t *testing.T) {
	f := &machineFixture{harness: newHarness(t)}
	f.startManager()
	f.startClusterAPI(capiMachines)
	h := f.harness

	cluster := h.createCluster("prod")
	f.cluster = cluster
	if err := h.c.Create(h.ctx, newMailgunCluster(h.ns, "prod")); err != nil {
		t.Fatalf("creating MailgunCluster: %v", err)
	}
	for _, obj := range []client.Object{
		newBootstrapSecret(h.ns, "workers-bootstrap"),
		&infrav1.MailgunMachineTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "workers"},
			Spec: infrav1.MailgunMachineTemplateSpec{Template: infrav1.MailgunMachineTemplateResource{
				Spec: infrav1.MailgunMachineSpec{Priority: infrav1.PriorityUrgent, Request: "8 GiB, please."},
			}},
		},
	} {
		if err := h.c.Create(h.ctx, obj); err != nil {
			t.Fatalf("creating %T: %v", obj, err)
		}
	}
	md := workerDeployment(h.ns, 3, clusterv1.Bootstrap{DataSecretName: ptr.To("workers-bootstrap")})
	if err := h.c.Create(h.ctx, md); err != nil {
		t.Fatalf("creating MachineDeployment: %v", err)
	}

	machineEmails := h.machineEmailCount
	f.waitForProvisionedMachines(3, nil)
	if n := machineEmails(); n != 3 {
		t.Fatalf("%d machine emails for 3 Machines, want 3", n)
	}
	if n := len(h.fake.Messages()); n != 4 {
		t.Errorf("%d emails in all, want 4 (the cluster's and 3 machines')", n)
	}

	// A restart of the operator sends nothing more.
	h.stopManager()
	h.startManager()
	h.consistently(3*time.Second, "4 emails after a restart", func() (bool, string) {
		n := len(h.fake.Messages())
		return n == 4, fmt.Sprintf("%d emails", n)
	})

	// Scaling down deletes two machines and sends nothing.
	patchObj(h, md, func() { md.Spec.Replicas = ptr.To[int32](1) })
	f.waitForProvisionedMachines(1, nil)

	if err := h.c.Delete(h.ctx, cluster); err != nil {
		t.Fatalf("deleting the Cluster: %v", err)
	}
	h.eventually(90*time.Second, "the Cluster and its machines gone", func() (bool, string) {
		mms := &infrav1.MailgunMachineList{}
		if err := h.c.List(h.ctx, mms, client.InNamespace(h.ns)); err != nil {
			return false, err.Error()
		}
		errC := h.c.Get(h.ctx, client.ObjectKeyFromObject(cluster), &clusterv1.Cluster{})
		return len(mms.Items) == 0 && apierrors.IsNotFound(errC), fmt.Sprintf("%d MailgunMachines, Cluster: %v", len(mms.Items), errC)
	})
	if n := len(h.fake.Messages()); n != 4 {
		t.Errorf("%d emails after scaling down and deleting, want 4", n)
	}
	f.noBootstrapDataLeaked()
	h.noErrorLogged()
}

// TestClusterAPIBootstrapConfigRefWaitsForBootstrapData: a MachineDeployment
// whose machines' bootstrap data comes from a KubeadmConfigTemplate. Cluster
// API's MachineSet clones a KubeadmConfig per Machine; its MailgunMachine
// waits, first for the control plane, then for the bootstrap data, and is
// sent exactly once when the test, acting as the bootstrap provider, sets
// the config's data secret and Cluster API copies its name to the Machine.
func TestClusterAPIBootstrapConfigRefWaitsForBootstrapData(t *testing.T) {
	f := &machineFixture{harness: newHarness(t)}
	f.startManager()
	f.startClusterAPI(capiMachines)
	h := f.harness

	f.cluster = h.createCluster("prod")
	if err := h.c.Create(h.ctx, newMailgunCluster(h.ns, "prod")); err != nil {
		t.Fatalf("creating MailgunCluster: %v", err)
	}
	kubeadmConfigTemplate := &unstructured.Unstructured{}
	kubeadmConfigTemplate.SetGroupVersionKind(schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmConfigTemplate"})
	kubeadmConfigTemplate.SetNamespace(h.ns)
	kubeadmConfigTemplate.SetName("workers")
	if err := unstructured.SetNestedField(kubeadmConfigTemplate.Object, "cloud-config", "spec", "template", "spec", "format"); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []client.Object{
		kubeadmConfigTemplate,
		&infrav1.MailgunMachineTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "workers"},
			Spec: infrav1.MailgunMachineTemplateSpec{Template: infrav1.MailgunMachineTemplateResource{
				Spec: infrav1.MailgunMachineSpec{Priority: infrav1.PriorityUrgent},
			}},
		},
	} {
		if err := h.c.Create(h.ctx, obj); err != nil {
			t.Fatalf("creating %T: %v", obj, err)
		}
	}
	md := workerDeployment(h.ns, 1, clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
		APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "KubeadmConfigTemplate", Name: "workers",
	}})
	if err := h.c.Create(h.ctx, md); err != nil {
		t.Fatalf("creating MachineDeployment: %v", err)
	}

	// The one Machine Cluster API creates, its KubeadmConfig and
	// MailgunMachine, once the MailgunMachine's Ready reason is reason.
	waitFor := func(reason string) (*clusterv1.Machine, *unstructured.Unstructured) {
		t.Helper()
		var machine *clusterv1.Machine
		config := &unstructured.Unstructured{}
		config.SetGroupVersionKind(schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmConfig"})
		h.eventually(60*time.Second, "a Machine whose MailgunMachine waits with reason "+reason, func() (bool, string) {
			machines := &clusterv1.MachineList{}
			if err := h.c.List(h.ctx, machines, client.InNamespace(h.ns)); err != nil || len(machines.Items) != 1 {
				return false, fmt.Sprintf("%d Machines (%v)", len(machines.Items), err)
			}
			machine = &machines.Items[0]
			key := client.ObjectKey{Namespace: h.ns, Name: machine.Spec.Bootstrap.ConfigRef.Name}
			if err := h.c.Get(h.ctx, key, config); err != nil {
				return false, fmt.Sprintf("KubeadmConfig %s: %v", key.Name, err)
			}
			mm := &infrav1.MailgunMachine{}
			if err := h.c.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: machine.Spec.InfrastructureRef.Name}, mm); err != nil {
				return false, fmt.Sprintf("MailgunMachine %s: %v", machine.Spec.InfrastructureRef.Name, err)
			}
			c := conditions.Get(mm, infrav1.ReadyCondition)
			if c == nil {
				return false, "no Ready condition"
			}
			return c.Reason == reason, fmt.Sprintf("Ready=%s %s: %s", c.Status, c.Reason, c.Message)
		})
		return machine, config
	}
	noMachineEmail := func(when string) {
		t.Helper()
		h.consistently(2*time.Second, "no machine email "+when, func() (bool, string) {
			n := h.machineEmailCount()
			return n == 0, fmt.Sprintf("%d machine emails", n)
		})
	}

	// A worker's bootstrap data waits for the control plane.
	waitFor(infrav1.WaitingForControlPlaneInitializedReason)
	noMachineEmail("before the control plane is initialized")

	// The Cluster has no control-plane provider; the test says what one
	// would, and Cluster API's Cluster controller leaves it as it is.
	f.setClusterStatus(true, true)
	_, config := waitFor(infrav1.WaitingForBootstrapDataReason)
	noMachineEmail("before the bootstrap data exists")

	// The test acts as the kubeadm bootstrap provider: the data Secret, then
	// the config's status, which Cluster API copies to the Machine.
	secret := newBootstrapSecret(h.ns, config.GetName())
	if err := h.c.Create(h.ctx, secret); err != nil {
		t.Fatalf("creating the bootstrap Secret: %v", err)
	}
	if err := h.c.Status().Patch(h.ctx, config, dataSecretPatch(secret.Name)); err != nil {
		t.Fatalf("setting the KubeadmConfig's data secret: %v", err)
	}
	machine, _ := waitFor(infrav1.EmailAcceptedReason)
	emails := h.fake.MessagesWithVariable(mailer.VarMachine, h.ns+"/"+machine.Spec.InfrastructureRef.Name)
	if len(emails) != 1 {
		t.Fatalf("%d emails for the machine, want 1", len(emails))
	}
	if want := h.ns + "/" + secret.Name; !strings.Contains(emails[0].Text, want) {
		t.Errorf("the email does not name the bootstrap Secret %s:\n%s", want, emails[0].Text)
	}
	f.noBootstrapDataLeaked()
	h.noErrorLogged()
}

// workerDeployment is the MachineDeployment prod-workers of Cluster prod:
// replicas worker Machines whose infrastructure comes from the
// MailgunMachineTemplate workers and whose bootstrap data from bootstrap.
// What Cluster API's defaulting webhook would fill in is set by hand.
func workerDeployment(ns string, replicas int32, bootstrap clusterv1.Bootstrap) *clusterv1.MachineDeployment {
	selector := map[string]string{clusterv1.ClusterNameLabel: "prod", clusterv1.MachineDeploymentNameLabel: "prod-workers"}
	return &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod-workers", Labels: map[string]string{clusterv1.ClusterNameLabel: "prod"}},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: "prod",
			Replicas:    ptr.To(replicas),
			Selector:    metav1.LabelSelector{MatchLabels: selector},
			Rollout: clusterv1.MachineDeploymentRolloutSpec{Strategy: clusterv1.MachineDeploymentRolloutStrategy{
				Type: clusterv1.RollingUpdateMachineDeploymentStrategyType,
				RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{
					MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
				},
			}},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: selector},
				Spec: clusterv1.MachineSpec{
					ClusterName: "prod",
					Version:     "v1.36.0",
					Bootstrap:   bootstrap,
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: infrav1.GroupVersion.Group, Kind: "MailgunMachineTemplate", Name: "workers",
					},
				},
			},
		},
	}
}

// waitForProvisionedMachines waits until the test's namespace has n
// Machines, each Provisioned with the distinct provider ID of its
// MailgunMachine, whose email Mailgun accepted, and no other MailgunMachine,
// none of them named in replaced. It returns the MailgunMachines' names.
func (f *machineFixture) waitForProvisionedMachines(n int, replaced map[string]bool) map[string]bool {
	h := f.harness
	h.t.Helper()
	var names map[string]bool
	h.eventually(90*time.Second, fmt.Sprintf("%d provisioned Machines with accepted MailgunMachines", n), func() (bool, string) {
		machines := &clusterv1.MachineList{}
		if err := h.c.List(h.ctx, machines, client.InNamespace(h.ns)); err != nil {
			return false, err.Error()
		}
		mms := &infrav1.MailgunMachineList{}
		if err := h.c.List(h.ctx, mms, client.InNamespace(h.ns)); err != nil {
			return false, err.Error()
		}
		accepted, provisioned, ids, old := 0, 0, map[string]bool{}, 0
		byName := map[string]*infrav1.MailgunMachine{}
		names = map[string]bool{}
		for i := range mms.Items {
			mm := &mms.Items[i]
			byName[mm.Name], names[mm.Name] = mm, true
			if replaced[mm.Name] {
				old++
			}
			if mm.Status.MessageID != "" && mm.DeletionTimestamp.IsZero() {
				accepted++
			}
		}
		for _, m := range machines.Items {
			mm := byName[m.Spec.InfrastructureRef.Name]
			if m.Status.Phase == string(clusterv1.MachinePhaseProvisioned) && mm != nil && m.Spec.ProviderID == mm.Spec.ProviderID {
				provisioned++
				ids[m.Spec.ProviderID] = true
			}
		}
		return len(machines.Items) == n && len(mms.Items) == n && accepted == n && provisioned == n && len(ids) == n && old == 0,
			fmt.Sprintf("%d Machines (%d Provisioned with the MailgunMachine's provider ID, %d distinct), %d MailgunMachines (%d accepted, %d replaced), %d machine emails; %s",
				len(machines.Items), provisioned, len(ids), len(mms.Items), accepted, old, h.machineEmailCount(), f.rolloutConditions())
	})
	return names
}

// rolloutConditions are the conditions of the namespace's MachineDeployments
// and MachineSets: why Cluster API does not create or delete Machines.
func (f *machineFixture) rolloutConditions() string {
	var conds []string
	mds := &clusterv1.MachineDeploymentList{}
	_ = f.c.List(f.ctx, mds, client.InNamespace(f.ns))
	for _, md := range mds.Items {
		for _, c := range md.Status.Conditions {
			conds = append(conds, "MD "+md.Name+" "+c.Type+"="+string(c.Status)+" "+c.Reason+": "+c.Message)
		}
	}
	mss := &clusterv1.MachineSetList{}
	_ = f.c.List(f.ctx, mss, client.InNamespace(f.ns))
	for _, ms := range mss.Items {
		for _, c := range ms.Status.Conditions {
			conds = append(conds, "MS "+ms.Name+" "+c.Type+"="+string(c.Status)+" "+c.Reason+": "+c.Message)
		}
	}
	return strings.Join(conds, "; ")
}

// machineEmailCount is how many emails were sent for MailgunMachines.
func (h *harness) machineEmailCount() int {
	n := 0
	for _, m := range h.fake.Messages() {
		if m.Variables[mailer.VarMachine] != "" {
			n++
		}
	}
	return n
}
