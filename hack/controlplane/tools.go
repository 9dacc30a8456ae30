//go:build tools

// Package controlplane records the kube-apiserver main package as a
// dependency so that `go mod tidy` keeps it.
package controlplane

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
