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

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/hack/packaging/manifests"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/config"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/testca"
)

// The sections of the docs the clusterctl test follows.
var (
	docSamples           = docSection{"install-olm.md", "## 4. Request a cluster"}
	docClusterctlInstall = docSection{"install-clusterctl.md", "## Install"}
	docClusterctlRequest = docSection{"install-clusterctl.md", "## Request a cluster"}
	docClusterctlUpgrade = docSection{"install-clusterctl.md", "### Upgrading from a release that shipped the settings objects"}
	docClusterctlDelete  = docSection{"install-clusterctl.md", "## Delete"}
)

// capiProvider is one of the Cluster API providers `clusterctl init`
// installs by default, as its release publishes it: components built from
// its kustomize directory in the cluster-api module, with its release
// image.
type capiProvider struct {
	name, kind, label  string // clusterctl's provider name and type, and repository label
	dir, file, image   string // kustomize directory in the module, components file, image name
	namespace, manager string // where its Deployment runs
}

var capiProviders = []capiProvider{
	{"cluster-api", "CoreProvider", "cluster-api", "core/config/default", "core-components.yaml",
		"cluster-api-controller", "capi-system", "capi-controller-manager"},
	{"kubeadm", "BootstrapProvider", "bootstrap-kubeadm", "bootstrap/kubeadm/config/default", "bootstrap-components.yaml",
		"kubeadm-bootstrap-controller", "capi-kubeadm-bootstrap-system", "capi-kubeadm-bootstrap-controller-manager"},
	{"kubeadm", "ControlPlaneProvider", "control-plane-kubeadm", "controlplane/kubeadm/config/default", "control-plane-components.yaml",
		"kubeadm-control-plane-controller", "capi-kubeadm-control-plane-system", "capi-kubeadm-control-plane-controller-manager"},
}

// TestInstallWithClusterctl installs the provider as docs/install-clusterctl.md
// says, with clusterctl v1.14.2 and Cluster API's controllers running as
// pods: `clusterctl init` from the artifacts the doc's `make
// release-manifests` wrote for 0.1.0, the settings edited as the doc
// says, a generated cluster that gets one email and that Cluster API's core
// controller sees provisioned, the samples of docs/install-olm.md's
// section 4 (which need that controller), `clusterctl upgrade` to 0.1.1,
// and `clusterctl delete`. It runs after TestInstallWithOLMv1 on the same node
// (make e2e-olmv1), whose images trust the Mailgun fake's CA.
func TestInstallWithClusterctl(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cfg := loadSettings(t, modeClusterctl)
	cert, err := tls.LoadX509KeyPair(cfg.fakeCert, cfg.fakeKey)
	if err != nil {
		t.Fatal(err)
	}
	s := newSuite(ctx, t, cfg, cert)
	s.dumpNamespaces = []string{operatorNS, "capi-system"}
	// clusterctl reads $XDG_CONFIG_HOME/cluster-api/clusterctl.yaml first,
	// then ~/.cluster-api/clusterctl.yaml (the doc's), so both point into a
	// fresh HOME; and it checks GitHub for a newer clusterctl unless told
	// not to.
	home := t.TempDir()
	s.docEnv = []string{
		"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "CLUSTERCTL_DISABLE_VERSIONCHECK=true",
	}
	s.docPath = []string{filepath.Dir(cfg.clusterctl)}

	s.runSteps(t, []step{
		{name: "the OLM v1 test's namespace and settings are gone", run: s.removeEarlierInstall},
		{name: "cert-manager's CRDs are installed", run: s.installCertManagerCRDs},
		{name: "clusterctl init installs Cluster API and the provider from its artifacts", run: func() { s.clusterctlInit(home) }},
		{name: "a generated cluster gets exactly one email and Cluster API sees it provisioned", run: s.generateCluster},
		{name: "the samples, applied as the OLM guide says, get one email", run: s.applySamples},
		{name: "clusterctl upgrade keeps the edited settings and sends no second email", run: s.clusterctlUpgrade},
		{name: "clusterctl delete removes the provider and leaves the settings and CRDs", run: s.clusterctlDelete},
		{name: "the operator logged no error", run: s.checkOperatorLogs},
	})
}

