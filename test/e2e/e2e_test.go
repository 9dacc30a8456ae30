//go:build e2e

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

// Package e2e installs the operator the way a platform team does, with real
// OLM: catalog → CatalogSource → OperatorGroup → Subscription → InstallPlan
// → CSV, then configures Mailgun, requests a cluster, and upgrades. Run it
// with `make e2e`.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/bundle"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/config"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailgunfake"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/manifests"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/operator"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/proc"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/testenv"
)

const (
	pkg         = "cluster-api-provider-mailgun"
	olmNS       = "olm"
	operatorNS  = "capmg-system"
	userNS      = "team-a"
	deployment  = "capmg-controller-manager"
	mgDomain    = "mg.e2e.example.com"
	mgAPIKey    = "key-e2e-0b5c3f1a9d7e"
	mgRecipient = "infra-requests@example.com"
)

// binaries are built by `make e2e` and passed in the environment.
func binary(t *testing.T, env string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		t.Fatalf("%s is not set; run the test through `make e2e`", env)
	}
	return p
}

type suite struct {
	t       *testing.T
	ctx     context.Context
	env     *testenv.Env
	c       client.Client
	logDir  string
	procs   []*proc.Proc
	kubelet *kubelet
	fake    *mailgunfake.Server
	opm     string
}

func TestInstallFromOLMCatalog(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	s := &suite{t: t, ctx: ctx, opm: binary(t, "OPM")}
	s.logDir = os.Getenv("E2E_LOG_DIR")
	if s.logDir == "" {
		s.logDir = t.TempDir()
	}
	if err := os.MkdirAll(s.logDir, 0o755); err != nil {
		t.Fatal(err)
	}

	// A control plane with OLM's CRDs and Cluster API's Cluster CRD, but not
	// ours: OLM installs those from the bundle.
	env, err := testenv.StartWith(testenv.Options{
		WithoutProviderCRDs: true,
		CRDDirectoryPaths:   []string{os.Getenv("OLM_CRDS")},
	})
	if err != nil {
		t.Fatalf("starting control plane: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	s.env = env
	scheme := env.Client.Scheme()
	for _, add := range []func(*runtime.Scheme) error{v1alpha1.AddToScheme, operatorsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	s.c, err = client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(s.logDir, "admin.kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{olmNS, operatorNS, userNS} {
		s.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}

	// OLM's two operators, out-of-cluster.
	olmEnv := []string{"KUBECONFIG=" + kubeconfig, "HOME=" + s.logDir, "PATH=" + os.Getenv("PATH")}
	s.procs = append(s.procs,
		proc.Start(t, s.logDir, "olm", binary(t, "OLM_OPERATOR"),
			[]string{"--namespace=" + olmNS, "--writeStatusName=", "--writePackageServerStatusName="}, olmEnv),
		proc.Start(t, s.logDir, "catalog", binary(t, "OLM_CATALOG_OPERATOR"),
			[]string{"--namespace=" + olmNS, "--writeStatusName=", "--configmapServerImage=unused", "--opmImage=unused", "--util-image=unused"}, olmEnv))

	// The catalog, served by opm on loopback.
	v1Catalog := s.renderCatalog("catalog-v1", []bundleRef{{dir: filepath.Join(env.RepoRoot, "bundle")}})
	catalogAddr := s.serveCatalog("opm-v1", v1Catalog)

	s.fake = mailgunfake.Start(mgDomain, mgAPIKey)
	t.Cleanup(s.fake.Close)

	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	s.kubelet = &kubelet{
		t: t, c: s.c, cs: cs, restConfig: env.Config,
		key:        types.NamespacedName{Namespace: operatorNS, Name: deployment},
		managerBin: binary(t, "MANAGER"), logDir: s.logDir,
	}
	kubeletCtx, stopKubelet := context.WithCancel(ctx)
	kubeletDone := make(chan struct{})
	go func() { defer close(kubeletDone); s.kubelet.run(kubeletCtx) }()
	t.Cleanup(func() { stopKubelet(); <-kubeletDone })

	// Each step needs the previous one; stop at the first failure.
	for _, step := range []struct {
		name string
		run  func()
	}{
		{"install from the catalog", func() { s.install(catalogAddr) }},
		{"request a cluster", func() { s.requestCluster("first") }},
		{"upgrade keeps user-owned settings and sends no second email", s.upgrade},
		{"no permission errors", s.checkNoPermissionErrors},
	} {
		if !t.Run(step.name, func(t *testing.T) { s.t = t; step.run() }) {
			s.t = t
			t.FailNow()
		}
		s.t = t
	}
}

// install subscribes and waits for OLM to install the operator.
func (s *suite) install(catalogAddr string) {
	t := s.t
	s.create(&v1alpha1.CatalogSource{
		ObjectMeta: metav1.ObjectMeta{Namespace: olmNS, Name: "capi-mailgun"},
		Spec: v1alpha1.CatalogSourceSpec{
			SourceType: v1alpha1.SourceTypeGrpc, Address: catalogAddr,
			DisplayName: "Cluster API Provider Mailgun (e2e)", Publisher: "e2e",
		},
	})
	s.create(&operatorsv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: "capmg"}})
	s.create(&v1alpha1.Subscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: pkg},
		Spec: &v1alpha1.SubscriptionSpec{
			CatalogSource: "capi-mailgun", CatalogSourceNamespace: olmNS,
			Package: pkg, Channel: "stable", InstallPlanApproval: v1alpha1.ApprovalAutomatic,
		},
	})

	s.waitForCSV(pkg+".v0.1.0", 5*time.Minute)
	s.waitInstallPlansComplete()

	// Everything the bundle declares exists.
	for _, obj := range []client.Object{
		&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "mailgunclusters.infrastructure.cluster.x-k8s.io"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: deployment}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: deployment}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: config.DefaultSecretName}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: config.DefaultConfigMapName}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: "capmg-controller-manager-metrics-service"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "capmg-mailguncluster-editor-role"}},
	} {
		if err := s.c.Get(s.ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Errorf("%T %s not installed: %v", obj, client.ObjectKeyFromObject(obj), err)
		}
	}
	roles := &rbacv1.RoleList{}
	if err := s.c.List(s.ctx, roles, client.InNamespace(operatorNS)); err != nil || len(roles.Items) == 0 {
		t.Errorf("OLM created no namespaced Role for the operator (err %v)", err)
	}
}

