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

package bundle_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/operator-framework/api/pkg/validation"
	validationerrors "github.com/operator-framework/api/pkg/validation/errors"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/hack/packaging/bundle"
	render "github.com/capi-mailgun/cluster-api-provider-mailgun/hack/packaging/manifests"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/config"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/testenv"
)

const pkg = "cluster-api-provider-mailgun"

func repoPath(t *testing.T, elem ...string) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(append([]string{root}, elem...)...)
}

func loadBundle(t *testing.T) *manifests.Bundle {
	t.Helper()
	b, err := manifests.GetBundleFromDir(repoPath(t, "bundle"))
	if err != nil {
		t.Fatalf("loading bundle/: %v", err)
	}
	return b
}

func TestBundleIsUpToDate(t *testing.T) {
	csv := loadBundle(t).CSV
	rendered, err := render.Kustomize(repoPath(t, "config", "manifests"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := bundle.Generate(rendered, bundle.Options{
		Package:   pkg,
		Version:   csv.Spec.Version.String(),
		Replaces:  csv.Spec.Replaces,
		Image:     csv.Annotations["containerImage"],
		Channels:  []string{"stable"},
		CreatedAt: csv.Annotations["createdAt"],
	})
	if err != nil {
		t.Fatalf("generating: %v", err)
	}
	var onDisk []string
	err = filepath.WalkDir(repoPath(t, "bundle"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(repoPath(t, "bundle"), path)
			onDisk = append(onDisk, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(repoPath(t, "bundle", name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("bundle/%s is stale or missing; run `make bundle` and commit the result", name)
		}
	}
	for _, name := range onDisk {
		if _, ok := files[name]; !ok {
			t.Errorf("bundle/%s is not generated from config/ any more; run `make bundle`", name)
		}
	}
}

func TestBundlePassesOperatorFrameworkValidation(t *testing.T) {
	validate(t, loadBundle(t), repoPath(t, "bundle.Dockerfile"))
}

// validate runs the validators of `operator-sdk bundle validate
// --select-optional suite=operatorframework` and the community suite on b
// (whose image is built from dockerfile, if any) and fails on any error or
// warning.
func validate(t *testing.T, b *manifests.Bundle, dockerfile string) {
	t.Helper()
	var results []validationerrors.ManifestResult
	results = append(results, validation.DefaultBundleValidators.WithValidators(validation.ObjectValidator).Validate(b.ObjectsToValidate()...)...)
	optional := map[string]string{"k8s-version": "1.36"}
	if dockerfile != "" {
		optional["index-path"] = dockerfile
	}
	suite := []struct {
		name      string
		validator interface {
			Validate(...interface{}) []validationerrors.ManifestResult
		}
	}{
		// operatorhub/v2 with capabilities and categories is the operatorhub
		// suite (its v1 validator is deprecated in their favour and says so).
		{"operatorhubv2", validation.OperatorHubV2Validator},
		{"community", validation.CommunityOperatorValidator},
		{"capabilities", validation.StandardCapabilitiesValidator},
		{"categories", validation.StandardCategoriesValidator},
		{"good-practices", validation.GoodPracticesValidator},
		{"deprecated-apis", validation.AlphaDeprecatedAPIsValidator},
	}
	for _, s := range suite {
		results = append(results, s.validator.Validate(b, optional)...)
	}
	for _, r := range results {
		for _, e := range r.Errors {
			t.Errorf("%s: error: %s", r.Name, e.Error())
		}
		for _, w := range r.Warnings {
			t.Errorf("%s: warning: %s", r.Name, w.Error())
		}
	}
}

// The scorecard's basic and olm suites, run offline on the bundle.
func TestScorecardChecks(t *testing.T) {
	b := loadBundle(t)
	csv := b.CSV
	examples := almExamples(t, csv)

	t.Run("basic-check-spec", func(t *testing.T) {
		if len(examples) == 0 {
			t.Fatal("alm-examples is empty")
		}
		for _, ex := range examples {
			if spec, ok := ex["spec"].(map[string]any); !ok || len(spec) == 0 {
				t.Errorf("alm-example %v has no spec", ex["kind"])
			}
		}
	})
	owned := map[string]v1alpha1.CRDDescription{}
	for _, d := range csv.Spec.CustomResourceDefinitions.Owned {
		owned[d.Name] = d
	}
	for _, crd := range b.V1CRDs {
		desc, ok := owned[crd.Name]
		if !ok {
			t.Errorf("CRD %s is in the bundle but not owned by the CSV", crd.Name)
			continue
		}
		t.Run("olm-crds-have-validation/"+crd.Name, func(t *testing.T) {
			for _, v := range crd.Spec.Versions {
				s := v.Schema
				if s == nil || s.OpenAPIV3Schema == nil || s.OpenAPIV3Schema.Properties["spec"].Properties == nil {
					t.Errorf("version %s has no spec schema", v.Name)
				}
			}
		})
		t.Run("olm-crds-have-resources/"+crd.Name, func(t *testing.T) {
			if len(desc.Resources) == 0 {
				t.Errorf("owned CRD %s lists no resources", crd.Name)
			}
		})
		schema := servedSchema(t, crd, desc.Version)
		t.Run("olm-spec-descriptors/"+crd.Name, func(t *testing.T) {
			var have []string
			for _, d := range desc.SpecDescriptors {
				have = append(have, d.Path)
			}
			for _, path := range fieldPaths(schema.Properties["spec"], "") {
				if !slices.Contains(have, path) {
					t.Errorf("spec field %s has no specDescriptor", path)
				}
			}
		})
		t.Run("olm-status-descriptors/"+crd.Name, func(t *testing.T) {
			var have []string
			for _, d := range desc.StatusDescriptors {
				have = append(have, d.Path)
			}
			for _, path := range fieldPaths(schema.Properties["status"], "") {
				if !slices.Contains(have, path) {
					t.Errorf("status field %s has no statusDescriptor", path)
				}
			}
		})
	}
}

// TestOperatorHubLayout: `make operatorhub` writes what the
// community-operators repositories take (operators/<package>/<version>/
// with manifests, metadata and tests, and ci.yaml), and the bundle read back
// from there passes the same validators.
func TestOperatorHubLayout(t *testing.T) {
	b := loadBundle(t)
	version := b.CSV.Spec.Version.String()
	files := bundle.Files{}
	fsys := os.DirFS(repoPath(t, "bundle"))
	err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files[filepath.FromSlash(path)], err = fs.ReadFile(fsys, path)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	dockerfile, err := os.ReadFile(repoPath(t, "bundle.Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	files[filepath.Join("..", "bundle.Dockerfile")] = dockerfile
	dir := t.TempDir()
	if err := bundle.WriteOperatorHub(dir, files, pkg, version); err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile(filepath.Join(dir, "operators", pkg, "ci.yaml"))
	if err != nil || !strings.Contains(string(ci), "updateGraph: replaces-mode") {
		t.Errorf("ci.yaml = %q, %v; want updateGraph: replaces-mode", ci, err)
	}
	versionDir := filepath.Join(dir, "operators", pkg, version)
	// The repositories' pipelines build the image themselves.
	if err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "bundle.Dockerfile" {
			t.Errorf("the layout holds %s", path)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"manifests", "metadata", "tests/scorecard"} {
		if _, err := os.Stat(filepath.Join(versionDir, sub)); err != nil {
			t.Errorf("%s missing from the layout: %v", sub, err)
		}
	}
	hub, err := manifests.GetBundleFromDir(versionDir)
	if err != nil {
		t.Fatalf("reading the bundle back from %s: %v", versionDir, err)
	}
	validate(t, hub, "")
}

// TestOpenShiftVersionsMatchMinKubeVersion: OperatorHub's checks want
// com.redhat.openshift.versions with minKubeVersion, and the two must name
// the same oldest release.
func TestOpenShiftVersionsMatchMinKubeVersion(t *testing.T) {
	// OpenShift 4.y and the Kubernetes minor it is built on.
	kubeOf := map[string]string{"v4.16": "1.29", "v4.17": "1.30", "v4.18": "1.31", "v4.19": "1.32", "v4.20": "1.33"}
	csv := loadBundle(t).CSV
	minor := strings.Join(strings.Split(csv.Spec.MinKubeVersion, ".")[:2], ".")
	if got := kubeOf[bundle.OpenShiftVersions]; got != minor {
		t.Errorf("com.redhat.openshift.versions %s is Kubernetes %s, minKubeVersion is %s", bundle.OpenShiftVersions, got, csv.Spec.MinKubeVersion)
	}
	ann, err := os.ReadFile(repoPath(t, "bundle", "metadata", "annotations.yaml"))
	if err != nil || !strings.Contains(string(ann), "com.redhat.openshift.versions: "+bundle.OpenShiftVersions) {
		t.Errorf("metadata/annotations.yaml lacks com.redhat.openshift.versions: %v", err)
	}
}

func TestCSVContent(t *testing.T) {
	csv := loadBundle(t).CSV
	for _, key := range []string{"capabilities", "categories", "containerImage", "createdAt", "description", "repository", "support", "alm-examples", "operatorframework.io/suggested-namespace"} {
		if csv.Annotations[key] == "" {
			t.Errorf("annotation %s is empty", key)
		}
	}
	spec := csv.Spec
	if spec.DisplayName == "" || len(spec.Description) < 500 || len(spec.Icon) == 0 || len(spec.Keywords) == 0 ||
		len(spec.Maintainers) == 0 || spec.Provider.Name == "" || len(spec.Links) == 0 || spec.Maturity == "" || spec.MinKubeVersion == "" {
		t.Errorf("CSV lacks display metadata: %+v", spec)
	}
	if !strings.Contains(spec.Description, "capmg-mailgun-credentials") || !strings.Contains(spec.Description, "upgrades") {
		t.Errorf("the description should say how to configure Mailgun after install and across upgrades")
	}
	if len(spec.CustomResourceDefinitions.Required) != 0 {
		t.Errorf("required CRDs %v: nothing in a catalog owns Cluster API's CRDs, and the operator waits for them itself", spec.CustomResourceDefinitions.Required)
	}
	// nativeAPIs would keep the CSV Pending (RequirementsNotMet) until
	// Cluster API is installed; the operator waits for it itself
	// (docs/install-olm.md).
	if len(spec.NativeAPIs) != 0 {
		t.Errorf("nativeAPIs %v: OLM would not install the operator before Cluster API", spec.NativeAPIs)
	}
	modes := map[v1alpha1.InstallModeType]bool{}
	for _, m := range spec.InstallModes {
		modes[m.Type] = m.Supported
	}
	want := map[v1alpha1.InstallModeType]bool{
		v1alpha1.InstallModeTypeOwnNamespace: true, v1alpha1.InstallModeTypeSingleNamespace: true,
		v1alpha1.InstallModeTypeMultiNamespace: false, v1alpha1.InstallModeTypeAllNamespaces: true,
	}
	if fmt.Sprint(modes) != fmt.Sprint(want) {
		t.Errorf("installModes = %v, want %v", modes, want)
	}

	strategy := spec.InstallStrategy.StrategySpec
	for _, p := range strategy.ClusterPermissions {
		for _, r := range p.Rules {
			if slices.Contains(r.Resources, "secrets") || slices.Contains(r.Resources, "configmaps") {
				t.Errorf("clusterPermissions grant %v on %v: Secret and ConfigMap access belongs in the operator's namespace only", r.Verbs, r.Resources)
			}
		}
	}
	// OLM widens CSV permissions to every namespace for AllNamespaces
	// installs, so Secret access must come from a Role in the bundle.
	for _, p := range strategy.Permissions {
		for _, r := range p.Rules {
			if slices.Contains(r.Resources, "secrets") {
				t.Errorf("CSV permissions grant Secret access, which OLM widens to all namespaces in AllNamespaces mode")
			}
		}
	}
	if len(strategy.DeploymentSpecs) != 1 {
		t.Fatalf("%d deployments, want 1", len(strategy.DeploymentSpecs))
	}
	pod := strategy.DeploymentSpecs[0].Spec.Template.Spec
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot ||
		pod.SecurityContext.SeccompProfile == nil || pod.SecurityContext.SeccompProfile.Type != "RuntimeDefault" {
		t.Errorf("pod security context %+v is not restricted", pod.SecurityContext)
	}
	for _, c := range pod.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil ||
			!*sc.ReadOnlyRootFilesystem || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			t.Errorf("container %s security context %+v is not restricted", c.Name, sc)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
			t.Errorf("container %s has no resource requests", c.Name)
		}
		if c.Image != csv.Annotations["containerImage"] {
			t.Errorf("container %s image %q differs from containerImage %q", c.Name, c.Image, csv.Annotations["containerImage"])
		}
	}
}

// TestNoInstallerShipsTheSettingsObjects: what an installer ships it
// re-applies (OLM v0 on every install plan, OLM v1 by drift correction,
// kubectl apply of `make deploy` again), so the user's Secret and ConfigMap
// must not be among it; the operator creates them (config.UserObjects).
// The bundle carries no settings objects at all, and no values.
func TestNoInstallerShipsTheSettingsObjects(t *testing.T) {
	b := loadBundle(t)
	for _, obj := range b.Objects {
		if kind := obj.GetKind(); kind == "Secret" || kind == "ConfigMap" {
			t.Errorf("the bundle ships %s %s; OLM would reset or garbage-collect it", kind, obj.GetName())
		}
	}
	raw, err := render.Kustomize(repoPath(t, "config", "default"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := render.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		if name := obj.GetName(); name == config.DefaultSecretName || name == config.DefaultConfigMapName {
			t.Errorf("make deploy ships %s %s; applying it again would reset the user's settings", obj.GetKind(), name)
		}
	}
}

func TestBundleDockerfileMatchesAnnotations(t *testing.T) {
	b, err := os.ReadFile(repoPath(t, "bundle", "metadata", "annotations.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ann struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.Unmarshal(b, &ann); err != nil {
		t.Fatal(err)
	}
	df, err := os.ReadFile(repoPath(t, "bundle.Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	labels := dockerfileLabels(string(df))
	if fmt.Sprint(labels) != fmt.Sprint(ann.Annotations) {
		t.Errorf("bundle.Dockerfile labels %v differ from metadata/annotations.yaml %v", labels, ann.Annotations)
	}
}

// TestBundleImageBuilds builds the bundle image with buildah, the way
// `make bundle-build` does where no Docker daemon exists. CI installs buildah.
func TestBundleImageBuilds(t *testing.T) {
	buildah, err := exec.LookPath("buildah")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("buildah is not installed; CI must install it (.ci/run)")
		}
		t.Skip("buildah is not installed")
	}
	root := repoPath(t)
	store := t.TempDir()
	tag := "localhost/capmg-bundle-test:latest"
	args := []string{"--root", filepath.Join(store, "root"), "--runroot", filepath.Join(store, "run"), "--storage-driver", "vfs"}
	build := exec.Command(buildah, append(args, "bud", "--isolation", "chroot", "-f", "bundle.Dockerfile", "-t", tag, ".")...)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("buildah bud: %v\n%s", err, out)
	}
	inspect := exec.Command(buildah, append(args, "inspect", "--type", "image", tag)...)
	out, err := inspect.Output()
	if err != nil {
		t.Fatalf("buildah inspect: %v", err)
	}
	var info struct {
		OCIv1 struct {
			Config struct {
				Labels map[string]string `json:"Labels"`
			} `json:"config"`
		} `json:"OCIv1"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatalf("parsing buildah inspect: %v", err)
	}
	if got := info.OCIv1.Config.Labels["operators.operatorframework.io.bundle.package.v1"]; got != pkg {
		t.Errorf("image package label = %q, want %q", got, pkg)
	}
	files := exec.Command(buildah, append(args, "from", "--name", "capmg-bundle-test", tag)...)
	if out, err := files.CombinedOutput(); err != nil {
		t.Fatalf("buildah from: %v\n%s", err, out)
	}
	mount := exec.Command(buildah, append(args, "mount", "capmg-bundle-test")...)
	dir, err := mount.Output()
	if err != nil {
		t.Fatalf("buildah mount: %v", err)
	}
	mnt := strings.TrimSpace(string(dir))
	for _, want := range []string{"manifests/" + pkg + ".clusterserviceversion.yaml", "metadata/annotations.yaml", "tests/scorecard/config.yaml"} {
		if _, err := os.Stat(filepath.Join(mnt, want)); err != nil {
			t.Errorf("image lacks /%s", want)
		}
	}
	_ = exec.Command(buildah, append(args, "rm", "capmg-bundle-test")...).Run()
}

func almExamples(t *testing.T, csv *v1alpha1.ClusterServiceVersion) []map[string]any {
	t.Helper()
	var examples []map[string]any
	if err := json.Unmarshal([]byte(csv.Annotations["alm-examples"]), &examples); err != nil {
		t.Fatalf("alm-examples is not a JSON list: %v", err)
	}
	return examples
}

func servedSchema(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, version string) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	for _, v := range crd.Spec.Versions {
		if v.Name == version && v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
			return *v.Schema.OpenAPIV3Schema
		}
	}
	t.Fatalf("CRD %s has no schema for %s", crd.Name, version)
	return apiextensionsv1.JSONSchemaProps{}
}

// fieldPaths lists the descriptor paths of every field under s; the items
// of lists are described by the list's own descriptor.
func fieldPaths(s apiextensionsv1.JSONSchemaProps, prefix string) []string {
	var out []string
	for name, prop := range s.Properties {
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		out = append(out, path)
		if prop.Type == "object" {
			out = append(out, fieldPaths(prop, path)...)
		}
	}
	sort.Strings(out)
	return out
}

func dockerfileLabels(df string) map[string]string {
	labels := map[string]string{}
	for _, line := range strings.Split(df, "\n") {
		if rest, ok := strings.CutPrefix(line, "LABEL "); ok {
			if k, v, ok := strings.Cut(rest, "="); ok {
				labels[k] = v
			}
		}
	}
	return labels
}

// TestALMExamplesAreAcceptedByTheAPIServer creates every alm-example, with
// server-side dry run, against a real apiserver serving the bundle's CRD.
func TestALMExamplesAreAcceptedByTheAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane: run by make test, not make test-unit")
	}
	env, err := testenv.Start()
	if err != nil {
		t.Fatalf("starting control plane: %v", err)
	}
	defer func() { _ = env.Stop() }()
	ctx := context.Background()
	for _, ex := range almExamples(t, loadBundle(t).CSV) {
		u := &unstructured.Unstructured{Object: ex}
		u.SetNamespace("default")
		if err := env.Client.Create(ctx, u, client.DryRunAll); err != nil {
			t.Errorf("alm-example %s %s rejected: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

func TestSecretAccessIsConfinedToTheOperatorNamespace(t *testing.T) {
	b := loadBundle(t)
	sa := b.CSV.Spec.InstallStrategy.StrategySpec.DeploymentSpecs[0].Spec.Template.Spec.ServiceAccountName
	roles := map[string]bool{}
	for _, obj := range b.Objects {
		if obj.GetKind() != "Role" {
			continue
		}
		role := &rbacv1.Role{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, role); err != nil {
			t.Fatal(err)
		}
		for _, r := range role.Rules {
			if slices.Contains(r.Resources, "secrets") {
				roles[role.Name] = true
			}
		}
	}
	if len(roles) == 0 {
		t.Fatal("no Role in the bundle grants the operator its Secret")
	}
	bound := false
	for _, obj := range b.Objects {
		if obj.GetKind() != "RoleBinding" {
			continue
		}
		rb := &rbacv1.RoleBinding{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, rb); err != nil {
			t.Fatal(err)
		}
		for _, s := range rb.Subjects {
			if s.Kind == "ServiceAccount" && s.Name == sa && roles[rb.RoleRef.Name] {
				bound = true
				if s.Namespace != "" {
					t.Errorf("RoleBinding %s names namespace %q for its subject; it must take the install namespace", rb.Name, s.Namespace)
				}
			}
		}
	}
	if !bound {
		t.Errorf("no RoleBinding binds the Secret Role to %s", sa)
	}
}

// TestPROJECTListsEveryAPIKind keeps the PROJECT file, which the
// operator-sdk and kubebuilder CLIs read, in step with the kinds api/v1beta1
// registers.
func TestPROJECTListsEveryAPIKind(t *testing.T) {
	b, err := os.ReadFile(repoPath(t, "PROJECT"))
	if err != nil {
		t.Fatal(err)
	}
	var project struct {
		Resources []struct {
			Group, Version, Kind, Domain string
		}
	}
	if err := yaml.Unmarshal(b, &project); err != nil {
		t.Fatalf("parsing PROJECT: %v", err)
	}
	var listed []string
	for _, r := range project.Resources {
		listed = append(listed, r.Group+"."+r.Domain+"/"+r.Version+", Kind="+r.Kind)
	}
	scheme := runtime.NewScheme()
	if err := infrav1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var registered []string
	apiPkg := reflect.TypeFor[infrav1.MailgunCluster]().PkgPath()
	for kind, typ := range scheme.KnownTypes(infrav1.GroupVersion) {
		// Skip the List kinds and the meta types (options, WatchEvent)
		// every group-version carries.
		if typ.PkgPath() == apiPkg && !strings.HasSuffix(kind, "List") {
			registered = append(registered, infrav1.GroupVersion.WithKind(kind).String())
		}
	}
	sort.Strings(listed)
	sort.Strings(registered)
	if !slices.Equal(listed, registered) {
		t.Errorf("PROJECT lists %v; api/v1beta1 registers %v", listed, registered)
	}
}

// TestOLMv1InstallerTouchesOnlyTheBundlesClusterRBAC: the installer
// ServiceAccount of config/olmv1/installer.yaml may read, patch and delete
// only the ClusterRoles and ClusterRoleBindings an install of this bundle
// creates (creating, listing and watching cannot be limited by name), and
// every one of them, so that an install or upgrade is not refused.
func TestOLMv1InstallerTouchesOnlyTheBundlesClusterRBAC(t *testing.T) {
	b := loadBundle(t)
	want := map[string][]string{}
	for _, obj := range b.Objects {
		if obj.GetKind() == "ClusterRole" {
			want["clusterroles"] = append(want["clusterroles"], obj.GetName())
		}
	}
	// Under AllNamespaces operator-controller makes a ClusterRole and
	// binding of each namespaced permissions entry too; the CSV has none
	// (its namespaced rules are the bundle's Roles).
	if n := len(b.CSV.Spec.InstallStrategy.StrategySpec.Permissions); n > 0 {
		t.Fatalf("the CSV has %d namespaced permissions entries: add the names operator-controller generates for them to this test and installer.yaml", n)
	}
	for _, p := range b.CSV.Spec.InstallStrategy.StrategySpec.ClusterPermissions {
		name := olmv1GeneratedName(t, b.CSV.Name+"-"+p.ServiceAccountName, p)
		want["clusterroles"] = append(want["clusterroles"], name)
		want["clusterrolebindings"] = append(want["clusterrolebindings"], name)
	}

	raw, err := os.ReadFile(repoPath(t, "config", "olmv1", "installer.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var installer *rbacv1.ClusterRole
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		role := &rbacv1.ClusterRole{}
		if err := yaml.Unmarshal([]byte(doc), role); err != nil {
			t.Fatalf("parsing installer.yaml: %v", err)
		}
		if role.Kind == "ClusterRole" {
			installer = role
		}
	}
	if installer == nil {
		t.Fatal("installer.yaml has no ClusterRole")
	}
	got := map[string][]string{}
	for _, r := range installer.Rules {
		if !slices.Contains(r.APIGroups, rbacv1.GroupName) {
			continue
		}
		for _, res := range r.Resources {
			if res != "clusterroles" && res != "clusterrolebindings" {
				continue
			}
			for _, verb := range r.Verbs {
				if verb != "create" && verb != "list" && verb != "watch" && len(r.ResourceNames) == 0 {
					t.Errorf("installer.yaml lets the installer %s every one of the cluster's %s; name the bundle's", verb, res)
				}
			}
			got[res] = append(got[res], r.ResourceNames...)
		}
	}
	for _, res := range []string{"clusterroles", "clusterrolebindings"} {
		slices.Sort(want[res])
		slices.Sort(got[res])
		if !slices.Equal(got[res], want[res]) {
			t.Errorf("installer.yaml names the %s %v; an install of the bundle creates %v", res, got[res], want[res])
		}
	}
}

// olmv1GeneratedName is the name OLM v1's operator-controller (v1.5.1:
// DefaultUniqueNameGenerator) gives the ClusterRole and ClusterRoleBinding
// it makes of a CSV's clusterPermissions entry p: base, cut so that the
// name fits in 63 characters, a dash, and the base-36 SHA-224 of p's JSON.
// It changes whenever the entry's rules do.
func olmv1GeneratedName(t *testing.T, base string, p v1alpha1.StrategyDeploymentPermissions) string {
	t.Helper()
	h := sha256.New224()
	if err := json.NewEncoder(h).Encode(p); err != nil {
		t.Fatal(err)
	}
	suffix := new(big.Int).SetBytes(h.Sum(nil)).Text(36)
	if len(base)+len(suffix) > 63 {
		base = base[:63-len(suffix)-1]
	}
	return base + "-" + suffix
}

// TestServiceMonitorMatchesTheMetricsService: the ServiceMonitor of
// config/prometheus selects the metrics Service config/default installs,
// scrapes its HTTPS port, and verifies the name that Service has in DNS.
func TestServiceMonitorMatchesTheMetricsService(t *testing.T) {
	decode := func(dir string) []*unstructured.Unstructured {
		t.Helper()
		raw, err := render.Kustomize(repoPath(t, "config", dir))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := render.Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		return objs
	}
	var monitor *unstructured.Unstructured
	for _, obj := range decode("prometheus") {
		if obj.GetKind() == "ServiceMonitor" {
			monitor = obj
		}
	}
	if monitor == nil {
		t.Fatal("config/prometheus renders no ServiceMonitor")
	}
	selector, _, _ := unstructured.NestedStringMap(monitor.Object, "spec", "selector", "matchLabels")
	endpoints, _, _ := unstructured.NestedSlice(monitor.Object, "spec", "endpoints")
	if len(endpoints) != 1 {
		t.Fatalf("ServiceMonitor has %d endpoints, want 1", len(endpoints))
	}
	endpoint, _ := endpoints[0].(map[string]any)
	port, _, _ := unstructured.NestedString(endpoint, "port")
	serverName, _, _ := unstructured.NestedString(endpoint, "tlsConfig", "serverName")
	scheme, _, _ := unstructured.NestedString(endpoint, "scheme")

	matched := 0
	for _, obj := range decode("default") {
		if obj.GetKind() != "Service" {
			continue
		}
		labels := obj.GetLabels()
		selected := len(selector) > 0
		for k, v := range selector {
			if labels[k] != v {
				selected = false
			}
		}
		if !selected {
			continue
		}
		matched++
		if obj.GetNamespace() != monitor.GetNamespace() {
			t.Errorf("ServiceMonitor in %q, Service %s in %q: a ServiceMonitor selects Services of its own namespace", monitor.GetNamespace(), obj.GetName(), obj.GetNamespace())
		}
		if want := obj.GetName() + "." + obj.GetNamespace() + ".svc"; serverName != want {
			t.Errorf("ServiceMonitor verifies the name %q, the Service is %q", serverName, want)
		}
		ports, _, _ := unstructured.NestedSlice(obj.Object, "spec", "ports")
		found := false
		for _, p := range ports {
			if m, _ := p.(map[string]any); m["name"] == port {
				found = true
			}
		}
		if !found || scheme != "https" {
			t.Errorf("ServiceMonitor scrapes port %q over %q; the Service's ports are %v, served over HTTPS", port, scheme, ports)
		}
	}
	if matched != 1 {
		t.Errorf("ServiceMonitor selector %v matches %d Services of config/default, want the metrics Service", selector, matched)
	}
}