// removeEarlierInstall deletes what TestInstallWithOLMv1 left on purpose:
// the namespace with the user's settings objects, whose API base names
// that test's fake, so that clusterctl init starts with no settings, as
// its doc describes. (That test's Cluster API CRDs stay; clusterctl init
// updates them.)
func (s *suite) removeEarlierInstall() {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNS}}
	if err := s.c.Delete(s.ctx, ns); err != nil && !apierrors.IsNotFound(err) {
		s.t.Fatal(err)
	}
	s.waitFor(2*time.Minute, "namespace "+operatorNS+" to be gone", func() (bool, string) {
		err := s.c.Get(s.ctx, client.ObjectKeyFromObject(ns), ns)
		return apierrors.IsNotFound(err), fmt.Sprintf("%v", err)
	})
}

// installCertManagerCRDs installs cert-manager's CRDs from its module.
// Cluster API's components ask cert-manager for their webhooks' serving
// certificates; cert-manager's controllers cannot be built here (their
// cmd/ modules replace the main module with ../../, so Go cannot take
// them from the module proxy), so issueCertificates does their part.
// With the CRDs present, clusterctl init finds a cert-manager and installs
// none, as on a cluster whose cert-manager someone else runs.
func (s *suite) installCertManagerCRDs() {
	for _, obj := range s.readManifestDir(s.cfg.certManagerCRDs) {
		s.createUnstructured(obj)
		s.waitCRDEstablished(obj.GetName())
	}
}

// clusterctlInit writes a local clusterctl repository and configuration
// and runs the doc's `clusterctl init`.
func (s *suite) clusterctlInit(home string) {
	repo := s.cfg.clusterctlRepo
	// Cluster API's providers, as its release publishes them (there is no
	// GitHub here): the components of the module's kustomize directories
	// with the release's image names, which the node's registry serves.
	metadata, err := os.ReadFile(filepath.Join(s.cfg.capiDir, "metadata.yaml"))
	if err != nil {
		s.t.Fatal(err)
	}
	conf := clusterctlConfig{}
	for _, p := range capiProviders {
		raw, err := manifests.Kustomize(filepath.Join(s.cfg.capiDir, p.dir))
		if err != nil {
			s.t.Fatal(err)
		}
		staging := []byte("gcr.io/k8s-staging-cluster-api/" + p.image + ":main")
		if !bytes.Contains(raw, staging) {
			s.t.Fatalf("%s's components name no %s", p.dir, staging)
		}
		raw = bytes.ReplaceAll(raw, staging, []byte("registry.k8s.io/cluster-api/"+p.image+":"+s.cfg.capiVersion))
		dir := filepath.Join(repo, p.label, s.cfg.capiVersion)
		if err := os.MkdirAll(dir, 0o750); err != nil {
			s.t.Fatal(err)
		}
		for name, b := range map[string][]byte{p.file: raw, "metadata.yaml": metadata} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
				s.t.Fatal(err)
			}
		}
		conf.Providers = append(conf.Providers, map[string]string{"name": p.name, "type": p.kind, "url": "file://" + filepath.Join(dir, p.file)})
	}
	// The provider as the doc configures it, from the local repository
	// hack/e2e.sh wrote with the doc's `make release-manifests`.
	docConf := clusterctlConfig{}
	blocks := s.docBlocks(docClusterctlInstall, "yaml")
	if len(blocks) == 0 {
		s.t.Fatalf("%s has no clusterctl.yaml", docClusterctlInstall)
	}
	if err := yaml.UnmarshalStrict([]byte(blocks[0]), &docConf); err != nil {
		s.t.Fatalf("%s: %v", docClusterctlInstall, err)
	}
	const published = "https://github.com/capi-mailgun/cluster-api-provider-mailgun/releases/v0.1.0/infrastructure-components.yaml"
	if len(docConf.Providers) != 1 || docConf.Providers[0]["name"] != "mailgun" || docConf.Providers[0]["url"] != published {
		s.t.Fatalf("%s: providers %v, want mailgun at %s", docClusterctlInstall, docConf.Providers, published)
	}
	docConf.Providers[0]["url"] = "file://" + filepath.Join(repo, "infrastructure-mailgun", "v0.1.0", "infrastructure-components.yaml")
	conf.Providers = append(conf.Providers, docConf.Providers[0])
	b, err := yaml.Marshal(conf)
	if err != nil {
		s.t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, ".cluster-api"), 0o700); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".cluster-api", "clusterctl.yaml"), b, 0o600); err != nil {
		s.t.Fatal(err)
	}

	start := time.Now()
	// MAILGUN_API_BASE names the fake, set as the doc's table says (for the
	// EU region, say), in the same export.
	s.runDocCommands(docClusterctlInstall, 0, "key-...", mgAPIKey, "mg.example.com", mgDomain,
		"infra@example.com", mgRecipient+" MAILGUN_API_BASE="+s.fake.APIBase())
	s.issueCertificates()
	for _, p := range capiProviders {
		s.waitDeploymentAvailable(p.namespace, p.manager, 3*time.Minute)
	}
	s.waitDeploymentAvailable(operatorNS, deployment, 3*time.Minute)
	s.t.Logf("TIMING clusterctl init to every provider available: %.1fs", time.Since(start).Seconds())
	// The operator created the user's settings from the initial ones.
	if got := s.settingsConfigMap().Data[config.ConfigMapRecipientKey]; got != mgRecipient {
		s.t.Fatalf("the settings ConfigMap's recipient is %q, want MAIL_RECIPIENT's %q", got, mgRecipient)
	}
	// The doc's edit of a setting.
	s.runDocCommands(docClusterctlInstall, 1)
}

