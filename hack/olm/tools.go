//go:build tools

// Package olm records OLM's main packages so that `go mod tidy` keeps them:
// the operators (olm, catalog), the packageserver, and copy-content and cpb,
// which bundle unpack Jobs run from the same image.
package olm

import (
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/catalog"
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/copy-content"
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/olm"
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/package-server"
	_ "github.com/operator-framework/operator-lifecycle-manager/util/cpb"
)
