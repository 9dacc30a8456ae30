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

package send

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
)

// TestReconcilesWaitForOwnWrites: a cache still showing a version our own
// writes replaced waits, for at most ownWriteGrace; any other version (ours
// arrived, someone else wrote, the object was recreated) ends the wait.
func TestReconcilesWaitForOwnWrites(t *testing.T) {
	written := time.Now()
	read := func(uid types.UID, version string) *infrav1.MailgunCluster {
		return &infrav1.MailgunCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: uid, ResourceVersion: version}}
	}
	tests := []struct {
		name string
		obj  *infrav1.MailgunCluster
		at   time.Time
		wait bool
	}{
		{"the version read before our writes", read("u", "10"), written.Add(time.Second), true},
		{"a version between our writes", read("u", "11"), written.Add(time.Second), true},
		{"the version our last write produced", read("u", "12"), written.Add(time.Second), false},
		{"a version someone else wrote after ours", read("u", "13"), written.Add(time.Second), false},
		{"a recreated object", read("v", "10"), written.Add(time.Second), false},
		{"after the grace", read("u", "10"), written.Add(ownWriteGrace + time.Millisecond), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w ownWrites
			w.note(read("u", "12"), []string{"10", "11"}, written)
			got := w.behind(tt.obj, tt.at)
			if (got > 0) != tt.wait || got > ownWriteGrace {
				t.Errorf("behind = %v, want waiting %v (at most %v)", got, tt.wait, ownWriteGrace)
			}
			if !tt.wait && w.len() != 0 {
				t.Errorf("the wait ended but %d entries are kept", w.len())
			}
		})
	}
}
