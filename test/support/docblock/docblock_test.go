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

package docblock

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

const doc = "# Title\n\n" +
	"## 1. First\n\n```sh\nmake one\n```\n\n```yaml\na: 1\n```\n\n" +
	"### 1a. Deeper\n\n```sh\n# not a heading\nmake two\n```\n\n" +
	"## 1a. Sibling\n\n```sh\nmake sibling\n```\n\n" +
	"## 2. Second\r\n\r\n```sh\r\nmake three\r\n```\r\n\n" +
	"# Other\n\n```sh\nmake other\n```\n"

func TestSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "doc.md")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		heading, lang string
		want          []string // nil: an error
	}{
		{"## 1. First", "sh", []string{"make one\n", "# not a heading\nmake two\n"}},
		{"## 1. First", "yaml", []string{"a: 1\n"}},
		{"### 1a. Deeper", "sh", []string{"# not a heading\nmake two\n"}},
		{"## 1a. Sibling", "sh", []string{"make sibling\n"}},
		{"## 2. Second", "sh", []string{"make three\r\n"}},
		{"## 2. Second", "yaml", nil},
		{"## 3. Missing", "sh", nil},
	} {
		got, err := Section(path, tc.heading, tc.lang)
		if tc.want == nil {
			if err == nil {
				t.Errorf("%s %s: %q, want an error", tc.heading, tc.lang, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s %s: %q, %v; want %q", tc.heading, tc.lang, got, err, tc.want)
		}
	}
}

func TestSectionRefusesAnUnclosedBlock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "doc.md")
	if err := os.WriteFile(path, []byte("## 1. First\n\n```sh\nmake one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := Section(path, "## 1. First", "sh"); err == nil {
		t.Errorf("%q, want an error: the block is not closed", got)
	}
}
