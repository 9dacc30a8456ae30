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
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/config"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/testca"
)

const (
	olmv1NS        = "olmv1-system"
	extensionName  = "capmg"
	installerName  = "capmg-installer"
	olmv1Group     = "olm.operatorframework.io"
	catalogdServer = "catalogd-service." + olmv1NS + ".svc"
)

// docOLMv1Installer is the section of docs/install-olm.md whose commands
// create the installer ServiceAccount.
var docOLMv1Installer = docSection{"install-olm.md", "### 2. Create the namespace and the installer ServiceAccount"}

var (
	clusterCatalogGVK   = schema.GroupVersionKind{Group: olmv1Group, Version: "v1", Kind: "ClusterCatalog"}
	clusterExtensionGVK = schema.GroupVersionKind{Group: olmv1Group, Version: "v1", Kind: "ClusterExtension"}
)

// TestInstallWithOLMv1 installs the operator with OLM v1 (catalogd and
// operator-controller v1.5.1 as pods, from upstream's standard.yaml) on the
// test node, from the shipped examples under config/olmv1: ClusterCatalog →
// the package in catalogd's catalog → the installer ServiceAccount and its
// RBAC → ClusterExtension → operator pod → settings → one email, drift
// correction and an upgrade that leave the settings alone, and uninstall.
// Run it with `make e2e-olmv1`.
func TestInstallWithOLMv1(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cfg := loadSettings(t, modeOLMv1)
	// A ClusterExtension cannot add an environment or a volume to the
	// operator's pod, so the fake's CA is in the operator image's system
	// trust bundle (hack/e2e.sh builds it so) instead of SSL_CERT_FILE.
	cert, err := tls.LoadX509KeyPair(cfg.fakeCert, cfg.fakeKey)
	if err != nil {
		t.Fatal(err)
	}
	s := newSuite(ctx, t, cfg, cert)
	s.dumpNamespaces = []string{olmv1NS, operatorNS}

	s.runSteps(t, []step{
		{name: "OLM v1 runs in the cluster", run: s.installOLMv1},
		{name: "the ClusterCatalog serves our package", run: s.addClusterCatalog},
		{name: "a ClusterExtension installs the operator as the installer ServiceAccount", run: s.installExtension},
		{name: "the installer ServiceAccount may touch only the bundle's objects", run: s.checkInstallerPermissions},
		{name: "a MailgunCluster gets exactly one email", run: func() { s.requestCluster("first") }},
		{name: "the operator holds only the permissions it needs", run: s.checkPermissions},
		{name: "upgrading by version range sends no second email and keeps the settings", run: s.upgradeExtension},
		{name: "drift correction restores the bundle's objects and leaves the settings", run: s.correctDrift},
		{name: "deleting the ClusterExtension uninstalls the operator", run: s.uninstallExtension},
		{name: "the operator logged no error", run: s.checkOperatorLogs},
	})
}

// olmv1PKI is the CA and serving certificates cert-manager would issue for
// standard.yaml's Certificates; cert-manager is not available here.
type olmv1PKI struct {
	caPEM   []byte
	secrets []*corev1.Secret
}

// newOLMv1PKI makes the CA (the Secret cert-manager/olmv1-ca) and the
// serving certificates of catalogd and operator-controller, signed by it,
// as the Secrets standard.yaml's Certificates name.
func newOLMv1PKI(t *testing.T) olmv1PKI {
	t.Helper()
	ca := testca.NewCA(t, "olmv1-ca")
	secret := func(namespace, name string, certPEM, keyPEM []byte, annotations map[string]string) *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Annotations: annotations},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{"ca.crt": ca.PEM, corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
		}
	}
	p := olmv1PKI{caPEM: ca.PEM, secrets: []*corev1.Secret{
		secret("cert-manager", "olmv1-ca", ca.PEM, ca.KeyPEM, map[string]string{"cert-manager.io/allow-direct-injection": "true"}),
	}}
	for _, leaf := range []struct {
		secret string
		dns    []string
	}{
		{"catalogd-service-cert-git-version", []string{"localhost", catalogdServer, catalogdServer + ".cluster.local"}},
		{"olmv1-cert", []string{"operator-controller-service." + olmv1NS + ".svc", "operator-controller-service." + olmv1NS + ".svc.cluster.local"}},
	} {
		issued := ca.Issue(t, leaf.dns, nil)
		p.secrets = append(p.secrets, secret(olmv1NS, leaf.secret, issued.CertPEM, issued.KeyPEM, nil))
	}
	return p
}

