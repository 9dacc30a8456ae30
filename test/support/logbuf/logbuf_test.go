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

package logbuf_test

import (
	"strings"
	"testing"

	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/logbuf"
)

// TestErrorLines: the error-level lines of the development-mode logger the
// tests use are found, the others are not, whatever their text says.
func TestErrorLines(t *testing.T) {
	b := &logbuf.Buffer{}
	log := zap.New(zap.WriteTo(b), zap.UseDevMode(true), zap.Level(zapcore.DebugLevel))
	log.Info("an ERROR in the message is not an error line")
	log.V(1).Info("debug")
	log.Error(nil, "boom")
	got := b.ErrorLines()
	if len(got) != 1 || !strings.Contains(got[0], "boom") {
		t.Errorf("ErrorLines = %q, want the one line of boom", got)
	}
}