// clusterctlConfig is the part of clusterctl.yaml the test writes.
type clusterctlConfig struct {
	Providers []map[string]string `json:"providers"`
}

// issueCertificates does for Cluster API's components what cert-manager's
// controller and CA injector would: for every Certificate, a CA whose
// certificate goes into the caBundle of every CRD and webhook
// configuration whose cert-manager.io/inject-ca-from annotation names the
// Certificate, and then the Secret the Certificate names, with a serving
// certificate for its DNS names. The Secrets come last: they let Cluster
// API's managers start, and the core manager's CRD migrator then writes
// the same CRDs (the CA goes in by merge patch, too, so that it cannot
// conflict).
func (s *suite) issueCertificates() {
	certs := &unstructured.UnstructuredList{}
	certs.SetAPIVersion("cert-manager.io/v1")
	certs.SetKind("CertificateList")
	if err := s.c.List(s.ctx, certs); err != nil {
		s.t.Fatal(err)
	}
	cas, issued := map[string]*testca.CA{}, map[string]testca.Issued{}
	for _, c := range certs.Items {
		dnsNames, _, _ := unstructured.NestedStringSlice(c.Object, "spec", "dnsNames")
		key := c.GetNamespace() + "/" + c.GetName()
		cas[key] = testca.NewCA(s.t, key)
		issued[key] = cas[key].Issue(s.t, dnsNames, nil)
	}
	if len(cas) != len(capiProviders) {
		s.t.Fatalf("%d Certificates, want one per Cluster API provider (%d)", len(cas), len(capiProviders))
	}
	// inject patches obj with the CA its annotation names, if any.
	injected := 0
	inject := func(obj client.Object, set func(pem []byte)) {
		from, ok := obj.GetAnnotations()["cert-manager.io/inject-ca-from"]
		if !ok {
			return
		}
		ca, ok := cas[from]
		if !ok {
			s.t.Fatalf("%T %s injects the CA of %s, which is no Certificate", obj, obj.GetName(), from)
		}
		before := obj.DeepCopyObject().(client.Object)
		set(ca.PEM)
		if err := s.c.Patch(s.ctx, obj, client.MergeFrom(before)); err != nil {
			s.t.Fatalf("injecting the CA into %T %s: %v", obj, obj.GetName(), err)
		}
		injected++
	}
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	validating := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	mutating := &admissionregistrationv1.MutatingWebhookConfigurationList{}
	for _, list := range []client.ObjectList{crds, validating, mutating} {
		if err := s.c.List(s.ctx, list); err != nil {
			s.t.Fatal(err)
		}
	}
	for i := range crds.Items {
		crd := &crds.Items[i]
		if crd.Spec.Conversion != nil && crd.Spec.Conversion.Webhook != nil && crd.Spec.Conversion.Webhook.ClientConfig != nil {
			inject(crd, func(pem []byte) { crd.Spec.Conversion.Webhook.ClientConfig.CABundle = pem })
		}
	}
	for i := range validating.Items {
		vwc := &validating.Items[i]
		inject(vwc, func(pem []byte) {
			for j := range vwc.Webhooks {
				vwc.Webhooks[j].ClientConfig.CABundle = pem
			}
		})
	}
	for i := range mutating.Items {
		mwc := &mutating.Items[i]
		inject(mwc, func(pem []byte) {
			for j := range mwc.Webhooks {
				mwc.Webhooks[j].ClientConfig.CABundle = pem
			}
		})
	}
	if injected == 0 {
		s.t.Fatal("no CRD or webhook configuration asks for a Certificate's CA")
	}
	for _, c := range certs.Items {
		secretName, _, _ := unstructured.NestedString(c.Object, "spec", "secretName")
		i := issued[c.GetNamespace()+"/"+c.GetName()]
		s.create(&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: c.GetNamespace(), Name: secretName},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{corev1.TLSCertKey: i.CertPEM, corev1.TLSPrivateKeyKey: i.KeyPEM, "ca.crt": i.CAPEM},
		})
	}
	s.t.Logf("issued %d certificates, injected their CAs into %d objects", len(cas), injected)
}