// requestCluster fills in the shipped Mailgun settings, applies the sample
// Cluster and MailgunCluster, and checks the one email.
func (s *suite) requestCluster(name string) {
	t := s.t
	secret := &corev1.Secret{}
	s.get(types.NamespacedName{Namespace: operatorNS, Name: config.DefaultSecretName}, secret)
	secret.StringData = map[string]string{config.SecretAPIKeyKey: mgAPIKey}
	s.update(secret)
	cm := &corev1.ConfigMap{}
	s.get(types.NamespacedName{Namespace: operatorNS, Name: config.DefaultConfigMapName}, cm)
	cm.Data = map[string]string{
		config.ConfigMapDomainKey: mgDomain, config.ConfigMapRecipientKey: mgRecipient,
		config.ConfigMapAPIBaseKey: s.fake.APIBase(),
	}
	s.update(cm)

	mc := s.applySample(name)
	got := s.waitForEmail(mc)
	emails := s.emailsFor(mc)
	if len(emails) != 1 {
		t.Fatalf("%d emails for %s, want exactly 1", len(emails), name)
	}
	e := emails[0]
	if e.Subject != "[Urgent] New Cluster requested" || e.To[0] != mgRecipient || e.ReplyTo != "platform-team@example.com" ||
		!strings.Contains(e.Text, "A small cluster for the payments team") {
		t.Errorf("email fields wrong: %+v", e)
	}
	if got.Status.MessageID != e.ID {
		t.Errorf("status.messageID = %q, want %q", got.Status.MessageID, e.ID)
	}
}

