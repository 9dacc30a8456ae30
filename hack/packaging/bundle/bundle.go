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

// Package bundle generates the OLM bundle (registry+v1) from the kustomize
// manifests in config/, the way `operator-sdk generate bundle` does, with
// operator-framework/api types, so that `make bundle` works without the
// operator-sdk CLI and produces the same files on every run.
package bundle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/blang/semver/v4"
	"github.com/operator-framework/api/pkg/lib/version"
	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/hack/packaging/manifests"
)

// Options describe the bundle to generate.
type Options struct {
	// Package is the OLM package name.
	Package string
	// Version is the operator's semantic version, without "v".
	Version string
	// Replaces names the CSV this version upgrades from, if any.
	Replaces string
	// Image is the manager image.
	Image string
	// Channels and DefaultChannel are the OLM channels of the bundle.
	Channels       []string
	DefaultChannel string
	// CreatedAt is the CSV's createdAt annotation; Generate keeps the one of
	// an existing CSV of the same version so regeneration does not churn.
	CreatedAt string
}

// Files maps a path relative to the repository root to its content.
type Files map[string][]byte

// ManifestsDir, MetadataDir and ScorecardDir are the bundle directories,
// relative to the bundle root.
const (
	ManifestsDir = "manifests"
	MetadataDir  = "metadata"
	ScorecardDir = "tests/scorecard"
)

// ExistingCreatedAt returns the createdAt of the CSV in bundleDir if it has
// the given version, so that regenerating an unchanged version is a no-op.
func ExistingCreatedAt(bundleDir, pkg, version string) string {
	csv, err := Load(bundleDir, pkg)
	if err != nil || csv.Spec.Version.String() != version {
		return ""
	}
	return csv.Annotations["createdAt"]
}

// Generate builds the bundle from the rendered config/manifests. Paths in
// the result are relative to the bundle root, except bundle.Dockerfile which
// belongs next to it.
func Generate(rendered []byte, o Options) (Files, error) {
	if o.Package == "" || o.Version == "" || o.Image == "" || len(o.Channels) == 0 {
		return nil, errors.New("package, version, image and channels are required")
	}
	if o.DefaultChannel == "" {
		o.DefaultChannel = o.Channels[0]
	}
	if o.CreatedAt == "" {
		o.CreatedAt = time.Now().UTC().Format(time.RFC3339)
	}
	objs, err := manifests.Decode(rendered)
	if err != nil {
		return nil, err
	}

	g := &generator{o: o, files: Files{}}
	if err := g.classify(objs); err != nil {
		return nil, err
	}
	if err := g.buildCSV(); err != nil {
		return nil, err
	}
	for _, obj := range g.extra {
		if err := g.addObject(obj); err != nil {
			return nil, err
		}
	}
	g.addMetadata()
	return g.files, nil
}

type generator struct {
	o     Options
	files Files

	csv         *v1alpha1.ClusterServiceVersion
	deployments []*appsv1.Deployment
	crds        []*apiextensionsv1.CustomResourceDefinition
	roles       map[string]*unstructured.Unstructured // kind/name
	bindings    []*unstructured.Unstructured
	samples     []*unstructured.Unstructured
	scorecard   *unstructured.Unstructured
	extra       []*unstructured.Unstructured
}

// clusterAPIGroup is the API group of Cluster API's core kinds.
const clusterAPIGroup = "cluster.x-k8s.io"

func (g *generator) classify(objs []*unstructured.Unstructured) error {
	g.roles = map[string]*unstructured.Unstructured{}
	var rest []*unstructured.Unstructured
	for _, obj := range objs {
		switch obj.GetKind() {
		case "ClusterServiceVersion":
			g.csv = &v1alpha1.ClusterServiceVersion{}
			if err := fromUnstructured(obj, g.csv); err != nil {
				return err
			}
		case "Deployment":
			d := &appsv1.Deployment{}
			if err := fromUnstructured(obj, d); err != nil {
				return err
			}
			g.deployments = append(g.deployments, d)
		case "CustomResourceDefinition":
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := fromUnstructured(obj, crd); err != nil {
				return err
			}
			g.crds = append(g.crds, crd)
		case "Role", "ClusterRole":
			g.roles[obj.GetKind()+"/"+obj.GetName()] = obj
		case "RoleBinding", "ClusterRoleBinding":
			g.bindings = append(g.bindings, obj)
		case "Configuration":
			g.scorecard = obj
		case "Namespace":
			// OLM installs into the namespace of the OperatorGroup.
		default:
			rest = append(rest, obj)
		}
	}
	if g.csv == nil {
		return errors.New("no ClusterServiceVersion base in the manifests")
	}
	if len(g.deployments) == 0 {
		return errors.New("no Deployment in the manifests")
	}
	owned := map[schema.GroupKind]bool{}
	for _, crd := range g.crds {
		owned[schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}] = true
	}
	for _, obj := range rest {
		gk := obj.GroupVersionKind().GroupKind()
		switch {
		case owned[gk]:
			g.samples = append(g.samples, obj)
		case gk.Group == clusterAPIGroup:
			// Samples of Cluster API's kinds, which the operator consumes
			// (the Cluster), are documentation, not bundle content.
		default:
			g.extra = append(g.extra, obj)
		}
	}
	return nil
}