// installOLMv1 applies upstream's manifests/standard.yaml, changing only
// what cannot be had here: the two images (built here, published names),
// and cert-manager's objects, replaced by the Secrets they would produce
// and the CA in the webhook's caBundle.
func (s *suite) installOLMv1() {
	start := time.Now()
	pki := newOLMv1PKI(s.t)
	s.caPEM = pki.caPEM
	s.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cert-manager"}})
	for _, obj := range s.readManifests(filepath.Join(s.cfg.olmv1Dir, "manifests", "standard.yaml")) {
		if strings.HasPrefix(obj.GetAPIVersion(), "cert-manager.io/") {
			continue
		}
		switch obj.GetKind() {
		case "Deployment":
			image := map[string]string{
				"catalogd-controller-manager":            s.cfg.catalogdImage,
				"operator-controller-controller-manager": s.cfg.opconImage,
			}[obj.GetName()]
			if image == "" {
				s.t.Fatalf("standard.yaml has a Deployment %s this test does not know", obj.GetName())
			}
			containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				c.(map[string]any)["image"] = image
			}
			_ = unstructured.SetNestedSlice(obj.Object, containers, "spec", "template", "spec", "containers")
		case "MutatingWebhookConfiguration":
			webhooks, _, _ := unstructured.NestedSlice(obj.Object, "webhooks")
			for _, w := range webhooks {
				_ = unstructured.SetNestedField(w.(map[string]any), base64.StdEncoding.EncodeToString(pki.caPEM), "clientConfig", "caBundle")
			}
			_ = unstructured.SetNestedSlice(obj.Object, webhooks, "webhooks")
		}
		s.createUnstructured(obj)
		if obj.GetKind() == "Namespace" && obj.GetName() == olmv1NS {
			for _, secret := range pki.secrets {
				s.create(secret)
			}
		}
	}
	for _, name := range []string{"catalogd-controller-manager", "operator-controller-controller-manager"} {
		s.waitDeploymentAvailable(olmv1NS, name, 3*time.Minute)
	}
	s.t.Logf("TIMING OLM v1 applied to both controllers Available: %.1fs", time.Since(start).Seconds())
}

// applyExample creates the objects of a file under config/olmv1, as they
// are.
func (s *suite) applyExample(file string) []*unstructured.Unstructured {
	objs := s.readManifests(filepath.Join(s.cfg.repoRoot, "config", "olmv1", file))
	for _, obj := range objs {
		s.createUnstructured(obj)
	}
	return objs
}

func (s *suite) clusterCatalog() *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(clusterCatalogGVK)
	s.get(types.NamespacedName{Name: catalogName}, obj)
	return obj
}

// conditionsOf reads status.conditions of an OLM v1 object, keeping only
// those of its current generation.
func conditionsOf(obj *unstructured.Unstructured) []metav1.Condition {
	raw, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	b, err := json.Marshal(raw)
	if err != nil {
		return nil
	}
	var all, current []metav1.Condition
	if json.Unmarshal(b, &all) != nil {
		return nil
	}
	for _, c := range all {
		if c.ObservedGeneration == obj.GetGeneration() {
			current = append(current, c)
		}
	}
	return current
}

func describeConditions(cs []metav1.Condition) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(parts, "; ")
}

