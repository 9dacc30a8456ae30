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

// Package e2e installs the operator the way a platform team does, on a real
// single-node cluster (hack/node) with OLM running as pods: catalog image →
// CatalogSource → PackageManifest → OperatorGroup + Subscription →
// InstallPlan → bundle unpack Job → CSV → operator pod, then configures
// Mailgun, requests a cluster, upgrades through the catalog, moves a cluster
// away with clusterctl and back, deletes it, and uninstalls.
// Run it with `make e2e`, which brings the node up, builds and pushes the
// images, runs this test and tears the node down.
package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlclient "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/hack/packaging/manifests"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/config"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/operator"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/docblock"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/mailgunfake"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/testca"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/testenv"
)

const (
	pkg        = "cluster-api-provider-mailgun"
	olmNS      = "olm"
	operatorNS = "capmg-system"
	userNS     = "team-a"
	deployment = "capmg-controller-manager"
	// metricsServerName is the metrics Service's DNS name, which its
	// serving certificate names.
	metricsServerName = "capmg-controller-manager-metrics-service." + operatorNS + ".svc"
	catalogName       = "capi-mailgun"
	mgDomain          = "mg.e2e.example.com"
	mgAPIKey          = "key-e2e-0b5c3f1a9d7e" //nolint:gosec // G101: a made-up key for the Mailgun fake
	mgRecipient       = "infra-requests@example.com"
)

// settings come from `make e2e` or `make e2e-olmv1` (hack/e2e.sh) through
// the environment.
type settings struct {
	kubeconfig    string // admin kubeconfig of the test node
	kubectl       string // kubectl for the node's version, which runs the docs' sh blocks
	olmDir        string // OLM's module directory: deploy/upstream/quickstart
	olmCRDs       string // OLM's CRDs (operator-framework/api's crds/)
	olmImage      string // published name of the OLM image built here
	opmImage      string // published name of the opm image built here
	olmv1Dir      string // OLM v1's module directory: manifests/standard.yaml
	catalogdImage string // published names of OLM v1's images built here
	opconImage    string
	catalogV1     string // catalog image with 0.1.0
	catalogV2     string // catalog image with 0.1.0 and 0.1.1
	operatorV2    string // the manager image 0.1.1's CSV names
	fakeAddr      string // where the Mailgun fake listens: the node's bridge
	fakeCert      string // OLM v1, clusterctl: the fake's serving certificate and key (PEM files)
	fakeKey       string
	logDir        string
	repoRoot      string
	clusterAPICRD string // directory of Cluster API's core CRDs

	// The clusterctl test's: clusterctl, the local repository of the
	// provider's artifacts (infrastructure-mailgun/<version>/), Cluster
	// API's module directory and version (its images are built here under
	// its release's names), and cert-manager's CRDs.
	clusterctl, clusterctlRepo string
	capiDir, capiVersion       string
	certManagerCRDs            string
}

// e2eMode is which of hack/e2e.sh's tests runs: each reads its own
// settings.
type e2eMode int

const (
	modeOLMv0 e2eMode = iota
	modeOLMv1
	modeClusterctl
)

