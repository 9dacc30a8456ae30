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

// Package docblock reads the fenced code blocks of the project's Markdown
// docs, so that tests run the commands and apply the objects the docs show
// instead of copies of them that could drift.
package docblock

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Section returns the code blocks fenced as lang ("sh", "yaml") in the
// section of the Markdown file at path whose heading line is heading (for
// example "## 2. Add the catalog"), up to the next heading of the same or a
// higher level. It fails if the section has no such block or a block is
// not closed.
func Section(path, heading, lang string) ([]string, error) {
	b, err := os.ReadFile(filepath.Clean(path))
	if err != nil {
		return nil, err
	}
	level, _, _ := strings.Cut(heading, " ")
	var (
		blocks                   []string
		block                    strings.Builder
		inSection, inFence, keep bool
	)
	for line := range strings.Lines(string(b)) {
		text := strings.TrimRight(line, "\r\n")
		switch {
		case inFence && strings.TrimSpace(text) == "```":
			if keep {
				blocks = append(blocks, block.String())
			}
			inFence = false
		case inFence:
			// A "#" line in a block is a comment, not a heading.
			if keep {
				block.WriteString(line)
			}
		case strings.HasPrefix(text, "```"):
			inFence, keep = true, inSection && strings.TrimPrefix(text, "```") == lang
			block.Reset()
		case text == heading:
			inSection = true
		case inSection && endsSection(text, len(level)):
			inSection = false
		}
	}
	if inFence {
		return nil, fmt.Errorf("%s: a code block is not closed", path)
	}
	if len(blocks) == 0 {
		return nil, fmt.Errorf("%s: no %s block in the section %q", path, lang, heading)
	}
	return blocks, nil
}

// endsSection reports whether line is a heading of level (the number of
// "#") or higher.
func endsSection(line string, level int) bool {
	hashes := len(line) - len(strings.TrimLeft(line, "#"))
	return hashes > 0 && hashes <= level && strings.HasPrefix(line[hashes:], " ")
}