// waitCatalogServing waits until catalogd serves the ClusterCatalog's
// current spec.
func (s *suite) waitCatalogServing() {
	s.waitFor(3*time.Minute, "ClusterCatalog "+catalogName+" to serve its image", func() (bool, string) {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(clusterCatalogGVK)
		if err := s.c.Get(s.ctx, types.NamespacedName{Name: catalogName}, obj); err != nil {
			return false, err.Error()
		}
		cs := conditionsOf(obj)
		serving := meta.FindStatusCondition(cs, "Serving")
		progressing := meta.FindStatusCondition(cs, "Progressing")
		return serving != nil && serving.Status == metav1.ConditionTrue &&
			progressing != nil && progressing.Reason == "Succeeded", describeConditions(cs)
	})
}

// addClusterCatalog applies the shipped ClusterCatalog and reads our
// package from catalogd's HTTPS catalog API, as a client in the cluster
// does, through the catalogd Service.
func (s *suite) addClusterCatalog() {
	start := time.Now()
	cat := s.applyExample("clustercatalog.yaml")[0]
	// The file names the published registry (ghcr.io), which the node
	// resolves to the registry this run's release commands pushed to: the
	// same repository and tag.
	ref, _, _ := unstructured.NestedString(cat.Object, "spec", "source", "image", "ref")
	_, published, _ := strings.Cut(ref, "/")
	if _, built, _ := strings.Cut(s.cfg.catalogV1, "/"); published != built {
		s.t.Fatalf("config/olmv1/clustercatalog.yaml names <registry>/%s; this run built %s", published, s.cfg.catalogV1)
	}
	s.waitCatalogServing()
	s.t.Logf("TIMING ClusterCatalog created to Serving: %.1fs", time.Since(start).Seconds())

	base, _, _ := unstructured.NestedString(s.clusterCatalog().Object, "status", "urls", "base")
	metas := s.catalogContent(base)
	var channels, bundles []string
	hasPackage := false
	for _, m := range metas {
		if m.Package != pkg && m.Name != pkg {
			continue
		}
		switch m.Schema {
		case "olm.package":
			hasPackage = true
		case "olm.channel":
			channels = append(channels, m.Name)
		case "olm.bundle":
			bundles = append(bundles, m.Name)
			if m.Image == "" {
				s.t.Errorf("bundle %s names no image: OLM v1 unpacks bundles from their images", m.Name)
			}
		}
	}
	if !hasPackage || !slicesEqual(channels, []string{"stable"}) || !slicesEqual(bundles, []string{pkg + ".v0.1.0"}) {
		s.t.Fatalf("catalogd serves package %v, channels %v, bundles %v of %s; want the package, stable and %s.v0.1.0",
			hasPackage, channels, bundles, pkg, pkg)
	}
	s.t.Logf("catalogd serves %s: channels %v, bundles %v (%d catalog objects in all)", pkg, channels, bundles, len(metas))
}

func slicesEqual(a, b []string) bool {
	return strings.Join(a, "\n") == strings.Join(b, "\n")
}

// catalogMeta is the part of a file-based catalog object the test reads.
type catalogMeta struct {
	Schema  string `json:"schema"`
	Package string `json:"package"`
	Name    string `json:"name"`
	Image   string `json:"image"`
}