// loadSettings reads the settings of the test of mode.
func loadSettings(t *testing.T, mode e2eMode) settings {
	t.Helper()
	target := "make e2e"
	if mode != modeOLMv0 {
		target = "make e2e-olmv1"
	}
	get := func(name string) string {
		v := os.Getenv(name)
		if v == "" {
			t.Fatalf("%s is not set; run the test through `%s`", name, target)
		}
		return v
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cfg := settings{
		kubeconfig: get("KUBECONFIG"), kubectl: get("KUBECTL"),
		fakeAddr: get("MAILGUN_FAKE_ADDR"), logDir: get("E2E_LOG_DIR"), repoRoot: root,
	}
	if mode != modeOLMv0 {
		cfg.fakeCert, cfg.fakeKey = get("MAILGUN_FAKE_CERT"), get("MAILGUN_FAKE_KEY")
	}
	if mode == modeClusterctl {
		cfg.clusterctl, cfg.clusterctlRepo = get("CLUSTERCTL"), get("CLUSTERCTL_REPOSITORY")
		cfg.capiDir, cfg.capiVersion, cfg.certManagerCRDs = get("CAPI_DIR"), get("CAPI_VERSION"), get("CERT_MANAGER_CRDS")
		return cfg
	}
	capiDir, err := testenv.Run(root, "go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/cluster-api")
	if err != nil {
		t.Fatal(err)
	}
	cfg.clusterAPICRD = filepath.Join(strings.TrimSpace(capiDir), "core", "config", "crd", "bases")
	cfg.catalogV1, cfg.catalogV2, cfg.operatorV2 = get("CATALOG_IMAGE_V1"), get("CATALOG_IMAGE_V2"), get("OPERATOR_IMAGE_V2")
	if mode == modeOLMv1 {
		cfg.olmv1Dir, cfg.catalogdImage, cfg.opconImage = get("OLMV1_DIR"), get("CATALOGD_IMAGE"), get("OPERATOR_CONTROLLER_IMAGE")
	} else {
		cfg.olmDir, cfg.olmCRDs, cfg.olmImage, cfg.opmImage = get("OLM_DIR"), get("OLM_CRDS"), get("OLM_IMAGE"), get("OPM_IMAGE")
	}
	return cfg
}

type suite struct {
	t    *testing.T
	ctx  context.Context
	cfg  settings
	rest *rest.Config
	c    client.Client
	cs   *kubernetes.Clientset
	fake *mailgunfake.Server
	// caPEM is the CA of the fake's serving certificate.
	caPEM []byte
	// metricsCert is the metrics endpoint's serving certificate, given to
	// the operator through the Subscription, and its CA.
	metricsCert testca.Issued
	logs        *podLogs
	// dumpNamespaces are the namespaces whose pods' logs a failure shows.
	dumpNamespaces []string
	// docEnv and docPath are what runDocCommands adds to the environment
	// and PATH of the docs' commands.
	docEnv, docPath []string
}

// newSuite connects to the node, starts the Mailgun fake on the node's
// bridge with the serving certificate cert, and follows the operator's log.
func newSuite(ctx context.Context, t *testing.T, cfg settings, cert tls.Certificate) *suite {
	t.Helper()
	s := &suite{t: t, ctx: ctx, cfg: cfg, dumpNamespaces: []string{olmNS, operatorNS}}
	var err error
	s.rest, err = clientcmd.BuildConfigFromFlags("", s.cfg.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := operator.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	for _, add := range []func(*runtime.Scheme) error{
		v1alpha1.AddToScheme, operatorsv1.AddToScheme, apiextensionsv1.AddToScheme, batchv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	if s.c, err = client.New(s.rest, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	if s.cs, err = kubernetes.NewForConfig(s.rest); err != nil {
		t.Fatal(err)
	}
	s.fake, err = mailgunfake.StartTLSOn(s.cfg.fakeAddr, mgDomain, mgAPIKey, cert)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.fake.Close)
	s.logs = followPodLogs(ctx, s.cs, operatorNS, "control-plane=controller-manager", s.cfg.logDir)
	t.Cleanup(s.logs.stop)
	return s
}

// step is one step of an end-to-end test; each needs the previous one.
type step struct {
	name     string
	run      func()
	lastDemo bool // E2E_DEMO (make demo-olm) stops after this step
}

// runSteps runs the steps in order, stopping at the first failure, and logs
// how long each took.
func (s *suite) runSteps(t *testing.T, steps []step) {
	demo := os.Getenv("E2E_DEMO") != ""
	for _, st := range steps {
		start := time.Now()
		if !t.Run(st.name, func(t *testing.T) { s.t = t; st.run() }) {
			s.t = t
			t.FailNow()
		}
		s.t = t
		t.Logf("TIMING %s: %.1fs", st.name, time.Since(start).Seconds())
		if demo && st.lastDemo {
			return
		}
	}
}

func TestInstallFromCatalogImage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	cfg := loadSettings(t, modeOLMv0)
	// The operator speaks plain HTTP only to loopback, so the fake serves
	// HTTPS on the node's bridge with a certificate of a CA made here; the
	// operator trusts that CA through the Subscription (see subscribe).
	host, _, _ := strings.Cut(cfg.fakeAddr, ":")
	issued := testca.Issue(t, nil, []net.IP{net.ParseIP(host)})
	s := newSuite(ctx, t, cfg, issued.Cert)
	s.caPEM = issued.CAPEM
	s.metricsCert = testca.Issue(t, []string{metricsServerName}, nil)

	s.runSteps(t, []step{
		{name: "OLM runs in the cluster", run: s.installOLM},
		{name: "the catalog image serves our package", run: s.addCatalog},
		{name: "subscribing installs the operator through a bundle unpack Job", run: s.subscribe},
		{name: "Cluster API installed after the operator is picked up without a restart", run: s.installClusterAPI},
		{name: "a MailgunCluster gets exactly one email", run: func() { s.requestCluster("first") }, lastDemo: true},
		{name: "a MailgunMachine gets exactly one email, naming its bootstrap data but not holding it", run: s.requestMachine},
		{name: "metrics need an authorized token", run: s.checkMetrics},
		{name: "the operator holds only the permissions it needs", run: s.checkPermissions},
		{name: "upgrading through the catalog sends no second email", run: s.upgrade},
		{name: "clusterctl moves a cluster away and back, then it is deleted, with one email", run: s.moveAndDelete},
		{name: "uninstalling removes the operator", run: s.uninstall},
		{name: "OwnNamespace and SingleNamespace installs watch only their namespace", run: s.installModes},
		{name: "the operator logged no error", run: s.checkOperatorLogs},
	})
}

// installClusterAPI installs Cluster API's core CRDs once the operator
// runs without them, as on a cluster where the operator was installed from
// OperatorHub first: the operator said it waits for Cluster API, and picks
// it up without a restart (requestCluster then sends).
func (s *suite) installClusterAPI() {
	s.waitFor(time.Minute, "the operator to say it waits for Cluster API", func() (bool, string) {
		for _, l := range s.logs.all() {
			if strings.Contains(l, "Cluster API is not installed") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d log lines, none says so", len(s.logs.all()))
	})
	start := time.Now()
	s.createClusterAPICRDs()
	s.waitFor(2*time.Minute, "the operator to find Cluster API", func() (bool, string) {
		for _, l := range s.logs.all() {
			if strings.Contains(l, "Cluster API is installed") {
				return true, ""
			}
		}
		return false, "not yet logged"
	})
	s.t.Logf("TIMING Cluster API CRDs installed to the operator watching Clusters: %.1fs", time.Since(start).Seconds())
	if n := s.operatorPod().Status.ContainerStatuses[0].RestartCount; n != 0 {
		s.t.Errorf("the operator container restarted %d times", n)
	}
}

// createClusterAPICRDs installs Cluster API's core CRDs.
func (s *suite) createClusterAPICRDs() {
	for _, obj := range s.readManifestDir(s.cfg.clusterAPICRD) {
		// The conversion webhook belongs to Cluster API's core controller,
		// which this test does not run.
		unstructured.RemoveNestedField(obj.Object, "spec", "conversion")
		s.createUnstructured(obj)
		s.waitCRDEstablished(obj.GetName())
	}
}

// installOLM applies OLM's CRDs and its upstream quickstart manifests,
// changing only what cannot be had here: the images (built here, published
// names) and the community catalog (its image cannot be pulled).
func (s *suite) installOLM() {
	// OLM's CRDs come from operator-framework/api at the version OLM is
	// built with: the quickstart's crds.yaml lacks OLMConfig, without which
	// olm-operator never installs the packageserver.
	for _, obj := range s.readManifestDir(s.cfg.olmCRDs) {
		s.createUnstructured(obj)
		s.waitCRDEstablished(obj.GetName())
	}
	quickstart := filepath.Join(s.cfg.olmDir, "deploy", "upstream", "quickstart")

	for _, obj := range s.readManifests(filepath.Join(quickstart, "olm.yaml")) {
		if obj.GetKind() == "CatalogSource" {
			continue
		}
		s.rewriteOLMImages(obj)
		s.createUnstructured(obj)
	}
	for _, name := range []string{"olm-operator", "catalog-operator"} {
		s.waitDeploymentAvailable(olmNS, name, 3*time.Minute)
	}
	s.waitForCSV(olmNS, "packageserver", 3*time.Minute)
}

// rewriteOLMImages points OLM's containers at the images built here and
// gives catalog-operator the opm and util images it runs in unpack Jobs.
func (s *suite) rewriteOLMImages(obj *unstructured.Unstructured) {
	containers := []string{"spec", "template", "spec", "containers"}
	switch obj.GetKind() {
	case "Deployment":
		s.rewriteContainers(obj.Object, containers)
	case "ClusterServiceVersion": // the packageserver's
		deps, _, _ := unstructured.NestedSlice(obj.Object, "spec", "install", "spec", "deployments")
		for _, d := range deps {
			s.rewriteContainers(d.(map[string]any), containers)
		}
		_ = unstructured.SetNestedSlice(obj.Object, deps, "spec", "install", "spec", "deployments")
	}
}

func (s *suite) rewriteContainers(podOwner map[string]any, path []string) {
	containers, _, _ := unstructured.NestedSlice(podOwner, path...)
	for _, c := range containers {
		cm := c.(map[string]any)
		cm["image"] = s.cfg.olmImage
		if cm["name"] == "catalog-operator" {
			// The util and opm images that bundle unpack Jobs run: the
			// ones built here, not upstream's digests.
			cm["args"] = []any{"--namespace", olmNS, "--util-image", s.cfg.olmImage, "--opmImage", s.cfg.opmImage}
		}
	}
	_ = unstructured.SetNestedSlice(podOwner, containers, path...)
}

// addCatalog adds the catalog image as a CatalogSource and waits for OLM to
// serve our package from it.
func (s *suite) addCatalog() {
	s.create(s.docCatalogSource())
	s.waitCatalogReady(s.cfg.catalogV1)
	pm := &unstructured.Unstructured{}
	pm.SetGroupVersionKind(schema.GroupVersionKind{Group: "packages.operators.coreos.com", Version: "v1", Kind: "PackageManifest"})
	s.waitFor(3*time.Minute, "the PackageManifest of "+pkg, func() (bool, string) {
		if err := s.c.Get(s.ctx, types.NamespacedName{Namespace: olmNS, Name: pkg}, pm); err != nil {
			return false, err.Error()
		}
		channel, _, _ := unstructured.NestedString(pm.Object, "status", "defaultChannel")
		return channel == "stable", "default channel " + channel
	})
}

// subscribe creates the namespace (restricted Pod Security), the
// OperatorGroup and the Subscription, as docs/install-olm.md says, and waits
// for the operator pod.
func (s *suite) subscribe() {
	start := time.Now()
	// The operator's namespace, enforcing the restricted profile, made by
	// the doc's own commands so that a wrong label there fails here.
	s.runDocCommands(docSubscribe, 0)
	s.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: userNS}})
	og := &operatorsv1.OperatorGroup{}
	s.docObject(docSubscribe, og)
	s.create(og)
	// The fake's CA, which a cluster behind a TLS-inspecting proxy would
	// hand the operator the same way.
	s.create(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: "mailgun-ca"},
		Data:       map[string]string{"ca.crt": string(s.caPEM)},
	})
	// The metrics endpoint's certificate, as docs/operations.md ("Scraping
	// the metrics") says to give it through OLM: a Secret mounted by the
	// Subscription, its directory in METRICS_CERT_PATH.
	s.create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: "capmg-metrics-server-cert"},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": s.metricsCert.CertPEM, "tls.key": s.metricsCert.KeyPEM, "ca.crt": s.metricsCert.CAPEM},
	})
	s.create(s.subscription())

	// OLM unpacks the bundle image with a Job (the catalog names the bundle
	// by image; it carries no inline objects).
	s.waitFor(3*time.Minute, "a bundle unpack Job to complete", func() (bool, string) {
		jobs := &batchv1.JobList{}
		if err := s.c.List(s.ctx, jobs, client.InNamespace(olmNS)); err != nil {
			return false, err.Error()
		}
		for _, j := range jobs.Items {
			for _, c := range j.Status.Conditions {
				if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("%d Jobs in %s, none complete", len(jobs.Items), olmNS)
	})
	s.waitForCSV(operatorNS, pkg+".v0.1.0", 5*time.Minute)
	s.t.Logf("TIMING Subscription to CSV Succeeded: %.1fs", time.Since(start).Seconds())
	s.waitInstallPlansComplete()
	s.waitDeploymentAvailable(operatorNS, deployment, 3*time.Minute)

	// Everything the bundle declares exists.
	for _, obj := range []client.Object{
		&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "mailgunclusters.infrastructure.cluster.x-k8s.io"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: deployment}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: "capmg-controller-manager-metrics-service"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "capmg-mailguncluster-editor-role"}},
	} {
		if err := s.c.Get(s.ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			s.t.Errorf("%T %s not installed: %v", obj, client.ObjectKeyFromObject(obj), err)
		}
	}
	s.configure()

	// The pod runs as the restricted profile demands: the namespace enforces
	// it, and the pod says so itself.
	pod := s.operatorPod()
	psc, c := pod.Spec.SecurityContext, pod.Spec.Containers[0]
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || c.SecurityContext == nil ||
		c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		s.t.Errorf("operator pod is not non-root with a read-only root filesystem: %+v %+v", psc, c.SecurityContext)
	}
	s.t.Logf("operator pod %s runs image %s", pod.Name, c.Image)
}

