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

package clusterctl_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctlclient "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/config"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/testenv"
)

// ensureUserObjects does what the operator does when it starts: it creates
// the settings objects from the initial ones, or takes them over.
func ensureUserObjects(ctx context.Context, t *testing.T, c client.Client) []client.Object {
	t.Helper()
	u := config.UserObjects{Client: c, Reader: c, Namespace: "capmg-system",
		SecretName: config.DefaultSecretName, ConfigMapName: config.DefaultConfigMapName}
	did, err := u.Ensure(ctx)
	if err != nil {
		t.Fatalf("creating the settings objects as the operator does: %v", err)
	}
	t.Logf("operator start: %q", did)
	return []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "capmg-system", Name: config.DefaultSecretName}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "capmg-system", Name: config.DefaultConfigMapName}},
	}
}

// TestUpgradeKeepsTheUsersSettings runs `clusterctl upgrade apply
// --infrastructure capmg-system/mailgun:v0.1.1` (the code of the command,
// v1.14.2, from a local provider repository) on a management cluster where
// the user edited the settings: clusterctl deletes and re-creates every
// object of the provider, and the user's values are still there after it.
// The ConfigMap starts as an older release's components shipped it, with
// clusterctl's labels, and the operator takes it over.
func TestUpgradeKeepsTheUsersSettings(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane: run by make test, not make test-unit")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env, err := testenv.StartWith(testenv.Options{WithoutProviderCRDs: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	dir := t.TempDir()
	kubeconfig, err := env.WriteKubeconfig(dir, "management")
	if err != nil {
		t.Fatal(err)
	}

	// clusterctl init --infrastructure mailgun:v0.1.0 with these variables.
	initValues := map[string]string{"MAILGUN_API_KEY": "key-at-init", "MAILGUN_DOMAIN": "init.example.com", "MAIL_RECIPIENT": "init@example.com"}
	installAsClusterctlInit(ctx, t, env.Client, components(t, initValues))
	if err := testenv.PrepareForClusterctl(ctx, kubeconfig, testenv.CoreProvider(), testenv.InfrastructureProvider()); err != nil {
		t.Fatal(err)
	}
	legacy := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "capmg-system", Name: config.DefaultConfigMapName, Labels: map[string]string{
			providerLabel: "infrastructure-mailgun", clusterctlv1.ClusterctlLabel: "",
		}},
		Data: map[string]string{config.ConfigMapDomainKey: "mine.example.com", config.ConfigMapRecipientKey: "me@example.com"},
	}
	if err := env.Client.Create(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	settings := ensureUserObjects(ctx, t, env.Client)
	// The user sets their own key.
	secret := settings[0].(*corev1.Secret)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
		t.Fatal(err)
	}
	if got := string(secret.Data[config.SecretAPIKeyKey]); got != "key-at-init" {
		t.Fatalf("the operator created the Secret with api_key %q, want the init variable's", got)
	}
	secret.Data[config.SecretAPIKeyKey] = []byte("key-mine")
	if err := env.Client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}

	// The upgrade, with other variable values than at init.
	upgradeValues := map[string]string{"MAILGUN_API_KEY": "key-at-upgrade", "MAILGUN_DOMAIN": "upgrade.example.com", "MAIL_RECIPIENT": "upgrade@example.com"}
	configFile := providerRepository(t, dir, components(t, upgradeValues), upgradeValues)
	cc, err := clusterctlclient.New(ctx, configFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := cc.ApplyUpgrade(ctx, clusterctlclient.ApplyUpgradeOptions{
		Kubeconfig:              clusterctlclient.Kubeconfig{Path: kubeconfig},
		InfrastructureProviders: []string{"capmg-system/mailgun:v0.1.1"},
	}); err != nil {
		t.Fatalf("clusterctl upgrade apply --infrastructure capmg-system/mailgun:v0.1.1: %v", err)
	}

	// clusterctl did re-create the provider: its initial settings have the
	// upgrade's values, and the inventory says v0.1.1.
	initial := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "capmg-system", Name: config.InitialConfigMapName}, initial); err != nil {
		t.Fatal(err)
	}
	if got := initial.Data[config.ConfigMapDomainKey]; got != "upgrade.example.com" {
		t.Errorf("initial ConfigMap domain after the upgrade = %q, want the upgrade's variable: clusterctl did not re-apply", got)
	}
	provider := &unstructured.Unstructured{}
	provider.SetGroupVersionKind(clusterctlv1.GroupVersion.WithKind("Provider"))
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "capmg-system", Name: "infrastructure-mailgun"}, provider); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructured.NestedString(provider.Object, "version"); v != "v0.1.1" {
		t.Errorf("inventory version = %s, want v0.1.1", v)
	}
	// The user's settings are as the user left them.
	cm := settings[1].(*corev1.ConfigMap)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
		t.Fatalf("the user's Secret is gone after the upgrade: %v", err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
		t.Fatalf("the user's ConfigMap is gone after the upgrade: %v", err)
	}
	if got := string(secret.Data[config.SecretAPIKeyKey]); got != "key-mine" {
		t.Errorf("api_key after the upgrade = %q, want the user's", got)
	}
	if got := cm.Data; got[config.ConfigMapDomainKey] != "mine.example.com" || got[config.ConfigMapRecipientKey] != "me@example.com" {
		t.Errorf("ConfigMap after the upgrade = %v, want the user's values", got)
	}
}

