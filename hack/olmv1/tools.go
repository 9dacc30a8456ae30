//go:build tools

// Package olmv1 records OLM v1's two controllers, catalogd and
// operator-controller, so that `go mod tidy` keeps them.
package olmv1

import (
	_ "github.com/operator-framework/operator-controller/cmd/catalogd"
	_ "github.com/operator-framework/operator-controller/cmd/operator-controller"
)