// docSection is a section of a page of docs/, by its heading.
type docSection struct{ page, heading string }

func (d docSection) String() string { return fmt.Sprintf("docs/%s %q", d.page, d.heading) }

// The sections of docs/install-olm.md whose blocks the e2e applies and runs.
var (
	docCatalog   = docSection{"install-olm.md", "## 2. Add the catalog"}
	docSubscribe = docSection{"install-olm.md", "## 3. Create the namespace and the Subscription"}
	docSettings  = docSection{"install-olm.md", "## 3a. Give the operator its Mailgun settings"}
)

// docNames are where the rest of the suite expects each of the doc's
// objects.
var docNames = map[string]types.NamespacedName{
	"CatalogSource": {Namespace: olmNS, Name: catalogName},
	"OperatorGroup": {Namespace: operatorNS, Name: "capmg"},
	"Subscription":  {Namespace: operatorNS, Name: pkg},
}

// docBlocks returns the lang blocks of a section of the docs the e2e
// follows.
func (s *suite) docBlocks(section docSection, lang string) []string {
	s.t.Helper()
	blocks, err := docblock.Section(filepath.Join(s.cfg.repoRoot, "docs", section.page), section.heading, lang)
	if err != nil {
		s.t.Fatal(err)
	}
	return blocks
}

// docObject decodes into obj the object of obj's kind among the YAML blocks
// of a section: the e2e applies what users copy. It fails unless the object
// has the name and namespace the suite uses.
func (s *suite) docObject(section docSection, obj client.Object) {
	s.t.Helper()
	blocks := s.docBlocks(section, "yaml")
	gvk, err := apiutil.GVKForObject(obj, s.c.Scheme())
	if err != nil {
		s.t.Fatal(err)
	}
	for _, block := range blocks {
		objs, err := manifests.Decode([]byte(block))
		if err != nil {
			s.t.Fatalf("%s: %v", section, err)
		}
		for _, u := range objs {
			if u.GroupVersionKind() != gvk {
				continue
			}
			// Strict: a field the type lacks (a typo in the doc) fails.
			if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, obj, true); err != nil {
				s.t.Fatalf("%s: the %s: %v", section, gvk.Kind, err)
			}
			if got, want := client.ObjectKeyFromObject(obj), docNames[gvk.Kind]; got != want {
				s.t.Fatalf("%s: the %s is %s; the e2e expects %s", section, gvk.Kind, got, want)
			}
			return
		}
	}
	s.t.Fatalf("%s has no %s", section, gvk)
}

// docCatalogSource is the doc's CatalogSource with this run's registry for
// <registry>, which must name the catalog image this run built.
func (s *suite) docCatalogSource() *v1alpha1.CatalogSource {
	cat := &v1alpha1.CatalogSource{}
	s.docObject(docCatalog, cat)
	cat.Spec.Image = strings.Replace(cat.Spec.Image, "<registry>", path.Dir(s.cfg.catalogV1), 1)
	if cat.Spec.Image != s.cfg.catalogV1 {
		s.t.Fatalf("docs/install-olm.md's CatalogSource names %s (with this run's registry); this run built %s", cat.Spec.Image, s.cfg.catalogV1)
	}
	return cat
}

// subscription is the doc's Subscription with, through spec.config, the CA
// of the Mailgun fake (as a cluster behind a TLS-inspecting proxy would
// give it) and the metrics certificate.
func (s *suite) subscription() *v1alpha1.Subscription {
	sub := &v1alpha1.Subscription{}
	s.docObject(docSubscribe, sub)
	sub.Spec.Config = &v1alpha1.SubscriptionConfig{
		Env: []corev1.EnvVar{
			{Name: "SSL_CERT_FILE", Value: "/etc/mailgun-ca/ca.crt"},
			{Name: "METRICS_CERT_PATH", Value: "/etc/metrics-cert"},
		},
		Volumes: []corev1.Volume{
			{Name: "mailgun-ca", VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "mailgun-ca"}},
			}},
			{Name: "metrics-cert", VolumeSource: corev1.VolumeSource{
				Secret: &corev1.SecretVolumeSource{SecretName: "capmg-metrics-server-cert"}, //nolint:gosec // G101: a Secret's name, no credential
			}},
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "mailgun-ca", MountPath: "/etc/mailgun-ca", ReadOnly: true},
			{Name: "metrics-cert", MountPath: "/etc/metrics-cert", ReadOnly: true},
		},
	}
	return sub
}

// configure gives the operator its Mailgun settings with the commands of
// docs/install-olm.md: patching the Secret and ConfigMap the operator
// created (the bundle ships neither, so OLM never resets them), then, as
// the doc says for the EU region, the API base (the Mailgun fake's). The
// operator is Ready only once they exist, so they do by now.
func (s *suite) configure() {
	for _, obj := range []client.Object{s.settingsSecret(), s.settingsConfigMap()} {
		if desc := obj.GetAnnotations()["kubernetes.io/description"]; desc != config.UserObjectDescription {
			s.t.Errorf("%T %s: description %q, want the operator's", obj, obj.GetName(), desc)
		}
		if refs := obj.GetOwnerReferences(); len(refs) != 0 {
			s.t.Errorf("%T %s is owned by %+v; the user's settings must have no owner", obj, obj.GetName(), refs)
		}
	}
	s.runDocCommands(docSettings, 0,
		"<Mailgun private API key>", mgAPIKey, "mg.example.com", mgDomain, "infra@example.com", mgRecipient)
	s.mergePatch(&corev1.ConfigMap{}, config.DefaultConfigMapName, map[string]any{"data": map[string]string{
		config.ConfigMapAPIBaseKey: s.fake.APIBase(),
	}})
}

// runDocCommands runs, with bash and the node's kubectl, the sh block at
// index of a section, each old string of replace (old, new, ...) replaced
// by its new one: the e2e types what users copy. It fails if the block no
// longer holds an old string. The environment is the test's without
// Mailgun settings (MAILGUN_*, MAIL_RECIPIENT: only what the block sets
// counts), with s.docEnv, and s.docPath before PATH. The script is not
// logged, and its output only with the fake's API key redacted.
func (s *suite) runDocCommands(section docSection, index int, replace ...string) {
	s.t.Helper()
	blocks := s.docBlocks(section, "sh")
	if index >= len(blocks) {
		s.t.Fatalf("%s has %d sh blocks, not %d", section, len(blocks), index+1)
	}
	for i := 0; i+1 < len(replace); i += 2 {
		if !strings.Contains(blocks[index], replace[i]) {
			s.t.Fatalf("%s: sh block %d no longer holds %q", section, index, replace[i])
		}
	}
	// clusterctl init and upgrade apply a few hundred objects.
	ctx, cancel := context.WithTimeout(s.ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", strings.NewReplacer(replace...).Replace(blocks[index]))
	// A child that outlives a killed bash keeps the output open; stop
	// waiting for it.
	cmd.WaitDelay = 10 * time.Second
	cmd.Dir = s.cfg.repoRoot
	path := append(slices.Clone(s.docPath), filepath.Dir(s.cfg.kubectl), os.Getenv("PATH"))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MAILGUN_") && !strings.HasPrefix(kv, "MAIL_RECIPIENT=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, s.docEnv...)
	cmd.Env = append(cmd.Env, "PATH="+strings.Join(path, string(os.PathListSeparator)))
	out, err := cmd.CombinedOutput()
	text := strings.ReplaceAll(string(out), mgAPIKey, "<redacted>")
	if err != nil {
		s.t.Fatalf("%s, sh block %d: %v\n%s", section, index, err, text)
	}
	s.t.Logf("ran %s, sh block %d:\n%s", section, index, text)
}

