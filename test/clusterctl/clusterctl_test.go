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

// Package clusterctl_test checks the clusterctl provider artifacts:
// metadata.yaml, the infrastructure components built from config/clusterctl
// and templates/cluster-template.yaml.
package clusterctl_test

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctlclient "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/hack/packaging/bundle"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/hack/packaging/manifests"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/config"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/testenv"
)

const providerLabel = "cluster.x-k8s.io/provider"

func root(t *testing.T) string {
	t.Helper()
	r, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// components are the infrastructure components with clusterctl's
// variables resolved from values.
func components(t *testing.T, values map[string]string) []*unstructured.Unstructured {
	t.Helper()
	raw, err := manifests.Kustomize(filepath.Join(root(t), "config", "clusterctl"))
	if err != nil {
		t.Fatal(err)
	}
	resolved, err := yamlprocessor.NewSimpleProcessor().Process(raw, func(name string) (string, error) {
		if v, ok := values[name]; ok {
			return v, nil
		}
		return "", errors.New("not set")
	})
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, resolved)
}

// installAsClusterctlInit creates objs as `clusterctl init` does: the
// Namespace first, clusterctl's label on every object.
func installAsClusterctlInit(ctx context.Context, t *testing.T, c client.Client, objs []*unstructured.Unstructured) {
	t.Helper()
	first := func(u *unstructured.Unstructured) int {
		if u.GetKind() == "Namespace" {
			return 0
		}
		return 1
	}
	objs = slices.Clone(objs)
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int { return cmp.Compare(first(a), first(b)) })
	for _, obj := range objs {
		obj = obj.DeepCopy()
		labels := obj.GetLabels()
		labels[clusterctlv1.ClusterctlLabel] = ""
		obj.SetLabels(labels)
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("installing %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
}

func decode(t *testing.T, b []byte) []*unstructured.Unstructured {
	t.Helper()
	objs, err := manifests.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func TestMetadataDeclaresContractV1Beta2(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root(t), "metadata.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var md struct {
		APIVersion    string `json:"apiVersion"`
		Kind          string `json:"kind"`
		ReleaseSeries []struct {
			Major, Minor uint64 // as the CSV's semver, which is unsigned
			Contract     string `json:"contract"`
		} `json:"releaseSeries"`
	}
	if err := yaml.UnmarshalStrict(b, &md); err != nil {
		t.Fatalf("metadata.yaml: %v", err)
	}
	if md.Kind != "Metadata" || md.APIVersion != "clusterctl.cluster.x-k8s.io/v1alpha3" || len(md.ReleaseSeries) == 0 {
		t.Fatalf("metadata.yaml = %+v", md)
	}
	csv, err := bundle.Load(filepath.Join(root(t), "bundle"), "cluster-api-provider-mailgun")
	if err != nil {
		t.Fatal(err)
	}
	v := csv.Spec.Version
	found := false
	for _, rs := range md.ReleaseSeries {
		if rs.Major == v.Major && rs.Minor == v.Minor {
			found = true
			if rs.Contract != "v1beta2" {
				t.Errorf("release series %d.%d implements contract %s, want v1beta2", rs.Major, rs.Minor, rs.Contract)
			}
		}
	}
	if !found {
		t.Errorf("metadata.yaml has no release series for the current version %s", v)
	}
}

func TestInfrastructureComponents(t *testing.T) {
	raw, err := manifests.Kustomize(filepath.Join(root(t), "config", "clusterctl"))
	if err != nil {
		t.Fatal(err)
	}
	p := yamlprocessor.NewSimpleProcessor()
	vars, err := p.GetVariableMap(raw)
	if err != nil {
		t.Fatalf("reading variables: %v", err)
	}
	names := slices.Sorted(maps.Keys(vars))
	want := []string{"MAILGUN_API_BASE", "MAILGUN_API_KEY", "MAILGUN_DOMAIN", "MAIL_RECIPIENT"}
	if !slices.Equal(names, want) {
		t.Errorf("variables = %v, want %v", names, want)
	}
	// None is required: clusterctl upgrade renders the components again and
	// refuses (after scaling the operator down) when a required variable is
	// unset, yet the operator reads the initial settings only at the first
	// start.
	for name, def := range vars {
		if def == nil {
			t.Errorf("variable %s has no default: clusterctl upgrade would need it set", name)
		}
	}
	unset := components(t, nil)
	for _, obj := range unset {
		switch obj.GetKind() {
		case "Secret":
			s := &corev1.Secret{}
			mustConvert(t, obj, s)
			if v, ok := s.StringData["api_key"]; !ok || v != "" {
				t.Errorf("with no variables, the initial Secret's api_key is %q (set: %v), want empty", v, ok)
			}
		case "ConfigMap":
			cm := &corev1.ConfigMap{}
			mustConvert(t, obj, cm)
			if d := cm.Data; d["mailgun_domain"] != "" || d["mail_recipient"] != "" || d["mailgun_api_base"] != "https://api.mailgun.net/v3" {
				t.Errorf("with no variables, the initial ConfigMap's data is %v", d)
			}
		}
	}
	// MAILGUN_API_BASE is left unset: it has a default.
	objs := components(t, map[string]string{"MAILGUN_API_KEY": "key-123", "MAILGUN_DOMAIN": "mg.example.com", "MAIL_RECIPIENT": "ops@example.com"})

	namespaces := 0
	for _, obj := range objs {
		if obj.GetLabels()[providerLabel] != "infrastructure-mailgun" {
			t.Errorf("%s %s lacks %s=infrastructure-mailgun", obj.GetKind(), obj.GetName(), providerLabel)
		}
		switch obj.GetKind() {
		case "Namespace":
			namespaces++
		case "Deployment":
			d := &appsv1.Deployment{}
			mustConvert(t, obj, d)
			if len(d.Spec.Template.Spec.Containers) != 1 || d.Spec.Template.Spec.Containers[0].Name != "manager" {
				t.Errorf("the Deployment's container must be named manager: %+v", d.Spec.Template.Spec.Containers)
			}
		case "Secret":
			s := &corev1.Secret{}
			mustConvert(t, obj, s)
			if s.Name != config.InitialSecretName {
				t.Errorf("components ship Secret %s; only the initial settings %s, which clusterctl may reset", s.Name, config.InitialSecretName)
			}
			if s.StringData["api_key"] != "key-123" {
				t.Errorf("Secret api_key = %q, want the variable's value", s.StringData["api_key"])
			}
		case "ConfigMap":
			cm := &corev1.ConfigMap{}
			mustConvert(t, obj, cm)
			if cm.Name != config.InitialConfigMapName {
				t.Errorf("components ship ConfigMap %s; only the initial settings %s, which clusterctl may reset", cm.Name, config.InitialConfigMapName)
			}
			if cm.Data["mailgun_domain"] != "mg.example.com" || cm.Data["mailgun_api_base"] != "https://api.mailgun.net/v3" {
				t.Errorf("ConfigMap data = %v", cm.Data)
			}
		case "CustomResourceDefinition":
			if obj.GetLabels()["cluster.x-k8s.io/v1beta2"] != "v1beta1" {
				t.Errorf("CRD %s lacks the contract label", obj.GetName())
			}
		}
		if ns := obj.GetNamespace(); ns != "" && ns != "capmg-system" {
			t.Errorf("%s %s is in namespace %s, want capmg-system", obj.GetKind(), obj.GetName(), ns)
		}
	}
	if namespaces != 1 {
		t.Errorf("%d Namespaces, want exactly 1", namespaces)
	}
}

// TestClusterTemplate resolves each cluster template flavor and has a real
// apiserver accept the result (server-side dry run).
func TestClusterTemplate(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the test control plane")
	}
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	tests := []struct {
		file string
		// identity is the identityRef.name the MailgunCluster must have.
		identity string
	}{
		{file: "cluster-template.yaml"},
		{file: "cluster-template-identity.yaml", identity: "payments-team"},
		{file: "cluster-template-machines.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(root(t), "templates", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			values := map[string]string{
				"CLUSTER_NAME": "payments", "NAMESPACE": "default",
				"MAILGUN_REQUEST": "3 nodes: please", "MAILGUN_REQUESTER": "alice@example.com",
				"WORKER_MACHINE_COUNT": "3", "KUBERNETES_VERSION": "v1.36.0", "WORKER_BOOTSTRAP_SECRET": "payments-workers-bootstrap",
			}
			if tt.identity != "" {
				values["MAILGUN_IDENTITY_NAME"] = tt.identity
			}
			resolved, err := yamlprocessor.NewSimpleProcessor().Process(raw, func(name string) (string, error) {
				if v, ok := values[name]; ok {
					return v, nil
				}
				return "", errors.New("not set")
			})
			if err != nil {
				t.Fatalf("resolving the template (MAILGUN_PRIORITY has a default): %v", err)
			}
			for _, obj := range decode(t, resolved) {
				if err := env.Client.Create(context.Background(), obj, client.DryRunAll); err != nil {
					t.Errorf("%s %s rejected: %v", obj.GetKind(), obj.GetName(), err)
				}
				if obj.GetKind() != "MailgunCluster" {
					continue
				}
				if got, _, _ := unstructured.NestedString(obj.Object, "spec", "priority"); got != "Urgent" {
					t.Errorf("priority = %q, want the default Urgent", got)
				}
				if got, _, _ := unstructured.NestedString(obj.Object, "spec", "identityRef", "name"); got != tt.identity {
					t.Errorf("identityRef.name = %q, want %q", got, tt.identity)
				}
			}
		})
	}
}

