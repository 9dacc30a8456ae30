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
	"cmp"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctlclient "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/hack/packaging/manifests"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/testenv"
)

// TestDeleteLeavesOnlyWhatClusterctlKeeps installs the infrastructure
// components as `clusterctl init` does (clusterctl's label on every
// object, the provider in the inventory) and runs `clusterctl delete
// --infrastructure mailgun` (the code of the command, v1.14.2): of the
// provider, only its Namespace and CRDs are left, which clusterctl keeps
// unless told --include-namespace or --include-crd.
func TestDeleteLeavesOnlyWhatClusterctlKeeps(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane: run by make test, not make test-unit")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	raw, err := manifests.Kustomize(filepath.Join(root(t), "config", "clusterctl"))
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]string{"MAILGUN_API_KEY": "key-123", "MAILGUN_DOMAIN": "mg.example.com", "MAIL_RECIPIENT": "ops@example.com"}
	resolved, err := yamlprocessor.NewSimpleProcessor().Process(raw, func(name string) (string, error) {
		if v, ok := values[name]; ok {
			return v, nil
		}
		return "", errors.New("not set")
	})
	if err != nil {
		t.Fatal(err)
	}
	env, err := testenv.StartWith(testenv.Options{WithoutProviderCRDs: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	kubeconfig, err := env.WriteKubeconfig(t.TempDir(), "management")
	if err != nil {
		t.Fatal(err)
	}
	objs := decode(t, resolved)
	// The Namespace first, as clusterctl creates it.
	first := func(u *unstructured.Unstructured) int {
		if u.GetKind() == "Namespace" {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int { return cmp.Compare(first(a), first(b)) })
	for _, obj := range objs {
		labels := obj.GetLabels()
		labels[clusterctlv1.ClusterctlLabel] = ""
		obj.SetLabels(labels)
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatalf("installing %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	if err := testenv.PrepareForClusterctl(ctx, kubeconfig, testenv.CoreProvider(), testenv.InfrastructureProvider()); err != nil {
		t.Fatal(err)
	}

	cc, err := clusterctlclient.New(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := cc.Delete(ctx, clusterctlclient.DeleteOptions{
		Kubeconfig:              clusterctlclient.Kubeconfig{Path: kubeconfig},
		InfrastructureProviders: []string{"mailgun"},
	}); err != nil {
		t.Fatalf("clusterctl delete --infrastructure mailgun: %v", err)
	}

	for _, obj := range objs {
		keep := obj.GetKind() == "Namespace" || obj.GetKind() == "CustomResourceDefinition"
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(obj.GroupVersionKind())
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), got)
		switch {
		case keep && err != nil:
			t.Errorf("%s %s should be kept by clusterctl delete: %v", obj.GetKind(), obj.GetName(), err)
		case !keep && !apierrors.IsNotFound(err):
			t.Errorf("%s %s is left after clusterctl delete (%v)", obj.GetKind(), obj.GetName(), err)
		}
	}
}