// upgrade moves the settings to user-owned objects named in the
// Subscription, publishes v0.1.1 (replacing v0.1.0) in the catalog, and
// checks the upgrade keeps the operator working without resending.
func (s *suite) upgrade() {
	t := s.t
	s.create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: "my-mailgun-credentials"},
		StringData: map[string]string{config.SecretAPIKeyKey: mgAPIKey},
	})
	s.create(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: "my-mailgun-config"},
		Data: map[string]string{
			config.ConfigMapDomainKey: mgDomain, config.ConfigMapRecipientKey: mgRecipient,
			config.ConfigMapAPIBaseKey: s.fake.APIBase(),
		},
	})
	sub := &v1alpha1.Subscription{}
	s.get(types.NamespacedName{Namespace: operatorNS, Name: pkg}, sub)
	sub.Spec.Config = &v1alpha1.SubscriptionConfig{Env: []corev1.EnvVar{
		{Name: operator.EnvSecretName, Value: "my-mailgun-credentials"},
		{Name: operator.EnvConfigMapName, Value: "my-mailgun-config"},
	}}
	s.update(sub)
	s.waitForDeploymentEnv(operator.EnvSecretName, "my-mailgun-credentials")

	// Publish v0.1.1 and roll the catalog out to it.
	v2Bundle := s.generateBundle("0.1.1", pkg+".v0.1.0")
	v2Catalog := s.renderCatalog("catalog-v2", []bundleRef{
		{dir: filepath.Join(s.env.RepoRoot, "bundle")},
		{dir: v2Bundle, replaces: pkg + ".v0.1.0"},
	})
	addr := s.serveCatalog("opm-v2", v2Catalog)
	cat := &v1alpha1.CatalogSource{}
	s.get(types.NamespacedName{Namespace: olmNS, Name: "capi-mailgun"}, cat)
	cat.Spec.Address = addr
	s.update(cat)

	s.waitForCSV(pkg+".v0.1.1", 5*time.Minute)
	s.waitInstallPlansComplete()

	// OLM re-applied the bundle's objects: the shipped Secret is empty again,
	// which is why the settings live in objects of our own.
	shipped := &corev1.Secret{}
	s.get(types.NamespacedName{Namespace: operatorNS, Name: config.DefaultSecretName}, shipped)
	t.Logf("after the upgrade the shipped Secret holds %d bytes of api_key", len(shipped.Data[config.SecretAPIKeyKey]))
	for _, name := range []string{"my-mailgun-credentials"} {
		own := &corev1.Secret{}
		s.get(types.NamespacedName{Namespace: operatorNS, Name: name}, own)
		if string(own.Data[config.SecretAPIKeyKey]) != mgAPIKey {
			t.Errorf("user-owned Secret %s lost its key in the upgrade", name)
		}
	}
	s.waitForDeploymentEnv(operator.EnvSecretName, "my-mailgun-credentials")

	// The upgraded operator sends for a new cluster, with the user-owned
	// settings, and never again for the first one.
	mc := s.applySample("second")
	s.waitForEmail(mc)
	first := &infrav1.MailgunCluster{}
	s.get(types.NamespacedName{Namespace: userNS, Name: "first"}, first)
	time.Sleep(3 * time.Second)
	if n := len(s.emailsFor(first)); n != 1 {
		t.Errorf("%d emails for the cluster created before the upgrade, want 1", n)
	}
	if n := len(s.fake.Messages()); n != 2 {
		t.Errorf("%d emails in total, want 2", n)
	}
	if s.kubelet.restarts() < 2 {
		t.Errorf("the manager was not restarted by the upgrade")
	}
}

