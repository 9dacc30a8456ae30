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

// Command docblock prints the code blocks of one section of a Markdown doc,
// in order, so that scripts (hack/e2e.sh) run the commands the docs show
// rather than copies of them.
//
//	go run ./hack/docblock docs/install-olm.md "## 1. Build and publish the images (maintainers)" sh
package main

import (
	"fmt"
	"os"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/docblock"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: docblock FILE HEADING LANG")
		os.Exit(2)
	}
	blocks, err := docblock.Section(os.Args[1], os.Args[2], os.Args[3])
	if err != nil {
		fmt.Fprintln(os.Stderr, "docblock:", err)
		os.Exit(1)
	}
	for _, b := range blocks {
		fmt.Print(b)
	}
}
