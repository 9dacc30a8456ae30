//go:build tools

// Package capi records what the clusterctl end-to-end test installs so that
// `go mod tidy` keeps it: Cluster API's three managers and clusterctl, and
// cert-manager's main module, whose CRDs (deploy/crds) the test installs
// (its controllers' cmd/ modules cannot be had from the module proxy).
package capi

import (
	_ "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	_ "sigs.k8s.io/cluster-api/bootstrap/kubeadm"
	_ "sigs.k8s.io/cluster-api/cmd/clusterctl"
	_ "sigs.k8s.io/cluster-api/controlplane/kubeadm"
	_ "sigs.k8s.io/cluster-api/core"
)
