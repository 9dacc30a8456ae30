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

// Package release checks the maintainers' release commands as
// docs/install-olm.md writes them.
package release

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/docblock"
)

const userBase = "registry.example:5000/team/cluster-api-provider-mailgun"

// releaseScript returns the sh blocks of docs/install-olm.md's section
// "1. Build and publish the images (maintainers)" as one script, in order,
// as a maintainer types them into one shell, with <registry> filled in.
// make e2e runs the same blocks for real (hack/e2e.sh).
func releaseScript(t *testing.T) string {
	t.Helper()
	blocks, err := docblock.Section("../../../docs/install-olm.md", "## 1. Build and publish the images (maintainers)", "sh")
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(strings.Join(blocks, ""), "<registry>", "registry.example:5000/team")
}

// TestReleaseCommandsNameOnlyTheUsersImages runs the documented release
// commands of both releases (the first, and the next that replaces it)
// with make -n, in one shell, and checks that every image they build,
// push or put into the catalog is under the user's IMAGE_TAG_BASE and
// none under the project's default, and that the second release replaces
// the first and lists both in its catalog.
func TestReleaseCommandsNameOnlyTheUsersImages(t *testing.T) {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "GOPATH=" + os.Getenv("GOPATH"), "GOCACHE=" + os.Getenv("GOCACHE"),
		"GOMODCACHE=" + os.Getenv("GOMODCACHE"), "GOFLAGS=" + os.Getenv("GOFLAGS"), "GOPROXY=" + os.Getenv("GOPROXY")}
	blocks := releaseScript(t)
	// Only export and make: this test runs the blocks, and make e2e runs
	// them for real, so anything else (a login, a push of its own) would
	// run too, and no user should have to type it.
	for line := range strings.Lines(blocks) {
		line, _, _ = strings.Cut(line, "#")
		if f := strings.Fields(line); len(f) > 0 && f[0] != "export" && f[0] != "make" {
			t.Fatalf("the release blocks have a line that is neither export nor make: %q", line)
		}
	}
	// Every make in the blocks prints what it would run instead.
	script := "make() { command make -n \"$@\"; }\n" + blocks
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = "../../.."
	cmd.Env = env
	b, err := cmd.CombinedOutput()
	text := string(b)
	if err != nil {
		t.Fatalf("the release blocks failed under make -n: %v\n%s", err, text)
	}
	for _, want := range []string{
		"build -t " + userBase + ":v0.1.0 .", "push " + userBase + ":v0.1.0",
		"--version 0.1.0 --image " + userBase + ":v0.1.0",
		"build -f bundle.Dockerfile -t " + userBase + "-bundle:v0.1.0 .", "push " + userBase + "-bundle:v0.1.0",
		userBase + "-bundle 0.1.0\n",
		"build -f catalog.Dockerfile -t " + userBase + "-catalog:v0.1.0 .", "push " + userBase + "-catalog:v0.1.0",

		"build -t " + userBase + ":v0.1.1 .", "push " + userBase + ":v0.1.1",
		"--version 0.1.1 --image " + userBase + ":v0.1.1",
		`--replaces "cluster-api-provider-mailgun.v0.1.0"`,
		"build -f bundle.Dockerfile -t " + userBase + "-bundle:v0.1.1 .", "push " + userBase + "-bundle:v0.1.1",
		userBase + "-bundle 0.1.0 0.1.1\n",
		"build -f catalog.Dockerfile -t " + userBase + "-catalog:v0.1.1 .", "push " + userBase + "-catalog:v0.1.1",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the release commands do not run %q", want)
		}
	}
	for _, ref := range regexp.MustCompile(`[a-z0-9.:-]+(/[a-z0-9._-]+)+:v[0-9][0-9a-z.-]*`).FindAllString(text, -1) {
		if !strings.HasPrefix(ref, userBase) {
			t.Errorf("the release commands name image %s, not under %s", ref, userBase)
		}
	}
	if strings.Contains(text, "ghcr.io/capi-mailgun") {
		t.Error("the release commands name the project's default registry")
	}
	if t.Failed() {
		t.Logf("make -n output:\n%s", text)
	}
}

// TestMakeRunReadsTheREADMEsSettings: make run, which the README offers
// instead of make deploy, reads the settings from the namespace the
// README's commands fill in, not from the environment only.
func TestMakeRunReadsTheREADMEsSettings(t *testing.T) {
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "kubectl -n capmg-system patch secret capmg-mailgun-credentials") {
		t.Fatal("the README no longer fills in the settings in capmg-system; update this test with it")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "-n", "run")
	cmd.Dir = "../../.."
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n run: %v\n%s", err, b)
	}
	if !strings.Contains(string(b), "go run . ") || !strings.Contains(string(b), "--config-namespace=capmg-system") {
		t.Errorf("make run does not read the settings from capmg-system:\n%s", b)
	}
}