// checkNoPermissionErrors fails on any RBAC denial in the operator's logs:
// the operator ran with exactly the permissions the CSV grants, so a missing
// one shows up here.
func (s *suite) checkNoPermissionErrors() {
	// The manager really runs with the ServiceAccount's narrow rights.
	cfg, err := clientcmd.BuildConfigFromFlags("", s.kubelet.operatorKubeconfig())
	if err != nil {
		s.t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	for _, check := range []struct {
		attrs authorizationv1.ResourceAttributes
		want  bool
	}{
		{authorizationv1.ResourceAttributes{Group: infrav1.GroupVersion.Group, Resource: "mailgunclusters", Verb: "list"}, true},
		{authorizationv1.ResourceAttributes{Group: infrav1.GroupVersion.Group, Resource: "mailgunclusters", Subresource: "status", Verb: "patch", Namespace: userNS}, true},
		{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "watch", Namespace: operatorNS}, true},
		{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "get", Namespace: userNS}, false},
		{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "list"}, false},
		{authorizationv1.ResourceAttributes{Group: "cluster.x-k8s.io", Resource: "clusters", Verb: "update", Namespace: userNS}, false},
	} {
		review, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(s.ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &check.attrs},
		}, metav1.CreateOptions{})
		if err != nil {
			s.t.Fatalf("access review as the operator: %v", err)
		}
		if review.Status.Allowed != check.want {
			s.t.Errorf("operator may %s %s/%s in %q: %v, want %v", check.attrs.Verb, check.attrs.Resource, check.attrs.Subresource,
				check.attrs.Namespace, review.Status.Allowed, check.want)
		}
	}

	logs := s.kubelet.managerLogs()
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "forbidden") || strings.Contains(line, "Forbidden") {
			s.t.Errorf("permission error in the operator's logs: %s", line)
		}
	}
}

// applySample applies config/samples with the given name in the user
// namespace, owned as Cluster API's Cluster controller would own it.
func (s *suite) applySample(name string) *infrav1.MailgunCluster {
	cluster := &clusterv1.Cluster{}
	s.readSample("cluster.yaml", cluster)
	cluster.Name, cluster.Namespace = name, userNS
	cluster.Spec.InfrastructureRef.Name = name
	s.create(cluster)
	mc := &infrav1.MailgunCluster{}
	s.readSample("infrastructure_v1beta1_mailguncluster.yaml", mc)
	mc.Name, mc.Namespace = name, userNS
	mc.OwnerReferences = []metav1.OwnerReference{testenv.OwnerRef(cluster)}
	s.create(mc)
	return mc
}

func (s *suite) readSample(file string, obj client.Object) {
	b, err := os.ReadFile(filepath.Join(s.env.RepoRoot, "config", "samples", file))
	if err != nil {
		s.t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, obj); err != nil {
		s.t.Fatalf("parsing %s: %v", file, err)
	}
}

func (s *suite) waitForEmail(mc *infrav1.MailgunCluster) *infrav1.MailgunCluster {
	got := &infrav1.MailgunCluster{}
	waitFor(s.ctx, s.t, 2*time.Minute, "MailgunCluster "+mc.Name+" to be Ready", s.dump, func() (bool, string) {
		if err := s.c.Get(s.ctx, client.ObjectKeyFromObject(mc), got); err != nil {
			return false, err.Error()
		}
		return conditions.IsTrue(got, infrav1.ReadyCondition) && got.Status.MessageID != "",
			fmt.Sprintf("%+v", got.Status.Conditions)
	})
	return got
}

func (s *suite) emailsFor(mc *infrav1.MailgunCluster) []mailgunfake.Message {
	return s.fake.MessagesWithVariable(mailer.VarObject, mc.Namespace+"/"+mc.Name)
}

func (s *suite) waitForCSV(name string, timeout time.Duration) {
	waitFor(s.ctx, s.t, timeout, "CSV "+name+" to succeed", s.dump, func() (bool, string) {
		csv := &v1alpha1.ClusterServiceVersion{}
		if err := s.c.Get(s.ctx, types.NamespacedName{Namespace: operatorNS, Name: name}, csv); err != nil {
			return false, err.Error()
		}
		return csv.Status.Phase == v1alpha1.CSVPhaseSucceeded, fmt.Sprintf("phase %s: %s", csv.Status.Phase, csv.Status.Message)
	})
}

