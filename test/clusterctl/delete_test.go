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
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterctlclient "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/testenv"
)

// TestDeleteLeavesOnlyWhatClusterctlKeeps installs the infrastructure
// components as `clusterctl init` does (clusterctl's label on every
// object, the provider in the inventory) and runs `clusterctl delete
// --infrastructure mailgun` (the code of the command, v1.14.2): of the
// provider, only its Namespace and CRDs are left, which clusterctl keeps
// unless told --include-namespace or --include-crd, and the user's settings
// objects, which the operator created without clusterctl's labels.
func TestDeleteLeavesOnlyWhatClusterctlKeeps(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane: run by make test, not make test-unit")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	values := map[string]string{"MAILGUN_API_KEY": "key-123", "MAILGUN_DOMAIN": "mg.example.com", "MAIL_RECIPIENT": "ops@example.com"}
	objs := components(t, values)
	env, err := testenv.StartWith(testenv.Options{WithoutProviderCRDs: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	kubeconfig, err := env.WriteKubeconfig(t.TempDir(), "management")
	if err != nil {
		t.Fatal(err)
	}
	installAsClusterctlInit(ctx, t, env.Client, objs)
	if err := testenv.PrepareForClusterctl(ctx, kubeconfig, testenv.CoreProvider(), testenv.InfrastructureProvider()); err != nil {
		t.Fatal(err)
	}
	settings := ensureUserObjects(ctx, t, env.Client)

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
	for _, obj := range settings {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Errorf("the user's settings %T %s should be kept by clusterctl delete: %v", obj, obj.GetName(), err)
		}
	}
}
