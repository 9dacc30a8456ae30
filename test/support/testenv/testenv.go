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

// Package testenv starts the real control plane the tests run against:
// kube-apiserver and etcd built by `make controlplane` (see
// hack/build-controlplane.sh), with this provider's CRDs, Cluster API's core
// CRDs and its kubeadm bootstrap and control plane providers' installed.
package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/operator"
)

// Env is a running control plane.
type Env struct {
	*envtest.Environment
	Client client.Client
	// RepoRoot is the repository's top directory.
	RepoRoot string
}

// Options choose the CRDs installed at start.
type Options struct {
	// WithoutProviderCRDs leaves out this provider's CRDs, e.g. for a test in
	// which OLM installs them from the bundle.
	WithoutProviderCRDs bool
	// WithoutClusterAPI leaves out Cluster API's CRDs, e.g. to install the
	// operator first (InstallClusterAPI adds them later).
	WithoutClusterAPI bool
	// CRDDirectoryPaths are more directories of CRDs to install.
	CRDDirectoryPaths []string
}

// Start starts the control plane with this provider's CRDs and Cluster API's
// (core and kubeadm providers). It finds the binaries through KUBEBUILDER_ASSETS, else builds
// or reuses them under bin/k8s/.
func Start() (*Env, error) {
	return StartWith(Options{})
}

// StartWith is Start with options.
func StartWith(o Options) (*Env, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		out, err := run(root, filepath.Join(root, "hack", "build-controlplane.sh"))
		if err != nil {
			return nil, fmt.Errorf("building the test control plane: %w", err)
		}
		assets = strings.TrimSpace(out)
	}
	var capiCRDs []*apiextensionsv1.CustomResourceDefinition
	if !o.WithoutClusterAPI {
		if capiCRDs, err = clusterAPICRDs(root); err != nil {
			return nil, err
		}
	}

	crdPaths := append([]string(nil), o.CRDDirectoryPaths...)
	if !o.WithoutProviderCRDs {
		crdPaths = append(crdPaths, filepath.Join(root, "config", "crd", "bases"))
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     crdPaths,
		CRDs:                  capiCRDs,
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		// envtest leaves the control plane running when, say, a CRD is
		// refused; stop it rather than leak two processes per try.
		_ = env.Stop()
		return nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", assets, err)
	}
	scheme, err := operator.NewScheme()
	if err == nil {
		err = apiextensionsv1.AddToScheme(scheme)
	}
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return &Env{Environment: env, Client: c, RepoRoot: root}, nil
}

// InstallClusterAPI installs Cluster API's CRDs (core and kubeadm providers)
// and waits until the apiserver serves them.
func (e *Env) InstallClusterAPI() error {
	crds, err := clusterAPICRDs(e.RepoRoot)
	if err != nil {
		return err
	}
	_, err = envtest.InstallCRDs(e.Config, envtest.CRDInstallOptions{CRDs: crds})
	return err
}

// clusterAPICRDs returns Cluster API's core CRDs (Cluster, Machine, ...: its
// Cluster controller lists all of them) and its kubeadm bootstrap and
// control plane providers' (KubeadmConfig and KubeadmConfigTemplate for
// Machines whose bootstrap.configRef names them, KubeadmControlPlane and
// its template for ClusterClasses; the tests act as those providers).
func clusterAPICRDs(root string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	capiDir, err := run(root, "go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/cluster-api")
	if err != nil {
		return nil, fmt.Errorf("locating the cluster-api module: %w", err)
	}
	capiDir = strings.TrimSpace(capiDir)
	core, err := readCRDs(filepath.Join(capiDir, "core", "config", "crd", "bases"))
	if err != nil {
		return nil, err
	}
	providers := core
	for _, dir := range []string{"bootstrap", "controlplane"} {
		crds, err := readCRDs(filepath.Join(capiDir, dir, "kubeadm", "config", "crd", "bases"))
		if err != nil {
			return nil, err
		}
		// The label naming the contract, which Cluster API reads before
		// it reads a provider's objects, is added by the provider's
		// kustomization, not in these bases.
		for _, crd := range crds {
			crd.Labels = map[string]string{"cluster.x-k8s.io/v1beta2": "v1beta2"}
		}
		providers = append(providers, crds...)
	}
	return providers, nil
}

// readCRDs reads the CRDs in dir and drops their conversion webhooks: they
// convert between API versions through a webhook of Cluster API's
// controllers, which the tests do not run, and the tests only use the
// storage version.
func readCRDs(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("listing Cluster API CRDs in %s: %w", dir, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no Cluster API CRDs in %s", dir)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading CRD: %w", err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(b, crd); err != nil {
			return nil, fmt.Errorf("parsing CRD %s: %w", path, err)
		}
		crd.Spec.Conversion = nil
		crds = append(crds, crd)
	}
	return crds, nil
}

// RepoRoot finds the repository's top directory from the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "PROJECT")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no PROJECT file above the working directory")
		}
		dir = parent
	}
}

// Run runs a command in dir and returns its standard output.
func Run(dir, name string, args ...string) (string, error) {
	return run(dir, name, args...)
}

func run(dir, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}