func (s *suite) waitInstallPlansComplete() {
	waitFor(s.ctx, s.t, 2*time.Minute, "InstallPlans to complete", s.dump, func() (bool, string) {
		ips := &v1alpha1.InstallPlanList{}
		if err := s.c.List(s.ctx, ips, client.InNamespace(operatorNS)); err != nil {
			return false, err.Error()
		}
		if len(ips.Items) == 0 {
			return false, "no InstallPlan"
		}
		for _, ip := range ips.Items {
			if ip.Status.Phase != v1alpha1.InstallPlanPhaseComplete {
				return false, fmt.Sprintf("%s phase %s", ip.Name, ip.Status.Phase)
			}
		}
		return true, ""
	})
}

func (s *suite) waitForDeploymentEnv(name, value string) {
	waitFor(s.ctx, s.t, 2*time.Minute, fmt.Sprintf("the Deployment to carry %s=%s", name, value), s.dump, func() (bool, string) {
		dep := &appsv1.Deployment{}
		if err := s.c.Get(s.ctx, types.NamespacedName{Namespace: operatorNS, Name: deployment}, dep); err != nil {
			return false, err.Error()
		}
		for _, c := range dep.Spec.Template.Spec.Containers {
			for _, e := range c.Env {
				if e.Name == name && e.Value == value {
					return dep.Status.ObservedGeneration == dep.Generation && dep.Status.AvailableReplicas > 0, "rolling out"
				}
			}
		}
		return false, "env not set"
	})
}

