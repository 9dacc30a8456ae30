//go:build tools

// Package controlplane records the Kubernetes main packages as dependencies
// so that `go mod tidy` keeps them: kube-apiserver for envtest, and the rest
// for the single-node test cluster (hack/node).
package controlplane

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