// providerRepository writes a local clusterctl provider repository with
// this provider's v0.1.1 (the given components) and Cluster API's metadata
// (clusterctl reads the core provider's contract from it), and a
// clusterctl config that points at it and holds vars. It returns the
// config's path.
func providerRepository(t *testing.T, dir string, objs []*unstructured.Unstructured, vars map[string]string) string {
	t.Helper()
	write := func(path string, b []byte) {
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var components []byte
	for _, obj := range objs {
		if obj.GetKind() == "Deployment" {
			// As make release-manifests IMG=... sets it.
			obj = obj.DeepCopy()
			containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
			containers[0].(map[string]any)["image"] = "ghcr.io/capi-mailgun/cluster-api-provider-mailgun:v0.1.1"
			if err := unstructured.SetNestedSlice(obj.Object, containers, "spec", "template", "spec", "containers"); err != nil {
				t.Fatal(err)
			}
		}
		b, err := yaml.Marshal(obj.Object)
		if err != nil {
			t.Fatal(err)
		}
		components = append(append(components, "---\n"...), b...)
	}
	metadata, err := os.ReadFile(filepath.Join(root(t), "metadata.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	infra := filepath.Join(dir, "repository", "infrastructure-mailgun", "v0.1.1")
	write(filepath.Join(infra, "infrastructure-components.yaml"), components)
	write(filepath.Join(infra, "metadata.yaml"), metadata)
	core := filepath.Join(dir, "repository", "cluster-api", testenv.CoreProvider().Version)
	write(filepath.Join(core, "core-components.yaml"), []byte("---\n"))
	write(filepath.Join(core, "metadata.yaml"), []byte(fmt.Sprintf(`apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3
kind: Metadata
releaseSeries:
- major: 1
  minor: 14
  contract: %s
`, "v1beta2")))

	cfg := map[string]any{"providers": []map[string]string{
		{"name": "cluster-api", "type": string(clusterctlv1.CoreProviderType), "url": "file://" + filepath.Join(core, "core-components.yaml")},
		{"name": "mailgun", "type": string(clusterctlv1.InfrastructureProviderType), "url": "file://" + filepath.Join(infra, "infrastructure-components.yaml")},
	}}
	for k, v := range vars {
		cfg[k] = v
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "clusterctl.yaml")
	write(path, b)
	return path
}
