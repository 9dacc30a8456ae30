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

// Command bundle writes the OLM bundle (bundle/ and bundle.Dockerfile) from
// config/manifests; see hack/packaging/bundle. Run it through `make bundle`,
// or `make operatorhub` for the community-operators layout instead.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/hack/packaging/bundle"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/hack/packaging/manifests"
)

func main() {
	var o bundle.Options
	var channels, manifestsDir, outDir, hubDir string
	flag.StringVar(&o.Package, "package", "cluster-api-provider-mailgun", "OLM package name")
	flag.StringVar(&o.Version, "version", "", "operator version (semver, without v)")
	flag.StringVar(&o.Replaces, "replaces", "", "name of the CSV this version replaces")
	flag.StringVar(&o.Image, "image", "", "manager image")
	flag.StringVar(&channels, "channels", "stable", "comma-separated channels")
	flag.StringVar(&o.DefaultChannel, "default-channel", "stable", "default channel")
	flag.StringVar(&manifestsDir, "manifests", "config/manifests", "kustomization to render")
	flag.StringVar(&outDir, "output-dir", "bundle", "bundle directory; bundle.Dockerfile goes next to it")
	flag.StringVar(&hubDir, "operatorhub-dir", "", "if set, write the community-operators layout (operators/<package>/<version>, ci.yaml) there instead of the bundle")
	flag.Parse()
	o.Channels = strings.Split(channels, ",")

	if err := run(o, manifestsDir, outDir, hubDir); err != nil {
		fmt.Fprintf(os.Stderr, "bundle: %v\n", err)
		os.Exit(1)
	}
}

func run(o bundle.Options, manifestsDir, outDir, hubDir string) error {
	rendered, err := manifests.Kustomize(manifestsDir)
	if err != nil {
		return err
	}
	o.CreatedAt = bundle.ExistingCreatedAt(outDir, o.Package, o.Version)
	files, err := bundle.Generate(rendered, o)
	if err != nil {
		return err
	}
	if hubDir != "" {
		if err := bundle.WriteOperatorHub(hubDir, files, o.Package, o.Version); err != nil {
			return err
		}
		fmt.Printf("wrote %s/operators/%s/%s and ci.yaml (version %s, image %s)\n", filepath.Clean(hubDir), o.Package, o.Version, o.Version, o.Image)
		return nil
	}
	if err := bundle.Write(outDir, files); err != nil {
		return err
	}
	fmt.Printf("wrote %d files to %s (version %s, image %s)\n", len(files), filepath.Clean(outDir), o.Version, o.Image)
	return nil
}