// catalogContent GETs base/api/v1/all from catalogd over HTTPS, checking
// catalogd's certificate against the OLM v1 CA under its Service name, and
// decodes the JSON stream.
func (s *suite) catalogContent(base string) []catalogMeta {
	u, err := url.Parse(base)
	if err != nil || u.Hostname() != catalogdServer {
		s.t.Fatalf("ClusterCatalog base URL %q is not on %s: %v", base, catalogdServer, err)
	}
	svc := &corev1.Service{}
	s.get(types.NamespacedName{Namespace: olmv1NS, Name: "catalogd-service"}, svc)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.caPEM)
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: catalogdServer, MinVersion: tls.VersionTLS12},
	}}
	// The host reaches the ClusterIP through kube-proxy, not cluster DNS.
	u.Host = svc.Spec.ClusterIP + ":443"
	var metas []catalogMeta
	s.waitFor(time.Minute, "catalogd to answer "+base+"/api/v1/all", func() (bool, string) {
		req, err := http.NewRequestWithContext(s.ctx, http.MethodGet, u.String()+"/api/v1/all", nil)
		if err != nil {
			return false, err.Error()
		}
		resp, err := hc.Do(req)
		if err != nil {
			return false, err.Error()
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			return false, fmt.Sprintf("HTTP %d: %s", resp.StatusCode, b)
		}
		metas = nil
		dec := json.NewDecoder(bufio.NewReader(io.LimitReader(resp.Body, 64<<20)))
		for {
			var m catalogMeta
			if err := dec.Decode(&m); err == io.EOF {
				break
			} else if err != nil {
				return false, "decoding the catalog: " + err.Error()
			}
			metas = append(metas, m)
		}
		return true, ""
	})
	return metas
}

// installExtension creates the namespace and the installer ServiceAccount
// with its RBAC with the doc's commands, the ClusterExtension from the
// shipped example as it is, waits for the operator pod, and gives it its
// settings.
func (s *suite) installExtension() {
	// Cluster API first: the OLM v0 test shows the operator picking it up
	// later; this one is about OLM v1.
	s.createClusterAPICRDs()
	// The doc's commands: the namespace, restricted, and installer.yaml.
	s.runDocCommands(docOLMv1Installer, 0)
	s.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: userNS}})
	start := time.Now()
	s.applyExample("clusterextension.yaml")
	s.waitExtensionInstalled("0.1.0")
	s.t.Logf("TIMING ClusterExtension created to Installed: %.1fs", time.Since(start).Seconds())
	s.waitDeploymentAvailable(operatorNS, deployment, 3*time.Minute)
	s.waitFor(2*time.Minute, "the operator pod to be Ready", func() (bool, string) {
		_, err := s.readyOperatorPod()
		return err == nil, fmt.Sprintf("%v", err)
	})
	s.t.Logf("TIMING ClusterExtension created to operator pod Ready: %.1fs", time.Since(start).Seconds())

	// Everything the bundle declares exists.
	for _, obj := range []client.Object{
		&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "mailgunclusters.infrastructure.cluster.x-k8s.io"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: deployment}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: "capmg-controller-manager-metrics-service"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "capmg-mailguncluster-editor-role"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: "capmg-manager-role"}},
	} {
		if err := s.c.Get(s.ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			s.t.Errorf("%T %s not installed: %v", obj, client.ObjectKeyFromObject(obj), err)
		}
	}
	pod := s.operatorPod()
	if c := pod.Spec.Containers[0]; c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		s.t.Errorf("operator container has no read-only root filesystem: %+v", c.SecurityContext)
	}
	s.t.Logf("operator pod %s runs image %s", pod.Name, pod.Spec.Containers[0].Image)
	s.configure()
}