// settingsSecret and settingsConfigMap read the operator's settings objects.
func (s *suite) settingsSecret() *corev1.Secret {
	obj := &corev1.Secret{}
	s.get(types.NamespacedName{Namespace: operatorNS, Name: config.DefaultSecretName}, obj)
	return obj
}

func (s *suite) settingsConfigMap() *corev1.ConfigMap {
	obj := &corev1.ConfigMap{}
	s.get(types.NamespacedName{Namespace: operatorNS, Name: config.DefaultConfigMapName}, obj)
	return obj
}

// checkSettingsIntact fails unless both settings objects still hold what
// configure wrote and no installer owns them.
func (s *suite) checkSettingsIntact(when string) {
	secret, cm := s.settingsSecret(), s.settingsConfigMap()
	if got := string(secret.Data[config.SecretAPIKeyKey]); got != mgAPIKey {
		s.t.Errorf("%s, the API key in the Secret is %d bytes, not the one given", when, len(got))
	}
	if cm.Data[config.ConfigMapDomainKey] != mgDomain || cm.Data[config.ConfigMapRecipientKey] != mgRecipient ||
		cm.Data[config.ConfigMapAPIBaseKey] != s.fake.APIBase() {
		s.t.Errorf("%s, the ConfigMap holds %v, not the settings given", when, cm.Data)
	}
	for _, obj := range []client.Object{secret, cm} {
		if len(obj.GetOwnerReferences()) != 0 || obj.GetLabels()["olm.managed"] != "" {
			s.t.Errorf("%s, %T %s still carries installer marks: owners %+v, labels %v", when, obj, obj.GetName(),
				obj.GetOwnerReferences(), obj.GetLabels())
		}
	}
}

func (s *suite) mergePatch(obj client.Object, name string, patch map[string]any) {
	s.t.Helper()
	b, err := json.Marshal(patch)
	if err != nil {
		s.t.Fatal(err)
	}
	obj.SetNamespace(operatorNS)
	obj.SetName(name)
	if err := s.c.Patch(s.ctx, obj, client.RawPatch(types.MergePatchType, b)); err != nil {
		s.t.Fatalf("patching %T %s: %v", obj, name, err)
	}
}

// requestCluster applies the sample Cluster and MailgunCluster and checks
// the one email and the status.
func (s *suite) requestCluster(name string) {
	start := time.Now()
	mc := s.applySample(userNS, name)
	got := s.waitForEmail(mc)
	s.t.Logf("TIMING MailgunCluster created to Ready: %.1fs", time.Since(start).Seconds())
	emails := s.emailsFor(mc)
	if len(emails) != 1 {
		s.t.Fatalf("%d emails for %s, want exactly 1", len(emails), name)
	}
	e := emails[0]
	if e.Subject != "[Urgent] New Cluster requested" || e.To[0] != mgRecipient || e.ReplyTo != "platform-team@example.com" ||
		!strings.Contains(e.Text, "A small cluster for the payments team") {
		s.t.Errorf("email fields wrong: %+v", e)
	}
	s.t.Logf("email accepted by the Mailgun fake:\n  Message-Id: %s\n  To:         %s\n  Reply-To:   %s\n  Subject:    %s\n\n%s",
		e.ID, strings.Join(e.To, ", "), e.ReplyTo, e.Subject, e.Text)
	s.t.Logf("MailgunCluster %s/%s: status.messageID=%s", got.Namespace, got.Name, got.Status.MessageID)
	if got.Status.MessageID != e.ID {
		s.t.Errorf("status.messageID = %q, want %q", got.Status.MessageID, e.ID)
	}
}

// requestMachine gives a cluster of its own namespace a worker Machine, as
// Cluster API would (no Cluster API controller runs here: the test sets
// the owners and the Cluster's status), with the sample MailgunMachine:
// one email, which names the provider ID the MailgunMachine records and the
// bootstrap Secret; the Secret's content is in no email and not in the
// operator's log. Deleting the Cluster takes all of it away, through the
// node's garbage collector and the operator's finalizers.
func (s *suite) requestMachine() {
	const ns, canary = "team-machines", "e2e-join-token-5b0d2c"
	s.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	mc := s.applySample(ns, "builds")
	s.waitForEmail(mc)
	cluster := &clusterv1.Cluster{}
	s.get(types.NamespacedName{Namespace: ns, Name: "builds"}, cluster)
	cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	cluster.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	if err := s.c.Status().Update(s.ctx, cluster); err != nil {
		s.t.Fatal(err)
	}
	s.create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "builds-worker-0-bootstrap"},
		Data:       map[string][]byte{"value": []byte("join: " + canary)},
	})
	labels := map[string]string{clusterv1.ClusterNameLabel: "builds"}
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "builds-worker-0", Labels: labels, OwnerReferences: []metav1.OwnerReference{testenv.OwnerRef(cluster)}},
		Spec: clusterv1.MachineSpec{
			ClusterName: "builds",
			Version:     "v1.36.0",
			Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To("builds-worker-0-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "MailgunMachine", Name: "builds-worker-0",
			},
		},
	}
	s.create(machine)
	mm := &infrav1.MailgunMachine{}
	s.readSample("infrastructure_v1beta1_mailgunmachine.yaml", mm)
	mm.Name, mm.Namespace, mm.Labels = "builds-worker-0", ns, labels
	mm.OwnerReferences = []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: machine.Name, UID: machine.UID}}
	s.create(mm)

	s.waitFor(2*time.Minute, "the MailgunMachine's email", func() (bool, string) {
		s.get(client.ObjectKeyFromObject(mm), mm)
		return mm.Status.MessageID != "" && ptr.Deref(mm.Status.Initialization.Provisioned, false), fmt.Sprintf("%+v", mm.Status.Conditions)
	})
	emails := s.fake.MessagesWithVariable(mailer.VarMachine, ns+"/"+mm.Name)
	if len(emails) != 1 {
		s.t.Fatalf("%d emails for the MailgunMachine, want 1", len(emails))
	}
	e := emails[0]
	for _, want := range []string{"--provider-id=" + mm.Spec.ProviderID, "Secret " + ns + "/builds-worker-0-bootstrap", "4 CPUs"} {
		if !strings.Contains(e.Text, want) {
			s.t.Errorf("the machine email lacks %q:\n%s", want, e.Text)
		}
	}
	s.t.Logf("machine email accepted by the Mailgun fake:\n  Subject: %s\n\n%s", e.Subject, e.Text)
	for _, m := range s.fake.Messages() {
		if strings.Contains(m.Text, canary) {
			s.t.Errorf("an email holds the bootstrap data")
		}
	}
	for _, l := range s.logs.all() {
		if strings.Contains(l, canary) {
			s.t.Errorf("the operator logged the bootstrap data: %s", l)
		}
	}

	if err := s.c.Delete(s.ctx, cluster); err != nil {
		s.t.Fatal(err)
	}
	s.waitFor(2*time.Minute, "the Cluster's MailgunCluster, Machine and MailgunMachine to be gone", func() (bool, string) {
		errMC := s.c.Get(s.ctx, client.ObjectKeyFromObject(mc), &infrav1.MailgunCluster{})
		errM := s.c.Get(s.ctx, client.ObjectKeyFromObject(machine), &clusterv1.Machine{})
		errMM := s.c.Get(s.ctx, client.ObjectKeyFromObject(mm), &infrav1.MailgunMachine{})
		return apierrors.IsNotFound(errMC) && apierrors.IsNotFound(errM) && apierrors.IsNotFound(errMM),
			fmt.Sprintf("MailgunCluster: %v, Machine: %v, MailgunMachine: %v", errMC, errM, errMM)
	})
	if n := len(s.fake.MessagesWithVariable(mailer.VarMachine, ns+"/"+mm.Name)); n != 1 {
		s.t.Errorf("%d machine emails after deletion, want 1", n)
	}
}