func mustConvert(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		t.Fatal(err)
	}
}

// TestClusterTemplateTakesAnyRequestLine: `clusterctl generate cluster`
// (the code of the command, v1.14.2) with the template and MAILGUN_REQUEST
// set to any single line of text gives a MailgunCluster whose
// spec.request is that text, character for character; further lines that
// start with four spaces (docs/install-clusterctl.md) become lines of it.
func TestClusterTemplateTakesAnyRequestLine(t *testing.T) {
	template := filepath.Join(root(t), "templates", "cluster-template.yaml")
	t.Setenv("MAILGUN_REQUESTER", "alice@example.com")
	tests := []struct{ variable, want string }{
		{variable: "3 nodes\n    in eu-west", want: "3 nodes\nin eu-west"},
	}
	for _, line := range []string{
		`3 control plane nodes, 5 workers`,
		`nodes: 3`,
		`say "please" and 'thanks'`,
		`C:\clusters\new \n is not a newline`,
		`# not a comment`,
		`  leading and trailing spaces  `,
		`{"json": [1, 2]}`,
		`- a dash, & an anchor *, ! a tag, | > % @ ` + "`backticks`",
		`ünïcödé, tab	inside`,
	} {
		tests = append(tests, struct{ variable, want string }{variable: line, want: line})
	}
	for _, tt := range tests {
		t.Run(tt.variable, func(t *testing.T) {
			t.Setenv("MAILGUN_REQUEST", tt.variable)
			cc, err := clusterctlclient.New(context.Background(), "")
			if err != nil {
				t.Fatal(err)
			}
			tpl, err := cc.GetClusterTemplate(context.Background(), clusterctlclient.GetClusterTemplateOptions{
				URLSource:       &clusterctlclient.URLSourceOptions{URL: template},
				ClusterName:     "payments",
				TargetNamespace: "default",
			})
			if err != nil {
				t.Fatalf("clusterctl generate cluster: %v", err)
			}
			raw, err := tpl.Yaml()
			if err != nil {
				t.Fatal(err)
			}
			for _, obj := range decode(t, raw) {
				if obj.GetKind() != "MailgunCluster" {
					continue
				}
				if got, _, _ := unstructured.NestedString(obj.Object, "spec", "request"); got != tt.want {
					t.Errorf("spec.request = %q, want %q", got, tt.want)
				}
				return
			}
			t.Fatal("no MailgunCluster generated")
		})
	}
}