// checkInstallerPermissions asks the API server what the installer
// ServiceAccount of config/olmv1/installer.yaml may do: the bundle's own
// objects, by name where Kubernetes allows it, and nothing else of the
// cluster's.
func (s *suite) checkInstallerPermissions() {
	user := "system:serviceaccount:" + operatorNS + ":" + installerName
	for _, check := range []struct {
		attrs authorizationv1.ResourceAttributes
		want  bool
	}{
		{authorizationv1.ResourceAttributes{Group: "apps", Resource: "deployments", Verb: "patch", Namespace: operatorNS, Name: deployment}, true},
		{authorizationv1.ResourceAttributes{Group: "apps", Resource: "deployments", Verb: "patch", Namespace: operatorNS, Name: "other"}, false},
		{authorizationv1.ResourceAttributes{Group: "apps", Resource: "deployments", Verb: "create", Namespace: userNS}, false},
		{authorizationv1.ResourceAttributes{Group: "apps", Resource: "deployments", Verb: "update", Namespace: operatorNS, Name: deployment}, false},
		{authorizationv1.ResourceAttributes{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Verb: "delete", Name: "mailgunclusters.infrastructure.cluster.x-k8s.io"}, true},
		{authorizationv1.ResourceAttributes{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Verb: "delete", Name: "clusters.cluster.x-k8s.io"}, false},
		{authorizationv1.ResourceAttributes{Group: "rbac.authorization.k8s.io", Resource: "clusterroles", Verb: "patch", Name: "capmg-metrics-reader"}, true},
		{authorizationv1.ResourceAttributes{Group: "rbac.authorization.k8s.io", Resource: "clusterroles", Verb: "delete", Name: "cluster-admin"}, false},
		{authorizationv1.ResourceAttributes{Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings", Verb: "patch", Name: "cluster-admin"}, false},
		{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "get", Namespace: userNS}, false},
		{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "delete", Namespace: operatorNS, Name: config.DefaultSecretName}, false},
		{authorizationv1.ResourceAttributes{Resource: "configmaps", Verb: "update", Namespace: operatorNS, Name: config.DefaultConfigMapName}, false},
		{authorizationv1.ResourceAttributes{Resource: "namespaces", Verb: "delete", Name: operatorNS}, false},
		{authorizationv1.ResourceAttributes{Group: "cluster.x-k8s.io", Resource: "clusters", Verb: "delete", Namespace: userNS}, false},
	} {
		review, err := s.cs.AuthorizationV1().SubjectAccessReviews().Create(s.ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &check.attrs},
		}, metav1.CreateOptions{})
		if err != nil {
			s.t.Fatalf("access review for the installer: %v", err)
		}
		if review.Status.Allowed != check.want {
			s.t.Errorf("installer may %s %s %q in %q: %v, want %v", check.attrs.Verb, check.attrs.Resource, check.attrs.Name,
				check.attrs.Namespace, review.Status.Allowed, check.want)
		}
	}
}

// waitExtensionInstalled waits until the ClusterExtension reports the
// bundle of version installed and nothing left to do.
func (s *suite) waitExtensionInstalled(version string) {
	s.waitFor(3*time.Minute, "ClusterExtension "+extensionName+" to install "+version, func() (bool, string) {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(clusterExtensionGVK)
		if err := s.c.Get(s.ctx, types.NamespacedName{Name: extensionName}, obj); err != nil {
			return false, err.Error()
		}
		got, _, _ := unstructured.NestedString(obj.Object, "status", "install", "bundle", "version")
		cs := conditionsOf(obj)
		installed := meta.FindStatusCondition(cs, "Installed")
		progressing := meta.FindStatusCondition(cs, "Progressing")
		return got == version && installed != nil && installed.Status == metav1.ConditionTrue &&
				progressing != nil && progressing.Reason == "Succeeded",
			fmt.Sprintf("installed version %q; %s", got, describeConditions(cs))
	})
}

// upgradeExtension points the ClusterCatalog at the catalog image that adds
// 0.1.1; the ClusterExtension's version range admits it, so
// operator-controller upgrades. The settings objects, which no release
// carried, stay as they were.
func (s *suite) upgradeExtension() {
	start := time.Now()
	cat := s.clusterCatalog()
	if err := unstructured.SetNestedField(cat.Object, s.cfg.catalogV2, "spec", "source", "image", "ref"); err != nil {
		s.t.Fatal(err)
	}
	s.update(cat)
	s.waitCatalogServing()
	s.waitExtensionInstalled("0.1.1")
	s.t.Logf("TIMING ClusterCatalog updated to 0.1.1 installed: %.1fs", time.Since(start).Seconds())
	s.waitForUpgradedPod()
	s.t.Logf("TIMING ClusterCatalog updated to the 0.1.1 pod Ready: %.1fs", time.Since(start).Seconds())
	s.checkSettingsIntact("after the upgrade")

	s.checkEmailsAfterUpgrade()
}