// checkMetrics scrapes the operator's metrics endpoint from the node, with
// the token of a ServiceAccount bound to the shipped metrics-reader role,
// and without one, verifying the endpoint's certificate (given through the
// Subscription) as the metrics Service's DNS name with its CA.
func (s *suite) checkMetrics() {
	s.create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: userNS, Name: "scraper"}})
	s.create(&rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-scraper-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "capmg-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: userNS, Name: "scraper"}},
	})
	token := s.token(userNS, "scraper")
	url := fmt.Sprintf("https://%s:8443/metrics", s.operatorPod().Status.PodIP)
	get := func(token string) (int, string) {
		req, err := http.NewRequestWithContext(s.ctx, http.MethodGet, url, nil)
		if err != nil {
			s.t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: s.metricsCert.Pool, ServerName: metricsServerName, MinVersion: tls.VersionTLS12},
		}}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, string(b)
	}
	// RBAC for the new binding may take a moment to reach the authorizer.
	s.waitFor(time.Minute, "metrics with an authorized token", func() (bool, string) {
		// A refused certificate shows as HTTP 0 and the TLS error.
		code, body := get(token)
		return code == http.StatusOK && strings.Contains(body, "capmg_"), fmt.Sprintf("HTTP %d: %.300s", code, body)
	})
	if code, _ := get(""); code != http.StatusUnauthorized {
		s.t.Errorf("metrics without a token: HTTP %d, want 401", code)
	}
	if code, _ := get(s.token(userNS, "default")); code != http.StatusForbidden {
		s.t.Errorf("metrics with an unauthorized token: HTTP %d, want 403", code)
	}
}

// checkPermissions asks, as the operator's ServiceAccount, what it may do:
// OLM installed exactly the permissions the bundle asks for.
func (s *suite) checkPermissions() {
	cfg := rest.AnonymousClientConfig(s.rest)
	cfg.BearerToken = s.token(operatorNS, deployment)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	for _, check := range []struct {
		attrs authorizationv1.ResourceAttributes
		want  bool
	}{
		{authorizationv1.ResourceAttributes{Group: infrav1.GroupVersion.Group, Resource: "mailgunclusters", Verb: "list"}, true},
		{authorizationv1.ResourceAttributes{Group: infrav1.GroupVersion.Group, Resource: "mailgunclusters", Verb: "patch", Namespace: userNS}, true},
		{authorizationv1.ResourceAttributes{Group: infrav1.GroupVersion.Group, Resource: "mailgunclusters", Verb: "update", Namespace: userNS}, false},
		{authorizationv1.ResourceAttributes{Group: infrav1.GroupVersion.Group, Resource: "mailgunclusters", Subresource: "status", Verb: "update", Namespace: userNS}, true},
		{authorizationv1.ResourceAttributes{Group: infrav1.GroupVersion.Group, Resource: "mailgunclusters", Subresource: "status", Verb: "patch", Namespace: userNS}, false},
		{authorizationv1.ResourceAttributes{Group: "coordination.k8s.io", Resource: "leases", Verb: "update", Namespace: operatorNS}, true},
		{authorizationv1.ResourceAttributes{Group: "coordination.k8s.io", Resource: "leases", Verb: "delete", Namespace: operatorNS}, false},
		{authorizationv1.ResourceAttributes{Group: infrav1.GroupVersion.Group, Resource: "mailgunclusteridentities", Verb: "watch"}, true},
		{authorizationv1.ResourceAttributes{Group: infrav1.GroupVersion.Group, Resource: "mailgunclusteridentities", Verb: "create"}, false},
		{authorizationv1.ResourceAttributes{Resource: "namespaces", Verb: "watch"}, true},
		{authorizationv1.ResourceAttributes{Resource: "namespaces", Verb: "patch", Name: userNS}, false},
		{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "watch", Namespace: operatorNS}, true},
		{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "create", Namespace: operatorNS}, true},
		{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "patch", Namespace: operatorNS, Name: config.DefaultSecretName}, true},
		{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "patch", Namespace: operatorNS, Name: "mailgun-ca"}, false},
		{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "update", Namespace: operatorNS, Name: config.DefaultSecretName}, false},
		{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "get", Namespace: userNS}, false},
		{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "list"}, false},
		{authorizationv1.ResourceAttributes{Group: "cluster.x-k8s.io", Resource: "clusters", Verb: "update", Namespace: userNS}, false},
		{authorizationv1.ResourceAttributes{Group: infrav1.GroupVersion.Group, Resource: "mailgunmachines", Verb: "patch", Namespace: userNS}, true},
		{authorizationv1.ResourceAttributes{Group: infrav1.GroupVersion.Group, Resource: "mailgunmachines", Subresource: "status", Verb: "update", Namespace: userNS}, true},
		{authorizationv1.ResourceAttributes{Group: infrav1.GroupVersion.Group, Resource: "mailgunmachines", Verb: "create", Namespace: userNS}, false},
		{authorizationv1.ResourceAttributes{Group: "cluster.x-k8s.io", Resource: "machines", Verb: "watch"}, true},
		{authorizationv1.ResourceAttributes{Group: "cluster.x-k8s.io", Resource: "machines", Verb: "patch", Namespace: userNS}, false},
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
}

// upgrade points the CatalogSource at the catalog image that adds 0.1.1
// (replacing 0.1.0) and checks that OLM upgrades the operator, which keeps
// working without resending, and that the user's settings survive it,
// also when they came from an older bundle that shipped them.
func (s *suite) upgrade() {
	s.markAsShippedByTheBundle()
	cat := &v1alpha1.CatalogSource{}
	s.get(types.NamespacedName{Namespace: olmNS, Name: catalogName}, cat)
	cat.Spec.Image = s.cfg.catalogV2
	s.update(cat)
	s.waitCatalogReady(s.cfg.catalogV2)

	s.waitForCSV(operatorNS, pkg+".v0.1.1", 5*time.Minute)
	s.waitInstallPlansComplete()
	s.waitForUpgradedPod()

	// Once 0.1.1 succeeded, OLM deletes the 0.1.0 CSV, and the garbage
	// collector what that CSV still owned: the settings objects must be
	// owned by nobody by then.
	s.waitFor(time.Minute, "the 0.1.0 CSV to be deleted", func() (bool, string) {
		err := s.c.Get(s.ctx, types.NamespacedName{Namespace: operatorNS, Name: pkg + ".v0.1.0"}, &v1alpha1.ClusterServiceVersion{})
		return apierrors.IsNotFound(err), fmt.Sprintf("%v", err)
	})
	s.checkSettingsIntact("after the upgrade")

	s.checkEmailsAfterUpgrade()
}

// waitForUpgradedPod waits until the Ready operator pod runs 0.1.1.
func (s *suite) waitForUpgradedPod() {
	s.waitFor(3*time.Minute, "the operator pod of 0.1.1", func() (bool, string) {
		pod, err := s.readyOperatorPod()
		if err != nil {
			return false, err.Error()
		}
		return pod.Spec.Containers[0].Image == s.cfg.operatorV2, "image " + pod.Spec.Containers[0].Image
	})
}