// generateCluster runs the doc's `clusterctl generate cluster | kubectl
// apply`: one email, to the recipient as the doc's edit left it, and
// Cluster API's core controller (a pod) marks the Cluster's infrastructure
// provisioned from the MailgunCluster's status.
func (s *suite) generateCluster() {
	start := time.Now()
	s.runDocCommands(docClusterctlRequest, 0)
	mc := &infrav1.MailgunCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "payments"}}
	got := s.waitForEmail(mc)
	s.t.Logf("TIMING generated cluster applied to Ready: %.1fs", time.Since(start).Seconds())
	emails := s.emailsFor(mc)
	if len(emails) != 1 {
		s.t.Fatalf("%d emails for %s, want exactly 1", len(emails), mc.Name)
	}
	if e := emails[0]; len(e.To) != 1 || e.To[0] != "new@example.com" || e.ReplyTo != "alice@example.com" || !strings.Contains(e.Text, "3 control plane nodes, 5 workers") {
		s.t.Errorf("email fields wrong: %+v", e)
	}
	if got.Status.MessageID != emails[0].ID {
		s.t.Errorf("status.messageID = %q, want %q", got.Status.MessageID, emails[0].ID)
	}
	s.waitFor(2*time.Minute, "Cluster API to see Cluster default/payments's infrastructure provisioned", func() (bool, string) {
		cl := &clusterv1.Cluster{}
		if err := s.c.Get(s.ctx, client.ObjectKeyFromObject(mc), cl); err != nil {
			return false, err.Error()
		}
		p := cl.Status.Initialization.InfrastructureProvisioned
		return p != nil && *p, fmt.Sprintf("status.initialization %+v", cl.Status.Initialization)
	})
}

// applySamples runs docs/install-olm.md's section 4 as written: the
// samples do not depend on the installer, but need Cluster API's core
// controller, which sets the sample Cluster as its MailgunCluster's owner,
// and a cluster admin (a MailgunClusterIdentity is cluster-scoped). Only
// this node runs that controller. The MailgunCluster gets one email; the
// MailgunMachine waits for a Machine.
func (s *suite) applySamples() {
	s.runDocCommands(docSamples, 0)
	mc := &infrav1.MailgunCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hello-mailgun"}}
	s.waitForEmail(mc)
	if n := len(s.emailsFor(mc)); n != 1 {
		s.t.Fatalf("%d emails for the sample MailgunCluster, want 1", n)
	}
	key := types.NamespacedName{Namespace: "default", Name: "hello-mailgun-worker-0"}
	s.waitFor(time.Minute, "the sample MailgunMachine to wait for a Machine", func() (bool, string) {
		mm := &infrav1.MailgunMachine{}
		if err := s.c.Get(s.ctx, key, mm); err != nil {
			return false, err.Error()
		}
		c := conditions.Get(mm, infrav1.EmailSentCondition)
		return c != nil && c.Reason == infrav1.WaitingForMachineReason, fmt.Sprintf("%+v", mm.Status.Conditions)
	})
}

