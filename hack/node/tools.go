//go:build tools

// Package node records the main packages of the test node's stand-ins so
// that `go mod tidy` keeps them: CoreDNS, the node's DNS, and the gRPC health
// probe that OLM's catalog pods run from the opm image (hack/images.sh).
package node

import (
	_ "github.com/coredns/coredns"
	_ "github.com/grpc-ecosystem/grpc-health-probe"
)