// checkEmailsAfterUpgrade: a MailgunCluster created after the upgrade gets
// its email, and the one created before keeps its single email and stays
// Ready.
func (s *suite) checkEmailsAfterUpgrade() {
	mc := s.applySample(userNS, "second")
	s.waitForEmail(mc)
	first := &infrav1.MailgunCluster{}
	s.get(types.NamespacedName{Namespace: userNS, Name: "first"}, first)
	if !conditions.IsTrue(first, infrav1.ReadyCondition) {
		s.t.Errorf("the cluster created before the upgrade is no longer Ready: %+v", first.Status.Conditions)
	}
	if n := len(s.emailsFor(first)); n != 1 {
		s.t.Errorf("%d emails for the cluster created before the upgrade, want 1", n)
	}
	// first before the upgrade, second after it (and, in make e2e, the
	// builds cluster's, whose machine's email is not counted here).
	clusterEmails := 0
	for _, m := range s.fake.Messages() {
		if m.Variables[mailer.VarCluster] != "" && m.Variables[mailer.VarCluster] != "team-machines/builds" {
			clusterEmails++
		}
	}
	if clusterEmails != 2 {
		s.t.Errorf("%d MailgunCluster emails for first and second, want 2", clusterEmails)
	}
}

// markAsShippedByTheBundle gives the settings objects the owner
// references and labels OLM gives the objects a bundle ships (read off
// the bundle's metrics Service), as an install of a release whose bundle
// still shipped them has. The next version's operator must take them over
// before OLM deletes the old CSV, or they go with it.
func (s *suite) markAsShippedByTheBundle() {
	svc := &corev1.Service{}
	s.get(types.NamespacedName{Namespace: operatorNS, Name: "capmg-controller-manager-metrics-service"}, svc)
	var refs []metav1.OwnerReference
	for _, ref := range svc.OwnerReferences {
		if ref.Kind == v1alpha1.ClusterServiceVersionKind {
			refs = append(refs, ref)
		}
	}
	if len(refs) == 0 {
		s.t.Fatalf("the bundle's metrics Service has no owner reference to a CSV (%+v): OLM marks shipped objects some other way", svc.OwnerReferences)
	}
	labels := map[string]string{}
	for k, v := range svc.Labels {
		if strings.HasPrefix(k, "olm.") || strings.HasPrefix(k, "operators.coreos.com/") {
			labels[k] = v
		}
	}
	s.t.Logf("marking the settings objects as OLM marks shipped objects: owners %+v, labels %v", refs, labels)
	for _, obj := range []client.Object{s.settingsSecret(), s.settingsConfigMap()} {
		obj.SetOwnerReferences(refs)
		obj.SetLabels(labels)
		s.update(obj)
	}
}

// moveAndDelete takes a cluster through the rest of its life with
// clusterctl v1.14.2 (its library, the code of the command): created on the
// node, moved to a second management cluster (a control plane started
// here, with the operator running in this process), moved back to the
// node, and deleted there. The operator pod is on both ends of a move. One
// email in all, the same message ID throughout, and the operator pod's log
// is checked for errors by the last step.
func (s *suite) moveAndDelete() {
	const ns = "team-move"
	// clusterctl move works on management clusters whose core provider
	// clusterctl installed; the node gets the inventory that would leave.
	// Our CRDs are as OLM installed them from the bundle.
	if err := testenv.PrepareForClusterctl(s.ctx, s.cfg.kubeconfig, testenv.CoreProvider()); err != nil {
		s.t.Fatalf("preparing the node for clusterctl: %v", err)
	}
	s.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	mc := s.applySample(ns, "roaming")
	key := client.ObjectKeyFromObject(mc)
	sentID := s.waitForEmail(mc).Status.MessageID

	target, err := testenv.Start()
	if err != nil {
		s.t.Fatalf("starting the second management cluster: %v", err)
	}
	s.t.Cleanup(func() { _ = target.Stop() })
	targetKubeconfig, err := target.WriteKubeconfig(s.t.TempDir(), "target")
	if err != nil {
		s.t.Fatal(err)
	}
	// The operator came from OLM there too, so clusterctl's inventory lists
	// only the core provider. (Had clusterctl installed it there, moving
	// back would be refused: move wants the target to list every provider
	// the source lists, see docs/install-olm.md.)
	if err := testenv.PrepareForClusterctl(s.ctx, targetKubeconfig, testenv.CoreProvider()); err != nil {
		s.t.Fatalf("preparing the second management cluster for clusterctl: %v", err)
	}
	targetFake := mailgunfake.Start(mgDomain, mgAPIKey)
	s.t.Cleanup(targetFake.Close)
	targetLogs := testenv.RunOperator(s.ctx, s.t, "the second management cluster", target.Config,
		testenv.Settings(mgDomain, mgAPIKey, mgRecipient, targetFake.APIBase()))

	cc, err := clusterctlclient.New(s.ctx, "")
	if err != nil {
		s.t.Fatal(err)
	}
	move := func(from client.Client, fromKubeconfig, toKubeconfig string) {
		start := time.Now()
		if err := testenv.StandInControlPlane(s.ctx, from, testenv.ClusterFor(ns, key.Name)); err != nil {
			s.t.Fatal(err)
		}
		if err := cc.Move(s.ctx, clusterctlclient.MoveOptions{
			FromKubeconfig: clusterctlclient.Kubeconfig{Path: fromKubeconfig},
			ToKubeconfig:   clusterctlclient.Kubeconfig{Path: toKubeconfig},
			Namespace:      ns,
		}); err != nil {
			s.t.Fatalf("clusterctl move: %v", err)
		}
		s.waitFor(time.Minute, "the moved MailgunCluster to leave its source", func() (bool, string) {
			err := from.Get(s.ctx, key, &infrav1.MailgunCluster{})
			return apierrors.IsNotFound(err), fmt.Sprintf("%v", err)
		})
		s.t.Logf("TIMING clusterctl move: %.1fs", time.Since(start).Seconds())
	}

	move(s.c, s.cfg.kubeconfig, targetKubeconfig)
	if got := s.waitReady(target.Client, key).Status.MessageID; got != sentID {
		s.t.Errorf("moved away, the MailgunCluster records %q, want the email sent before, %q", got, sentID)
	}
	move(target.Client, targetKubeconfig, s.cfg.kubeconfig)
	if got := s.waitReady(s.c, key).Status.MessageID; got != sentID {
		s.t.Errorf("moved back, the MailgunCluster records %q, want the email sent before, %q", got, sentID)
	}

	start := time.Now()
	for _, obj := range []client.Object{&infrav1.MailgunCluster{}, &clusterv1.Cluster{}} {
		obj.SetNamespace(ns)
		obj.SetName(key.Name)
		if err := s.c.Delete(s.ctx, obj); err != nil {
			s.t.Fatalf("deleting %T %s: %v", obj, key, err)
		}
	}
	s.waitFor(time.Minute, "the operator to release the deleted MailgunCluster", func() (bool, string) {
		err := s.c.Get(s.ctx, key, &infrav1.MailgunCluster{})
		return apierrors.IsNotFound(err), fmt.Sprintf("%v", err)
	})
	s.t.Logf("TIMING delete: %.1fs", time.Since(start).Seconds())

	if n := len(s.emailsFor(mc)) + len(targetFake.MessagesWithVariable(mailer.VarCluster, key.String())); n != 1 {
		s.t.Errorf("%d emails for the moved cluster, want 1", n)
	}
	for _, line := range targetLogs.ErrorLines() {
		s.t.Errorf("the second management cluster's operator logged an error: %s", line)
	}
}