// dump describes OLM's view and the processes' logs, for failures.
func (s *suite) dump() string {
	var b strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	subs := &v1alpha1.SubscriptionList{}
	if s.c.List(ctx, subs, client.InNamespace(operatorNS)) == nil {
		for _, sub := range subs.Items {
			fmt.Fprintf(&b, "Subscription %s: state %s, installed %s, current %s\n", sub.Name, sub.Status.State, sub.Status.InstalledCSV, sub.Status.CurrentCSV)
			for _, c := range sub.Status.Conditions {
				fmt.Fprintf(&b, "  %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
			}
		}
	}
	ips := &v1alpha1.InstallPlanList{}
	if s.c.List(ctx, ips, client.InNamespace(operatorNS)) == nil {
		for _, ip := range ips.Items {
			fmt.Fprintf(&b, "InstallPlan %s: phase %s, CSVs %v\n", ip.Name, ip.Status.Phase, ip.Spec.ClusterServiceVersionNames)
			for _, c := range ip.Status.Conditions {
				fmt.Fprintf(&b, "  %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
			}
		}
	}
	csvs := &v1alpha1.ClusterServiceVersionList{}
	if s.c.List(ctx, csvs, client.InNamespace(operatorNS)) == nil {
		for _, csv := range csvs.Items {
			fmt.Fprintf(&b, "CSV %s: phase %s reason %s: %s\n", csv.Name, csv.Status.Phase, csv.Status.Reason, csv.Status.Message)
			for _, r := range csv.Status.RequirementStatus {
				if r.Status != v1alpha1.RequirementStatusReasonPresent {
					fmt.Fprintf(&b, "  requirement %s %s: %s %s\n", r.Kind, r.Name, r.Status, r.Message)
				}
			}
		}
	}
	cats := &v1alpha1.CatalogSourceList{}
	if s.c.List(ctx, cats, client.InNamespace(olmNS)) == nil {
		for _, c := range cats.Items {
			if c.Status.GRPCConnectionState != nil {
				fmt.Fprintf(&b, "CatalogSource %s: %s %s\n", c.Name, c.Spec.Address, c.Status.GRPCConnectionState.LastObservedState)
			}
		}
	}
	for _, p := range s.procs {
		fmt.Fprintf(&b, "--- %s log (last 25 lines) ---\n%s\n", p.Name, p.Tail(25))
	}
	if s.kubelet != nil {
		logs := s.kubelet.managerLogs()
		if len(logs) > 6000 {
			logs = logs[len(logs)-6000:]
		}
		fmt.Fprintf(&b, "%s\n", logs)
	}
	return b.String()
}

func (s *suite) create(obj client.Object) {
	s.t.Helper()
	if err := s.c.Create(s.ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		s.t.Fatalf("creating %T %s: %v", obj, client.ObjectKeyFromObject(obj), err)
	}
}

func (s *suite) get(key types.NamespacedName, obj client.Object) {
	s.t.Helper()
	if err := s.c.Get(s.ctx, key, obj); err != nil {
		s.t.Fatalf("getting %T %s: %v", obj, key, err)
	}
}

func (s *suite) update(obj client.Object) {
	s.t.Helper()
	if err := s.c.Update(s.ctx, obj); err != nil {
		s.t.Fatalf("updating %T %s: %v", obj, client.ObjectKeyFromObject(obj), err)
	}
}

// generateBundle writes a bundle of another version, replacing prev.
func (s *suite) generateBundle(version, replaces string) string {
	rendered, err := manifests.Kustomize(filepath.Join(s.env.RepoRoot, "config", "manifests"))
	if err != nil {
		s.t.Fatal(err)
	}
	current, err := bundle.Load(filepath.Join(s.env.RepoRoot, "bundle"), pkg)
	if err != nil {
		s.t.Fatal(err)
	}
	files, err := bundle.Generate(rendered, bundle.Options{
		Package: pkg, Version: version, Replaces: replaces, Channels: []string{"stable"},
		Image: current.Annotations["containerImage"],
	})
	if err != nil {
		s.t.Fatal(err)
	}
	dir := filepath.Join(s.logDir, "bundle-v"+version, "bundle")
	if err := bundle.Write(dir, files); err != nil {
		s.t.Fatal(err)
	}
	return dir
}

type bundleRef struct {
	dir      string
	replaces string
}

// renderCatalog writes a file-based catalog with the given bundles in the
// stable channel, rendered from their directories (objects inline), and
// validates it with opm.
func (s *suite) renderCatalog(name string, bundles []bundleRef) string {
	t := s.t
	dir := filepath.Join(s.logDir, name)
	var b strings.Builder
	out, err := testenv.Run(s.env.RepoRoot, s.opm, "init", pkg, "--default-channel=stable", "--output=yaml")
	if err != nil {
		t.Fatal(err)
	}
	b.WriteString(out)
	fmt.Fprintf(&b, "---\nschema: olm.channel\npackage: %s\nname: stable\nentries:\n", pkg)
	for _, br := range bundles {
		csv, err := bundle.Load(br.dir, pkg)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "- name: %s\n", csv.Name)
		if br.replaces != "" {
			fmt.Fprintf(&b, "  replaces: %s\n", br.replaces)
		}
	}
	for _, br := range bundles {
		out, err := testenv.Run(s.env.RepoRoot, s.opm, "render", br.dir, "--output=yaml")
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("---\n" + out)
	}
	if err := os.MkdirAll(filepath.Join(dir, pkg), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, pkg, "index.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := testenv.Run(s.env.RepoRoot, s.opm, "validate", dir); err != nil {
		t.Fatalf("opm validate %s: %v", dir, err)
	}
	return dir
}

// serveCatalog serves a catalog directory with `opm serve` on loopback.
func (s *suite) serveCatalog(name, dir string) string {
	addr := proc.FreeAddr(s.t)
	_, port, _ := strings.Cut(addr, ":")
	pprof := proc.FreeAddr(s.t)
	p := proc.Start(s.t, s.logDir, name, s.opm, []string{"serve", dir, "--port=" + port, "--pprof-addr=" + pprof}, []string{"HOME=" + s.logDir})
	s.procs = append(s.procs, p)
	waitForPort(s.ctx, s.t, addr, p)
	return addr
}
