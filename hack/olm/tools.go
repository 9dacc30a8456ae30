//go:build tools

// Package olm records OLM's main packages so that `go mod tidy` keeps them.
package olm

import (
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/catalog"
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/olm"
)