// clusterctlUpgrade runs the doc's upgrade to 0.1.1. The settings stay as
// the user edited them; the new operator sends nothing for the cluster it
// finds Ready, and one email for a new one.
func (s *suite) clusterctlUpgrade() {
	before := s.settingsConfigMap()
	start := time.Now()
	s.runDocCommands(docClusterctlUpgrade, 0)
	s.waitFor(3*time.Minute, "the operator of 0.1.1 to run", func() (bool, string) {
		dep := &appsv1.Deployment{}
		if err := s.c.Get(s.ctx, types.NamespacedName{Namespace: operatorNS, Name: deployment}, dep); err != nil {
			return false, err.Error()
		}
		var image string
		for _, c := range dep.Spec.Template.Spec.Containers {
			if c.Name == "manager" {
				image = c.Image
			}
		}
		if !strings.HasSuffix(image, ":v0.1.1") {
			return false, "manager image " + image
		}
		_, err := s.readyOperatorPod()
		return err == nil && dep.Status.UpdatedReplicas == 1 && dep.Status.Replicas == 1, fmt.Sprintf("%v", err)
	})
	s.t.Logf("TIMING clusterctl upgrade to the new operator Ready: %.1fs", time.Since(start).Seconds())
	after := s.settingsConfigMap()
	if after.UID != before.UID || after.Data[config.ConfigMapRecipientKey] != "new@example.com" {
		s.t.Fatalf("the settings ConfigMap changed in the upgrade: %v (uid %s), was %v (uid %s)", after.Data, after.UID, before.Data, before.UID)
	}
	s.runDocCommands(docClusterctlRequest, 0, "payments", "orders")
	s.waitForEmail(&infrav1.MailgunCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "orders"}})
	for _, name := range []string{"payments", "hello-mailgun", "orders"} {
		if n := len(s.emailsFor(&infrav1.MailgunCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}})); n != 1 {
			s.t.Errorf("%d emails for %s after the upgrade, want 1", n, name)
		}
	}
}

// clusterctlDelete runs the doc's `clusterctl delete` and checks what the
// doc says goes and stays.
func (s *suite) clusterctlDelete() {
	// The doc: delete the clusters first, so that the operator removes
	// its finalizers.
	for _, obj := range []client.Object{
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "payments"}},
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "orders"}},
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hello-mailgun"}},
		&infrav1.MailgunMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hello-mailgun-worker-0"}},
	} {
		if err := s.c.Delete(s.ctx, obj); err != nil {
			s.t.Fatalf("deleting %T %s: %v", obj, obj.GetName(), err)
		}
	}
	s.waitFor(2*time.Minute, "the Clusters, MailgunClusters and MailgunMachines to be gone", func() (bool, string) {
		mcs, mms, cls := &infrav1.MailgunClusterList{}, &infrav1.MailgunMachineList{}, &clusterv1.ClusterList{}
		for _, list := range []client.ObjectList{mcs, mms, cls} {
			if err := s.c.List(s.ctx, list); err != nil {
				return false, err.Error()
			}
		}
		return len(mcs.Items)+len(mms.Items)+len(cls.Items) == 0,
			fmt.Sprintf("%d MailgunClusters, %d MailgunMachines, %d Clusters", len(mcs.Items), len(mms.Items), len(cls.Items))
	})
	s.runDocCommands(docClusterctlDelete, 0)
	gone := []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: deployment}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: "capmg-mailgun-initial-credentials"}},
	}
	stay := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNS}},
		&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "mailgunclusters.infrastructure.cluster.x-k8s.io"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: config.DefaultSecretName}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: config.DefaultConfigMapName}},
	}
	s.waitFor(2*time.Minute, "clusterctl delete to remove the provider", func() (bool, string) {
		var left []string
		for _, obj := range gone {
			if err := s.c.Get(s.ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
				left = append(left, fmt.Sprintf("%T %s (%v)", obj, obj.GetName(), err))
			}
		}
		// The components' cluster-scoped RBAC, named capmg-system-*.
		provider := client.MatchingLabels{"cluster.x-k8s.io/provider": "infrastructure-mailgun"}
		roles, bindings := &rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{}
		if err := s.c.List(s.ctx, roles, provider); err != nil {
			return false, err.Error()
		}
		if err := s.c.List(s.ctx, bindings, provider); err != nil {
			return false, err.Error()
		}
		for _, r := range roles.Items {
			left = append(left, "ClusterRole "+r.Name)
		}
		for _, b := range bindings.Items {
			left = append(left, "ClusterRoleBinding "+b.Name)
		}
		return len(left) == 0, strings.Join(left, ", ")
	})
	for _, obj := range stay {
		if err := s.c.Get(s.ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			s.t.Errorf("%T %s: %v; the doc says clusterctl delete leaves it", obj, obj.GetName(), err)
		}
	}
	if got := s.settingsConfigMap().Data[config.ConfigMapRecipientKey]; got != "new@example.com" {
		s.t.Errorf("the settings ConfigMap's recipient is %q after the delete, want the user's new@example.com", got)
	}
}