// uninstall deletes the Subscription and the CSV, as docs/install-olm.md
// says, and checks what is left: no operator, the CRDs and the
// MailgunClusters, and the user's settings.
func (s *suite) uninstall() {
	s.removeOperator()
	// What stays, per docs/install-olm.md ("Uninstall").
	for _, obj := range []client.Object{
		&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "mailgunclusters.infrastructure.cluster.x-k8s.io"}},
		&infrav1.MailgunCluster{ObjectMeta: metav1.ObjectMeta{Namespace: userNS, Name: "first"}},
		// OLM v0 does not garbage-collect the namespaced RBAC that the
		// bundle ships as plain objects; the docs say to delete it.
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: "capmg-manager-role"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: "capmg-manager-rolebinding"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: "capmg-leader-election-role"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: "capmg-leader-election-rolebinding"}},
	} {
		if err := s.c.Get(s.ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			s.t.Errorf("%T %s should remain after uninstall: %v", obj, client.ObjectKeyFromObject(obj), err)
		}
	}
	// What goes with the CSV: the operator's ServiceAccount and its
	// metrics Service.
	s.waitFor(time.Minute, "the bundle's own objects to be garbage collected", func() (bool, string) {
		var left []string
		for _, obj := range []client.Object{
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: deployment}},
			&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: "capmg-controller-manager-metrics-service"}},
		} {
			if err := s.c.Get(s.ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
				left = append(left, fmt.Sprintf("%T %s", obj, obj.GetName()))
			}
		}
		return len(left) == 0, strings.Join(left, ", ")
	})
	// The user's settings stay, as they were.
	s.checkSettingsIntact("after uninstalling")
	// The MailgunClusters keep their finalizer with no operator to remove
	// it; the docs say to delete them before uninstalling. Release them here
	// so that the node's teardown is not held up.
	s.releaseFinalizers()
}

// removeOperator deletes the Subscription and the CSV of the channel's
// head, as docs/install-olm.md says, and waits for the operator to go.
func (s *suite) removeOperator() {
	sub := &v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: pkg}}
	if err := s.c.Delete(s.ctx, sub); err != nil {
		s.t.Fatal(err)
	}
	csv := &v1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: pkg + ".v0.1.1"}}
	if err := s.c.Delete(s.ctx, csv); err != nil {
		s.t.Fatal(err)
	}
	s.waitFor(2*time.Minute, "the operator to be removed", func() (bool, string) {
		pods := &corev1.PodList{}
		if err := s.c.List(s.ctx, pods, client.InNamespace(operatorNS), client.MatchingLabels{"control-plane": "controller-manager"}); err != nil {
			return false, err.Error()
		}
		err := s.c.Get(s.ctx, types.NamespacedName{Namespace: operatorNS, Name: deployment}, &appsv1.Deployment{})
		return len(pods.Items) == 0 && apierrors.IsNotFound(err), fmt.Sprintf("%d pods, Deployment: %v", len(pods.Items), err)
	})
}

// installModes installs the operator again in each install mode the CSV
// supports besides AllNamespaces, as docs/install-olm.md says: the
// OperatorGroup's targetNamespaces name the one namespace to watch, which
// OLM passes to the operator (WATCH_NAMESPACE). A MailgunCluster there gets
// its email with the settings the operator's namespace kept; one in another
// namespace is left alone.
func (s *suite) installModes() {
	const other = "team-b"
	s.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}})
	for _, mode := range []struct{ name, target, ignored string }{
		{"OwnNamespace", operatorNS, userNS},
		{"SingleNamespace", other, userNS},
	} {
		start := time.Now()
		s.mergePatch(&operatorsv1.OperatorGroup{}, "capmg", map[string]any{"spec": map[string]any{"targetNamespaces": []string{mode.target}}})
		s.create(s.subscription())
		s.waitForCSV(operatorNS, pkg+".v0.1.1", 5*time.Minute)
		s.waitDeploymentAvailable(operatorNS, deployment, 3*time.Minute)
		if got := s.operatorPod().Annotations["olm.targetNamespaces"]; got != mode.target {
			s.t.Errorf("%s: the operator pod's olm.targetNamespaces is %q, want %q", mode.name, got, mode.target)
		}
		s.t.Logf("TIMING %s install to the operator running: %.1fs", mode.name, time.Since(start).Seconds())

		name := strings.ToLower(mode.name)
		watched := s.waitForEmail(s.applySample(mode.target, name))
		if n := len(s.emailsFor(watched)); n != 1 {
			s.t.Errorf("%s: %d emails for %s/%s, want 1", mode.name, n, mode.target, name)
		}
		ignored := s.applySample(mode.ignored, name)
		holdsFor(s.ctx, s.t, 10*time.Second, mode.name+": nothing done outside "+mode.target, func() (bool, string) {
			got := &infrav1.MailgunCluster{}
			if err := s.c.Get(s.ctx, client.ObjectKeyFromObject(ignored), got); err != nil {
				return false, err.Error()
			}
			return len(got.Status.Conditions) == 0 && len(got.Finalizers) == 0 && len(s.emailsFor(got)) == 0,
				fmt.Sprintf("conditions %v, finalizers %v, %d emails", got.Status.Conditions, got.Finalizers, len(s.emailsFor(got)))
		})
		if err := s.c.Delete(s.ctx, ignored); err != nil {
			s.t.Errorf("deleting %s/%s: %v", mode.ignored, name, err)
		}
		s.removeOperator()
	}
	s.releaseFinalizers()
}

// checkOperatorLogs fails on any error-level line any operator pod logged
// during the whole run.
func (s *suite) checkOperatorLogs() {
	lines := s.logs.all()
	if len(lines) == 0 {
		s.t.Fatal("no operator log lines were collected")
	}
	for _, l := range lines {
		if strings.Contains(l, `"level":"error"`) || strings.Contains(l, `"level":"dpanic"`) ||
			strings.Contains(l, `"level":"panic"`) || strings.Contains(l, `"level":"fatal"`) {
			s.t.Errorf("error-level line in the operator's log: %s", l)
		}
	}
	s.t.Logf("%d operator log lines checked", len(lines))
}

// --- helpers -------------------------------------------------------------------

func (s *suite) applySample(namespace, name string) *infrav1.MailgunCluster {
	cluster := &clusterv1.Cluster{}
	s.readSample("cluster.yaml", cluster)
	cluster.Name, cluster.Namespace = name, namespace
	cluster.Spec.InfrastructureRef.Name = name
	s.create(cluster)
	mc := &infrav1.MailgunCluster{}
	s.readSample("infrastructure_v1beta1_mailguncluster.yaml", mc)
	mc.Name, mc.Namespace = name, namespace
	// No Cluster API core controller runs here; own it as it would.
	mc.OwnerReferences = []metav1.OwnerReference{testenv.OwnerRef(cluster)}
	s.create(mc)
	return mc
}

func (s *suite) readSample(file string, obj client.Object) {
	b, err := os.ReadFile(filepath.Join(s.cfg.repoRoot, "config", "samples", file))
	if err != nil {
		s.t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, obj); err != nil {
		s.t.Fatalf("parsing %s: %v", file, err)
	}
}

func (s *suite) releaseFinalizers() {
	list := &infrav1.MailgunClusterList{}
	if err := s.c.List(s.ctx, list); err != nil {
		s.t.Fatal(err)
	}
	for i := range list.Items {
		mc := &list.Items[i]
		patch := client.MergeFrom(mc.DeepCopy())
		mc.Finalizers = nil
		if err := s.c.Patch(s.ctx, mc, patch); err != nil {
			s.t.Errorf("releasing %s: %v", mc.Name, err)
		}
	}
}

func (s *suite) emailsFor(mc *infrav1.MailgunCluster) []mailgunfake.Message {
	return s.fake.MessagesWithVariable(mailer.VarCluster, mc.Namespace+"/"+mc.Name)
}

func (s *suite) waitForEmail(mc *infrav1.MailgunCluster) *infrav1.MailgunCluster {
	return s.waitReady(s.c, client.ObjectKeyFromObject(mc))
}

// waitReady waits until the MailgunCluster in the cluster of c is Ready
// with a message ID.
func (s *suite) waitReady(c client.Client, key types.NamespacedName) *infrav1.MailgunCluster {
	got := &infrav1.MailgunCluster{}
	s.waitFor(2*time.Minute, "MailgunCluster "+key.String()+" to be Ready", func() (bool, string) {
		if err := c.Get(s.ctx, key, got); err != nil {
			return false, err.Error()
		}
		return conditions.IsTrue(got, infrav1.ReadyCondition) && got.Status.MessageID != "",
			fmt.Sprintf("%+v", got.Status.Conditions)
	})
	return got
}

// token is a short-lived token of a ServiceAccount.
func (s *suite) token(namespace, name string) string {
	expiry := int64(3600)
	tr, err := s.cs.CoreV1().ServiceAccounts(namespace).CreateToken(s.ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		s.t.Fatalf("token for %s/%s: %v", namespace, name, err)
	}
	return tr.Status.Token
}

