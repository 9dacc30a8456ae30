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

package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctlcluster "sigs.k8s.io/cluster-api/cmd/clusterctl/client/cluster"
	clusterctlconfig "sigs.k8s.io/cluster-api/cmd/clusterctl/client/config"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/config"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/operator"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/logbuf"
)

// CoreProvider is Cluster API's core provider as `clusterctl init` records
// it in its inventory; clusterctl move refuses a cluster without one.
func CoreProvider() clusterctlv1.Provider {
	return clusterctlv1.Provider{
		ObjectMeta:   metav1.ObjectMeta{Namespace: "capi-system", Name: "cluster-api"},
		ProviderName: "cluster-api", Type: string(clusterctlv1.CoreProviderType), Version: "v1.14.2",
	}
}

// InfrastructureProvider is this provider as `clusterctl init
// --infrastructure mailgun` records it.
func InfrastructureProvider() clusterctlv1.Provider {
	return clusterctlv1.Provider{
		ObjectMeta:   metav1.ObjectMeta{Namespace: "capmg-system", Name: "infrastructure-mailgun"},
		ProviderName: "mailgun", Type: string(clusterctlv1.InfrastructureProviderType), Version: "v0.1.0",
	}
}

// WriteKubeconfig writes an admin kubeconfig of the control plane into dir
// and returns its path, for tools that take a kubeconfig file (clusterctl).
func (e *Env) WriteKubeconfig(dir, name string) (string, error) {
	user, err := e.ControlPlane.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name+".kubeconfig")
	return path, os.WriteFile(path, kc, 0o600)
}

// PrepareForClusterctl makes the cluster of kubeconfig look as `clusterctl
// init` leaves the parts clusterctl move reads: Cluster API's CRDs carry
// clusterctl's label (move finds the kinds to move by it), clusterctl's
// inventory CRD is installed and lists providers. This provider's CRDs are
// left as they are: they ship with the label, so that move finds them
// however the provider was installed (OLM does not add it).
func PrepareForClusterctl(ctx context.Context, kubeconfig string, providers ...clusterctlv1.Provider) error {
	restConfig, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, apiextensionsv1.AddToScheme, clusterctlv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	c, err := client.New(restConfig, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := c.List(ctx, crds); err != nil {
		return err
	}
	for i := range crds.Items {
		crd := &crds.Items[i]
		// Only Cluster API's own: others (OLM's, on the test node) are no
		// provider's, and move would try to carry their objects along.
		capi := strings.HasSuffix(crd.Spec.Group, clusterv1.GroupVersion.Group)
		if _, ok := crd.Labels[clusterctlv1.ClusterctlLabel]; ok || !capi || crd.Spec.Group == infrav1.GroupVersion.Group {
			continue
		}
		base := crd.DeepCopy()
		if crd.Labels == nil {
			crd.Labels = map[string]string{}
		}
		crd.Labels[clusterctlv1.ClusterctlLabel] = ""
		if err := c.Patch(ctx, crd, client.MergeFrom(base)); err != nil {
			return fmt.Errorf("labelling CRD %s: %w", crd.Name, err)
		}
	}
	cfg, err := clusterctlconfig.New(ctx, "")
	if err != nil {
		return err
	}
	inventory := clusterctlcluster.New(clusterctlcluster.Kubeconfig{Path: kubeconfig}, cfg).ProviderInventory()
	if err := inventory.EnsureCustomResourceDefinitions(ctx); err != nil {
		return fmt.Errorf("installing clusterctl's inventory CRD: %w", err)
	}
	for _, p := range providers {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		p.Labels = map[string]string{clusterctlv1.ClusterctlLabel: ""}
		if err := c.Create(ctx, &p); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("registering provider %s: %w", p.Name, err)
		}
	}
	return nil
}

// StandInControlPlane marks a Cluster as Cluster API marks one whose
// infrastructure is provisioned and whose control plane is initialized:
// clusterctl moves only such clusters, and no control plane runs in the
// tests. Status is not moved, so it is marked again after each move.
func StandInControlPlane(ctx context.Context, c client.Client, cluster *clusterv1.Cluster) error {
	if err := c.Get(ctx, client.ObjectKeyFromObject(cluster), cluster); err != nil {
		return err
	}
	base := cluster.DeepCopy()
	cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	conditions.Set(cluster, metav1.Condition{Type: clusterv1.ClusterControlPlaneInitializedCondition, Status: metav1.ConditionTrue, Reason: "StandIn"})
	return c.Status().Patch(ctx, cluster, client.MergeFrom(base))
}

// RunOperator runs the operator in the test process against cfg, with the
// Mailgun settings from settings alone (no Secret or ConfigMap), until the
// test ends, and returns its log. On failure the log is printed.
func RunOperator(ctx context.Context, t testing.TB, name string, cfg *rest.Config, settings map[string]string) *logbuf.Buffer {
	t.Helper()
	logs := &logbuf.Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s's operator logs:\n%s", name, logs.String())
		}
	})
	o := operator.DefaultOptions()
	o.MetricsBindAddress, o.HealthProbeBindAddress = "0", "0"
	o.ConfigNamespace = ""
	o.SkipNameValidation = true
	o.MetricsRegistry = prometheus.NewRegistry()
	o.Getenv = func(k string) string { return settings[k] }
	logger := zap.New(zap.WriteTo(logs), zap.UseDevMode(true), zap.Level(zapcore.Level(-1)))
	o.Logger = &logger
	StartOperator(ctx, t, name, cfg, o)
	return logs
}

// StartOperator runs the operator with o against cfg in the test process
// until the test ends or the returned stop is called (stop may be called
// more than once); stop waits at most 30s for it to end.
func StartOperator(ctx context.Context, t testing.TB, name string, cfg *rest.Config, o operator.Options) (stop func()) {
	t.Helper()
	mgrCtx, cancel := context.WithCancel(ctx)
	mgr, err := operator.New(mgrCtx, cfg, o)
	if err != nil {
		cancel()
		t.Fatalf("creating the operator (%s): %v", name, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(mgrCtx); err != nil {
			t.Errorf("the operator (%s) stopped with error: %v", name, err)
		}
	}()
	stop = sync.OnceFunc(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("the operator (%s) did not stop within 30s", name)
		}
	})
	t.Cleanup(stop)
	return stop
}

// Settings are the operator's Mailgun settings for a Mailgun fake.
func Settings(domain, apiKey, recipient, apiBase string) map[string]string {
	return map[string]string{config.EnvDomain: domain, config.EnvAPIKey: apiKey, config.EnvRecipient: recipient, config.EnvAPIBase: apiBase}
}