// correctDrift scales the bundle's Deployment to zero and deletes its
// metrics Service; operator-controller puts both back as the bundle has
// them, and the settings objects, which are not the bundle's, are left as
// the user wrote them. (Not an edited Service port: Helm's patch adds the
// bundle's port next to it, which the API refuses as a duplicate name, and
// nothing is corrected until the edit is reverted.)
func (s *suite) correctDrift() {
	start := time.Now()
	dep := &appsv1.Deployment{}
	s.get(types.NamespacedName{Namespace: operatorNS, Name: deployment}, dep)
	dep.Spec.Replicas = ptr.To[int32](0)
	s.update(dep)
	svc := &corev1.Service{}
	s.get(types.NamespacedName{Namespace: operatorNS, Name: "capmg-controller-manager-metrics-service"}, svc)
	if err := s.c.Delete(s.ctx, svc); err != nil {
		s.t.Fatal(err)
	}
	s.waitFor(2*time.Minute, "the Deployment and the Service to be restored", func() (bool, string) {
		d, v := &appsv1.Deployment{}, &corev1.Service{}
		if err := s.c.Get(s.ctx, client.ObjectKeyFromObject(dep), d); err != nil {
			return false, err.Error()
		}
		if err := s.c.Get(s.ctx, client.ObjectKeyFromObject(svc), v); err != nil {
			return false, fmt.Sprintf("replicas %d, Service: %v", ptr.Deref(d.Spec.Replicas, 0), err)
		}
		return ptr.Deref(d.Spec.Replicas, 0) == 1 && v.UID != svc.UID,
			fmt.Sprintf("replicas %d, Service UID %s (deleted: %s)", ptr.Deref(d.Spec.Replicas, 0), v.UID, svc.UID)
	})
	s.t.Logf("TIMING drift to restored: %.1fs", time.Since(start).Seconds())
	s.waitFor(2*time.Minute, "the operator pod to be Ready again", func() (bool, string) {
		_, err := s.readyOperatorPod()
		return err == nil, fmt.Sprintf("%v", err)
	})
	s.checkSettingsIntact("after drift correction")
	// The operator restarted from the settings and sends nothing again.
	first := &infrav1.MailgunCluster{}
	s.get(types.NamespacedName{Namespace: userNS, Name: "first"}, first)
	if !conditions.IsTrue(first, infrav1.ReadyCondition) {
		s.t.Errorf("after the restart, the first cluster is not Ready: %+v", first.Status.Conditions)
	}
	if n := len(s.fake.Messages()); n != 2 {
		s.t.Errorf("%d emails in total after the restart, want 2", n)
	}
}