func (s *suite) operatorPod() *corev1.Pod {
	pod, err := s.readyOperatorPod()
	if err != nil {
		s.t.Fatal(err)
	}
	return pod
}

// readyOperatorPod is the one Ready operator pod.
func (s *suite) readyOperatorPod() (*corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := s.c.List(s.ctx, pods, client.InNamespace(operatorNS), client.MatchingLabels{"control-plane": "controller-manager"}); err != nil {
		return nil, err
	}
	var ready []*corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
				ready = append(ready, p)
			}
		}
	}
	if len(ready) != 1 {
		return nil, fmt.Errorf("%d Ready operator pods of %d", len(ready), len(pods.Items))
	}
	return ready[0], nil
}

func (s *suite) readManifests(path string) []*unstructured.Unstructured {
	b, err := os.ReadFile(path)
	if err != nil {
		s.t.Fatal(err)
	}
	objs, err := manifests.Decode(b)
	if err != nil {
		s.t.Fatalf("decoding %s: %v", path, err)
	}
	return objs
}

func (s *suite) readManifestDir(dir string) []*unstructured.Unstructured {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		s.t.Fatalf("no manifests in %s: %v", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		objs = append(objs, s.readManifests(f)...)
	}
	return objs
}

func (s *suite) createUnstructured(obj *unstructured.Unstructured) {
	s.t.Helper()
	if err := s.c.Create(s.ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		s.t.Fatalf("creating %s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
}

func (s *suite) waitCRDEstablished(name string) {
	s.waitFor(time.Minute, "CRD "+name+" to be established", func() (bool, string) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := s.c.Get(s.ctx, types.NamespacedName{Name: name}, crd); err != nil {
			return false, err.Error()
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, ""
			}
		}
		return false, "not established"
	})
}

func (s *suite) waitDeploymentAvailable(namespace, name string, timeout time.Duration) {
	s.waitFor(timeout, "Deployment "+namespace+"/"+name+" to be available", func() (bool, string) {
		dep := &appsv1.Deployment{}
		if err := s.c.Get(s.ctx, types.NamespacedName{Namespace: namespace, Name: name}, dep); err != nil {
			return false, err.Error()
		}
		return dep.Status.ObservedGeneration == dep.Generation && dep.Status.AvailableReplicas > 0 &&
				dep.Status.UpdatedReplicas == dep.Status.Replicas,
			fmt.Sprintf("%d/%d available", dep.Status.AvailableReplicas, dep.Status.Replicas)
	})
}

func (s *suite) waitCatalogReady(image string) {
	s.waitFor(3*time.Minute, "CatalogSource "+catalogName+" to serve "+image, func() (bool, string) {
		cat := &v1alpha1.CatalogSource{}
		if err := s.c.Get(s.ctx, types.NamespacedName{Namespace: olmNS, Name: catalogName}, cat); err != nil {
			return false, err.Error()
		}
		pods := &corev1.PodList{}
		if err := s.c.List(s.ctx, pods, client.InNamespace(olmNS), client.MatchingLabels{"olm.catalogSource": catalogName}); err != nil {
			return false, err.Error()
		}
		serving := false
		for _, p := range pods.Items {
			if p.Spec.Containers[0].Image == image && p.Status.Phase == corev1.PodRunning {
				serving = true
			}
		}
		state := ""
		if cat.Status.GRPCConnectionState != nil {
			state = cat.Status.GRPCConnectionState.LastObservedState
		}
		return serving && state == "READY", fmt.Sprintf("connection %q, pod of %s running: %v", state, image, serving)
	})
}

func (s *suite) waitForCSV(namespace, name string, timeout time.Duration) {
	s.waitFor(timeout, "CSV "+name+" to succeed", func() (bool, string) {
		csv := &v1alpha1.ClusterServiceVersion{}
		if err := s.c.Get(s.ctx, types.NamespacedName{Namespace: namespace, Name: name}, csv); err != nil {
			return false, err.Error()
		}
		return csv.Status.Phase == v1alpha1.CSVPhaseSucceeded, fmt.Sprintf("phase %s: %s", csv.Status.Phase, csv.Status.Message)
	})
}

func (s *suite) waitInstallPlansComplete() {
	s.waitFor(2*time.Minute, "InstallPlans to complete", func() (bool, string) {
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

func (s *suite) waitFor(timeout time.Duration, what string, cond func() (bool, string)) {
	s.t.Helper()
	waitFor(s.ctx, s.t, timeout, what, s.dump, cond)
}

// dump describes OLM's view and the pods' logs, for failures.
func (s *suite) dump() string {
	var b strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
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
	if s.c.List(ctx, csvs) == nil {
		for _, csv := range csvs.Items {
			fmt.Fprintf(&b, "CSV %s/%s: phase %s reason %s: %s\n", csv.Namespace, csv.Name, csv.Status.Phase, csv.Status.Reason, csv.Status.Message)
		}
	}
	s.dumpOLMv1(ctx, &b)
	pods := &corev1.PodList{}
	if s.c.List(ctx, pods) == nil {
		for _, p := range pods.Items {
			fmt.Fprintf(&b, "Pod %s/%s: %s", p.Namespace, p.Name, p.Status.Phase)
			for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
				state := "running"
				if w := cs.State.Waiting; w != nil {
					state = w.Reason + ": " + w.Message
				} else if x := cs.State.Terminated; x != nil {
					state = fmt.Sprintf("terminated %d %s", x.ExitCode, x.Reason)
				}
				fmt.Fprintf(&b, " [%s ready=%v %s]", cs.Name, cs.Ready, state)
			}
			b.WriteString("\n")
		}
		for _, p := range pods.Items {
			if !slices.Contains(s.dumpNamespaces, p.Namespace) {
				continue
			}
			for _, c := range p.Spec.Containers {
				tail := int64(20)
				out, err := s.cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name, TailLines: &tail}).DoRaw(ctx)
				if err == nil {
					fmt.Fprintf(&b, "--- %s/%s %s (last 20 lines) ---\n%s\n", p.Namespace, p.Name, c.Name, out)
				}
			}
		}
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

// podLogs follows the logs of every pod matching a selector for the whole
// test, so that a pod that an upgrade replaces still has its log checked.
type podLogs struct {
	mu     sync.Mutex
	lines  []string
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func followPodLogs(ctx context.Context, cs *kubernetes.Clientset, namespace, selector, dir string) *podLogs {
	ctx, cancel := context.WithCancel(ctx)
	l := &podLogs{cancel: cancel}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		seen := map[string]bool{}
		ticker := time.NewTicker(time.Second)
		defer ticker.Stop()
		for {
			pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
			if err == nil {
				for _, p := range pods.Items {
					running := false
					for _, c := range p.Status.ContainerStatuses {
						running = running || c.State.Running != nil || c.State.Terminated != nil
					}
					if seen[p.Name] || !running {
						continue
					}
					seen[p.Name] = true
					l.wg.Add(1)
					go func(name string) { defer l.wg.Done(); l.follow(ctx, cs, namespace, name, dir) }(p.Name)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
		}
	}()
	return l
}

func (l *podLogs) follow(ctx context.Context, cs *kubernetes.Clientset, namespace, name, dir string) {
	stream, err := cs.CoreV1().Pods(namespace).GetLogs(name, &corev1.PodLogOptions{Container: "manager", Follow: true}).Stream(ctx)
	if apierrors.IsNotFound(err) {
		return // gone between listing and following: nothing to read
	}
	if err != nil {
		l.add(fmt.Sprintf(`{"level":"error","msg":"e2e: cannot follow the log of %s: %v"}`, name, err))
		return
	}
	defer func() { _ = stream.Close() }()
	f, err := os.Create(filepath.Join(dir, "operator-"+name+".log"))
	if err == nil {
		defer func() { _ = f.Close() }()
	}
	sc := bufio.NewScanner(stream)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		l.add(sc.Text())
		if f != nil {
			_, _ = fmt.Fprintln(f, sc.Text())
		}
	}
}

func (l *podLogs) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
}

func (l *podLogs) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

func (l *podLogs) stop() {
	l.cancel()
	l.wg.Wait()
}