func (g *generator) buildCSV() error {
	csv := g.csv
	csv.Name = fmt.Sprintf("%s.v%s", g.o.Package, g.o.Version)
	csv.Namespace = "placeholder"
	v, err := semver.Parse(g.o.Version)
	if err != nil {
		return fmt.Errorf("parsing version %q: %w", g.o.Version, err)
	}
	csv.Spec.Version = version.OperatorVersion{Version: v}
	csv.Spec.Replaces = g.o.Replaces
	csv.Annotations["containerImage"] = g.o.Image
	csv.Annotations["createdAt"] = g.o.CreatedAt

	examples := make([]map[string]any, 0, len(g.samples))
	for _, s := range g.samples {
		u := s.DeepCopy()
		u.SetNamespace("")
		examples = append(examples, u.Object)
	}
	examplesJSON, err := json.MarshalIndent(examples, "", "  ")
	if err != nil {
		return err
	}
	csv.Annotations["alm-examples"] = string(examplesJSON)

	strategy := v1alpha1.StrategyDetailsDeployment{}
	serviceAccounts := map[string]bool{}
	for _, d := range g.deployments {
		spec := d.Spec.DeepCopy()
		for i := range spec.Template.Spec.Containers {
			if spec.Template.Spec.Containers[i].Name == "manager" {
				spec.Template.Spec.Containers[i].Image = g.o.Image
			}
		}
		strategy.DeploymentSpecs = append(strategy.DeploymentSpecs, v1alpha1.StrategyDeploymentSpec{
			Name: d.Name, Spec: *spec, Label: d.Labels,
		})
		serviceAccounts[spec.Template.Spec.ServiceAccountName] = true
	}
	if err := g.clusterPermissions(&strategy, serviceAccounts); err != nil {
		return err
	}
	csv.Spec.InstallStrategy = v1alpha1.NamedInstallStrategy{
		StrategyName: v1alpha1.InstallStrategyNameDeployment, StrategySpec: strategy,
	}

	crdsByName := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, crd := range g.crds {
		crdsByName[crd.Name] = crd
		if err := g.addTyped(crd, crd.Spec.Group+"_"+crd.Spec.Names.Plural+".yaml"); err != nil {
			return err
		}
	}
	for _, desc := range csv.Spec.CustomResourceDefinitions.Owned {
		if crdsByName[desc.Name] == nil {
			return fmt.Errorf("the CSV base owns %s, but no such CRD is in the manifests", desc.Name)
		}
	}
	if len(csv.Spec.CustomResourceDefinitions.Owned) != len(g.crds) {
		return fmt.Errorf("the CSV base describes %d owned CRDs, the manifests hold %d", len(csv.Spec.CustomResourceDefinitions.Owned), len(g.crds))
	}
	csv.TypeMeta.APIVersion = v1alpha1.SchemeGroupVersion.String()
	csv.TypeMeta.Kind = v1alpha1.ClusterServiceVersionKind
	return g.addTyped(csv, g.o.Package+".clusterserviceversion.yaml")
}

