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
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/proc"
)

// kubelet plays the kubelet for one Deployment: no pods run on the test
// control plane, so it runs the manager binary as a local process with
// exactly the Deployment's args and env, authenticated as the Deployment's
// ServiceAccount through a TokenRequest (so the RBAC OLM created is what the
// operator gets), and reports the Deployment available once the readiness
// probe passes. When the Deployment's spec changes (an upgrade, a
// Subscription config change) it restarts the process, like a rollout.
//
// Two things differ from a pod, because every "pod" here shares the host's
// network: the health and metrics addresses are rewritten to free loopback
// ports, and the container command is replaced by the local binary.
type kubelet struct {
	t          *testing.T
	c          client.Client
	cs         kubernetes.Interface
	restConfig *rest.Config
	key        types.NamespacedName
	managerBin string
	logDir     string

	mu         sync.Mutex
	kubeconfig string
	proc       *proc.Proc
	generation int64
	healthAddr string
	probePath  string
	ready      bool
	starts     int
}

func (k *kubelet) run(ctx context.Context) {
	for ctx.Err() == nil {
		if err := k.sync(ctx); err != nil && ctx.Err() == nil {
			k.t.Logf("kubelet: %v", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.proc != nil {
		k.proc.Stop()
	}
}

func (k *kubelet) sync(ctx context.Context) error {
	dep := &appsv1.Deployment{}
	if err := k.c.Get(ctx, k.key, dep); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if dep.Generation != k.generation || (k.proc != nil && k.proc.Exited()) {
		if k.proc != nil {
			k.proc.Stop()
		}
		if err := k.start(ctx, dep); err != nil {
			return fmt.Errorf("starting manager for generation %d: %w", dep.Generation, err)
		}
		k.generation = dep.Generation
		k.ready = false
	}
	if k.ready && dep.Status.ObservedGeneration == dep.Generation && dep.Status.AvailableReplicas > 0 {
		return nil
	}
	if !k.probe() {
		return nil
	}
	k.ready = true
	return k.markAvailable(ctx, dep)
}

func (k *kubelet) start(ctx context.Context, dep *appsv1.Deployment) error {
	pod := dep.Spec.Template
	var container *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == "manager" {
			container = &pod.Spec.Containers[i]
		}
	}
	if container == nil {
		return fmt.Errorf("deployment %s has no manager container", k.key)
	}
	kubeconfig, err := k.serviceAccountKubeconfig(ctx, dep.Namespace, pod.Spec.ServiceAccountName)
	if err != nil {
		return err
	}
	env, err := k.resolveEnv(ctx, dep, container)
	if err != nil {
		return err
	}
	k.kubeconfig = kubeconfig
	env = append(env, "KUBECONFIG="+kubeconfig, "HOME="+k.logDir, "PATH="+os.Getenv("PATH"))

	k.healthAddr = proc.FreeAddr(k.t)
	metricsAddr := proc.FreeAddr(k.t)
	var args []string
	for _, a := range container.Args {
		switch {
		case strings.HasPrefix(a, "--health-probe-bind-address="):
			a = "--health-probe-bind-address=" + k.healthAddr
		case strings.HasPrefix(a, "--metrics-bind-address="):
			a = "--metrics-bind-address=" + metricsAddr
		}
		args = append(args, a)
	}
	k.probePath = "/readyz"
	if p := container.ReadinessProbe; p != nil && p.HTTPGet != nil {
		k.probePath = p.HTTPGet.Path
	}
	k.starts++
	k.proc = proc.Start(k.t, k.logDir, fmt.Sprintf("manager-%d", k.starts), k.managerBin, args, env)
	return nil
}

// serviceAccountKubeconfig writes a kubeconfig holding a token of the
// ServiceAccount, from the TokenRequest API like a projected volume.
func (k *kubelet) serviceAccountKubeconfig(ctx context.Context, ns, sa string) (string, error) {
	tr, err := k.cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", ns, sa, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: k.restConfig.Host, CertificateAuthorityData: k.restConfig.CAData}
	cfg.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: sa, Namespace: ns}
	cfg.CurrentContext = "e2e"
	path := filepath.Join(k.logDir, fmt.Sprintf("kubeconfig-%s-%d", sa, k.starts+1))
	return path, clientcmd.WriteToFile(*cfg, path)
}

// resolveEnv computes the container's environment the way the kubelet does
// for the sources this operator's Deployment uses.
func (k *kubelet) resolveEnv(ctx context.Context, dep *appsv1.Deployment, c *corev1.Container) ([]string, error) {
	var env []string
	for _, from := range c.EnvFrom {
		data := map[string]string{}
		optional := false
		switch {
		case from.ConfigMapRef != nil:
			optional = ptr.Deref(from.ConfigMapRef.Optional, false)
			cm := &corev1.ConfigMap{}
			if err := k.c.Get(ctx, types.NamespacedName{Namespace: dep.Namespace, Name: from.ConfigMapRef.Name}, cm); err != nil {
				if !(optional && apierrors.IsNotFound(err)) {
					return nil, err
				}
			}
			data = cm.Data
		case from.SecretRef != nil:
			optional = ptr.Deref(from.SecretRef.Optional, false)
			s := &corev1.Secret{}
			if err := k.c.Get(ctx, types.NamespacedName{Namespace: dep.Namespace, Name: from.SecretRef.Name}, s); err != nil {
				if !(optional && apierrors.IsNotFound(err)) {
					return nil, err
				}
			}
			for key, v := range s.Data {
				data[key] = string(v)
			}
		}
		for key, v := range data {
			env = append(env, from.Prefix+key+"="+v)
		}
	}
	for _, e := range c.Env {
		value := e.Value
		if vf := e.ValueFrom; vf != nil {
			var err error
			value, err = k.resolveValueFrom(ctx, dep, vf)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
		}
		env = append(env, e.Name+"="+value)
	}
	return env, nil
}

func (k *kubelet) resolveValueFrom(ctx context.Context, dep *appsv1.Deployment, vf *corev1.EnvVarSource) (string, error) {
	switch {
	case vf.FieldRef != nil:
		path := vf.FieldRef.FieldPath
		switch {
		case path == "metadata.namespace":
			return dep.Namespace, nil
		case path == "metadata.name":
			return dep.Name + "-e2e", nil
		case strings.HasPrefix(path, "metadata.annotations['"):
			key := strings.TrimSuffix(strings.TrimPrefix(path, "metadata.annotations['"), "']")
			return dep.Spec.Template.Annotations[key], nil
		case strings.HasPrefix(path, "metadata.labels['"):
			key := strings.TrimSuffix(strings.TrimPrefix(path, "metadata.labels['"), "']")
			return dep.Spec.Template.Labels[key], nil
		}
		return "", fmt.Errorf("unsupported fieldRef %s", path)
	case vf.ConfigMapKeyRef != nil:
		cm := &corev1.ConfigMap{}
		err := k.c.Get(ctx, types.NamespacedName{Namespace: dep.Namespace, Name: vf.ConfigMapKeyRef.Name}, cm)
		if err != nil && !(apierrors.IsNotFound(err) && ptr.Deref(vf.ConfigMapKeyRef.Optional, false)) {
			return "", err
		}
		return cm.Data[vf.ConfigMapKeyRef.Key], nil
	case vf.SecretKeyRef != nil:
		s := &corev1.Secret{}
		err := k.c.Get(ctx, types.NamespacedName{Namespace: dep.Namespace, Name: vf.SecretKeyRef.Name}, s)
		if err != nil && !(apierrors.IsNotFound(err) && ptr.Deref(vf.SecretKeyRef.Optional, false)) {
			return "", err
		}
		return string(s.Data[vf.SecretKeyRef.Key]), nil
	}
	return "", fmt.Errorf("unsupported valueFrom %+v", vf)
}

func (k *kubelet) probe() bool {
	code, _ := proc.HTTPGet(k.healthAddr, k.probePath)
	return code == http.StatusOK
}

func (k *kubelet) markAvailable(ctx context.Context, dep *appsv1.Deployment) error {
	replicas := ptr.Deref(dep.Spec.Replicas, 1)
	now := metav1.Now()
	dep.Status = appsv1.DeploymentStatus{
		ObservedGeneration: dep.Generation,
		Replicas:           replicas,
		UpdatedReplicas:    replicas,
		ReadyReplicas:      replicas,
		AvailableReplicas:  replicas,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable",
				Message: "manager process passed its readiness probe (e2e kubelet)", LastUpdateTime: now, LastTransitionTime: now},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable",
				Message: "rolled out (e2e kubelet)", LastUpdateTime: now, LastTransitionTime: now},
		},
	}
	return k.c.Status().Update(ctx, dep)
}

// managerLogs returns the logs of every manager process started so far.
func (k *kubelet) managerLogs() string {
	k.mu.Lock()
	n := k.starts
	k.mu.Unlock()
	var b strings.Builder
	for i := 1; i <= n; i++ {
		data, _ := os.ReadFile(filepath.Join(k.logDir, fmt.Sprintf("manager-%d.log", i)))
		fmt.Fprintf(&b, "--- manager-%d ---\n%s", i, data)
	}
	return b.String()
}

func (k *kubelet) restarts() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.starts
}

// operatorKubeconfig is the kubeconfig of the running manager: the
// Deployment's ServiceAccount.
func (k *kubelet) operatorKubeconfig() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.kubeconfig
}
