//go:build tools

// Package opm records opm's main package so that `go mod tidy` keeps it.
package opm

import (
	_ "github.com/operator-framework/operator-registry/cmd/opm"
)