// clusterPermissions turns the ClusterRoles bound to the operator's service
// accounts into the CSV's clusterPermissions. Roles bound by RoleBindings
// (Secrets, ConfigMaps and leases in the operator's namespace) stay bundle
// objects instead of going into the CSV's permissions: for an AllNamespaces
// OperatorGroup OLM widens CSV permissions into ClusterRoles, which would
// give the operator every Secret in the cluster. As bundle objects OLM
// creates them in the install namespace; their ServiceAccount subjects lose
// their namespace, which RBAC then takes from the RoleBinding's. Roles bound
// to nobody (user-facing aggregated roles) also stay bundle objects.
func (g *generator) clusterPermissions(strategy *v1alpha1.StrategyDetailsDeployment, serviceAccounts map[string]bool) error {
	used := map[string]bool{}
	clusterPerms := map[string][]rbacv1.PolicyRule{}
	for _, b := range g.bindings {
		binding := &rbacv1.RoleBinding{} // same shape as ClusterRoleBinding
		if err := fromUnstructured(b, binding); err != nil {
			return err
		}
		var sa string
		for _, s := range binding.Subjects {
			if s.Kind == "ServiceAccount" && serviceAccounts[s.Name] {
				sa = s.Name
			}
		}
		if sa == "" {
			g.extra = append(g.extra, b)
			continue
		}
		if b.GetKind() == "RoleBinding" {
			u := b.DeepCopy()
			subjects, _, _ := unstructured.NestedSlice(u.Object, "subjects")
			for _, subj := range subjects {
				if m, ok := subj.(map[string]any); ok && m["kind"] == "ServiceAccount" {
					delete(m, "namespace")
				}
			}
			if err := unstructured.SetNestedSlice(u.Object, subjects, "subjects"); err != nil {
				return err
			}
			g.extra = append(g.extra, u)
			continue
		}
		key := binding.RoleRef.Kind + "/" + binding.RoleRef.Name
		role, ok := g.roles[key]
		if !ok {
			return fmt.Errorf("%s %s binds missing %s", b.GetKind(), b.GetName(), key)
		}
		r := &rbacv1.ClusterRole{}
		if err := fromUnstructured(role, r); err != nil {
			return err
		}
		used[key] = true
		clusterPerms[sa] = append(clusterPerms[sa], r.Rules...)
	}
	for _, sa := range sortedKeys(clusterPerms) {
		strategy.ClusterPermissions = append(strategy.ClusterPermissions, v1alpha1.StrategyDeploymentPermissions{ServiceAccountName: sa, Rules: clusterPerms[sa]})
	}
	for key, role := range g.roles {
		if !used[key] {
			g.extra = append(g.extra, role)
		}
	}
	// The service accounts themselves are created by OLM from the CSV.
	kept := g.extra[:0]
	for _, obj := range g.extra {
		if obj.GetKind() == "ServiceAccount" && serviceAccounts[obj.GetName()] {
			continue
		}
		kept = append(kept, obj)
	}
	g.extra = kept
	return nil
}

// addObject adds an object to the manifests directory, named like
// operator-sdk names them: <name>_<group>_<version>_<kind>.yaml.
func (g *generator) addObject(obj *unstructured.Unstructured) error {
	u := obj.DeepCopy()
	u.SetNamespace("")
	gvk := u.GroupVersionKind()
	parts := []string{u.GetName()}
	if gvk.Group != "" {
		parts = append(parts, gvk.Group)
	}
	parts = append(parts, gvk.Version, strings.ToLower(gvk.Kind))
	return g.add(u.Object, strings.Join(parts, "_")+".yaml")
}

func (g *generator) addTyped(obj runtime.Object, name string) error {
	// Through JSON, so that custom marshalers (the CSV's version) apply.
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	u := map[string]any{}
	if err := json.Unmarshal(b, &u); err != nil {
		return err
	}
	unstructured.RemoveNestedField(u, "status")
	unstructured.RemoveNestedField(u, "metadata", "creationTimestamp")
	return g.add(u, name)
}

func (g *generator) add(obj map[string]any, name string) error {
	b, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	path := filepath.Join(ManifestsDir, name)
	if _, dup := g.files[path]; dup {
		return fmt.Errorf("two bundle objects map to %s", path)
	}
	g.files[path] = b
	return nil
}

// OpenShiftVersions is the bundle's com.redhat.openshift.versions: OpenShift
// 4.18 and later, the first release on Kubernetes 1.31, the CSV's
// minKubeVersion (OperatorHub's checks want both to agree).
const OpenShiftVersions = "v4.18"