// uninstallExtension deletes the MailgunClusters (their finalizer needs the
// running operator), then the ClusterExtension, as docs/install-olm.md
// says, and checks what is left.
func (s *suite) uninstallExtension() {
	for _, name := range []string{"first", "second"} {
		for _, obj := range []client.Object{&infrav1.MailgunCluster{}, &clusterv1.Cluster{}} {
			obj.SetNamespace(userNS)
			obj.SetName(name)
			if err := s.c.Delete(s.ctx, obj); err != nil {
				s.t.Fatalf("deleting %T %s: %v", obj, name, err)
			}
		}
	}
	s.waitFor(time.Minute, "the operator to release the deleted MailgunClusters", func() (bool, string) {
		list := &infrav1.MailgunClusterList{}
		if err := s.c.List(s.ctx, list); err != nil {
			return false, err.Error()
		}
		return len(list.Items) == 0, fmt.Sprintf("%d left", len(list.Items))
	})

	start := time.Now()
	ext := &unstructured.Unstructured{}
	ext.SetGroupVersionKind(clusterExtensionGVK)
	ext.SetName(extensionName)
	if err := s.c.Delete(s.ctx, ext); err != nil {
		s.t.Fatal(err)
	}
	// What goes, per docs/install-olm.md ("OLM v1", "Uninstall").
	gone := []client.Object{
		&unstructured.Unstructured{Object: map[string]any{"apiVersion": olmv1Group + "/v1", "kind": "ClusterExtension", "metadata": map[string]any{"name": extensionName}}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: deployment}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: deployment}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: "capmg-controller-manager-metrics-service"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: "capmg-manager-role"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: "capmg-leader-election-rolebinding"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "capmg-mailguncluster-editor-role"}},
		&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "mailgunclusters.infrastructure.cluster.x-k8s.io"}},
		&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "mailgunclustertemplates.infrastructure.cluster.x-k8s.io"}},
		&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "mailgunmachines.infrastructure.cluster.x-k8s.io"}},
		&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "mailgunmachinetemplates.infrastructure.cluster.x-k8s.io"}},
		&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "mailgunclusteridentities.infrastructure.cluster.x-k8s.io"}},
	}
	s.waitFor(2*time.Minute, "the operator and the bundle's objects to be removed", func() (bool, string) {
		var left []string
		for _, obj := range gone {
			if err := s.c.Get(s.ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
				left = append(left, fmt.Sprintf("%T %s (%v)", obj, obj.GetName(), err))
			}
		}
		pods := &corev1.PodList{}
		if err := s.c.List(s.ctx, pods, client.InNamespace(operatorNS), client.MatchingLabels{"control-plane": "controller-manager"}); err != nil {
			return false, err.Error()
		}
		if len(pods.Items) != 0 {
			left = append(left, fmt.Sprintf("%d operator pods", len(pods.Items)))
		}
		return len(left) == 0, strings.Join(left, ", ")
	})
	s.t.Logf("TIMING ClusterExtension deleted to the operator removed: %.1fs", time.Since(start).Seconds())
	// The generated RBAC of the CSV's clusterPermissions goes too: no
	// ClusterRoleBinding binds the operator's ServiceAccount any more.
	crbs := &rbacv1.ClusterRoleBindingList{}
	if err := s.c.List(s.ctx, crbs); err != nil {
		s.t.Fatal(err)
	}
	for _, crb := range crbs.Items {
		for _, sub := range crb.Subjects {
			if sub.Kind == rbacv1.ServiceAccountKind && sub.Namespace == operatorNS && sub.Name == deployment {
				s.t.Errorf("ClusterRoleBinding %s still binds the operator's ServiceAccount", crb.Name)
			}
		}
	}
	// What stays: the user's settings, the namespace, the installer and the
	// ClusterCatalog.
	s.checkSettingsIntact("after uninstalling")
	catalog := &unstructured.Unstructured{}
	catalog.SetGroupVersionKind(clusterCatalogGVK)
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNS}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: installerName}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: installerName}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNS, Name: installerName}},
	} {
		if err := s.c.Get(s.ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			s.t.Errorf("%T %s should remain after uninstall: %v", obj, client.ObjectKeyFromObject(obj), err)
		}
	}
	s.clusterCatalog()
	if n := len(s.fake.Messages()); n != 2 {
		s.t.Errorf("%d emails in total, want 2", n)
	}
}

// dumpOLMv1 describes the ClusterCatalogs and ClusterExtensions, for
// failures; nothing on a cluster without OLM v1.
func (s *suite) dumpOLMv1(ctx context.Context, b *strings.Builder) {
	for _, gvk := range []schema.GroupVersionKind{clusterCatalogGVK, clusterExtensionGVK} {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if s.c.List(ctx, list) != nil {
			continue
		}
		for i := range list.Items {
			obj := &list.Items[i]
			version, _, _ := unstructured.NestedString(obj.Object, "status", "install", "bundle", "version")
			fmt.Fprintf(b, "%s %s (generation %d, installed %q): %s\n", gvk.Kind, obj.GetName(), obj.GetGeneration(), version,
				describeConditions(conditionsOf(obj)))
		}
	}
}