// Labels are the bundle image labels; metadata/annotations.yaml carries the
// same keys and values.
func Labels(o Options) [][2]string {
	if o.DefaultChannel == "" && len(o.Channels) > 0 {
		o.DefaultChannel = o.Channels[0]
	}
	return [][2]string{
		{"operators.operatorframework.io.bundle.mediatype.v1", "registry+v1"},
		{"operators.operatorframework.io.bundle.manifests.v1", ManifestsDir + "/"},
		{"operators.operatorframework.io.bundle.metadata.v1", MetadataDir + "/"},
		{"operators.operatorframework.io.bundle.package.v1", o.Package},
		{"operators.operatorframework.io.bundle.channels.v1", strings.Join(o.Channels, ",")},
		{"operators.operatorframework.io.bundle.channel.default.v1", o.DefaultChannel},
		{"operators.operatorframework.io.metrics.builder", "hack/bundle"},
		{"operators.operatorframework.io.metrics.mediatype.v1", "metrics+v1"},
		{"operators.operatorframework.io.metrics.project_layout", "go.kubebuilder.io/v4"},
		{"operators.operatorframework.io.test.mediatype.v1", "scorecard+v1"},
		{"operators.operatorframework.io.test.config.v1", ScorecardDir + "/"},
		{"com.redhat.openshift.versions", OpenShiftVersions},
	}
}

func (g *generator) addMetadata() {
	var ann bytes.Buffer
	ann.WriteString("annotations:\n")
	for _, l := range Labels(g.o) {
		fmt.Fprintf(&ann, "  %s: %s\n", l[0], l[1])
	}
	g.files[filepath.Join(MetadataDir, "annotations.yaml")] = ann.Bytes()

	if g.scorecard != nil {
		u := g.scorecard.DeepCopy()
		u.SetNamespace("")
		b, _ := yaml.Marshal(u.Object)
		g.files[filepath.Join(ScorecardDir, "config.yaml")] = b
	}

	var df bytes.Buffer
	df.WriteString("# Generated by `make bundle` (hack/bundle). DO NOT EDIT.\nFROM scratch\n\n")
	for _, l := range Labels(g.o) {
		fmt.Fprintf(&df, "LABEL %s=%s\n", l[0], l[1])
	}
	df.WriteString("\nCOPY bundle/manifests /manifests/\nCOPY bundle/metadata /metadata/\n")
	if g.scorecard != nil {
		df.WriteString("COPY bundle/tests/scorecard /tests/scorecard/\n")
	}
	g.files[filepath.Join("..", "bundle.Dockerfile")] = df.Bytes()
}

// Write replaces the bundle in dir (manifests, metadata, tests) with files.
func Write(dir string, files Files) error {
	for _, sub := range []string{ManifestsDir, MetadataDir, "tests"} {
		if err := os.RemoveAll(filepath.Join(dir, sub)); err != nil {
			return err
		}
	}
	return writeFiles(dir, files)
}

// writeFiles writes files under dir, making the directories they need.
func writeFiles(dir string, files Files) error {
	for _, name := range sortedKeys(files) {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, files[name], 0o644); err != nil {
			return err
		}
	}
	return nil
}

func fromUnstructured(u *unstructured.Unstructured, into any) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		return fmt.Errorf("decoding %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Load reads the CSV of the bundle in dir.
func Load(dir, pkg string) (*v1alpha1.ClusterServiceVersion, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestsDir, pkg+".clusterserviceversion.yaml"))
	if err != nil {
		return nil, err
	}
	csv := &v1alpha1.ClusterServiceVersion{}
	if err := yaml.Unmarshal(b, csv); err != nil {
		return nil, fmt.Errorf("parsing CSV in %s: %w", dir, err)
	}
	return csv, nil
}

// OperatorHub lays the bundle out as the community-operators repositories
// (k8s-operatorhub/community-operators, redhat-openshift-ecosystem/
// community-operators-prod) take it: operators/<package>/<version>/ with
// manifests/, metadata/ and tests/, and operators/<package>/ci.yaml. The
// bundle.Dockerfile is left out: their pipelines build the bundle image
// from metadata/annotations.yaml. updateGraph replaces-mode matches our
// CSVs, each of which names the version it replaces.
func OperatorHub(files Files, pkg, version string) Files {
	out := Files{}
	base := filepath.Join("operators", pkg, version)
	for name, b := range files {
		if strings.HasPrefix(name, "..") {
			continue
		}
		out[filepath.Join(base, name)] = b
	}
	out[filepath.Join("operators", pkg, "ci.yaml")] = []byte("# community-operators CI settings: each version's CSV names the one it replaces.\nupdateGraph: replaces-mode\n")
	return out
}

// WriteOperatorHub writes the layout of OperatorHub under dir, replacing
// the version's directory.
func WriteOperatorHub(dir string, files Files, pkg, version string) error {
	if err := os.RemoveAll(filepath.Join(dir, "operators", pkg, version)); err != nil {
		return err
	}
	return writeFiles(dir, OperatorHub(files, pkg, version))
}
