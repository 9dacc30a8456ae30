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
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/sendprotocol"
)

// objectMemory is what a driver keeps in memory per object between
// reconciles. It is not kept across restarts, which at most costs one call
// to Mailgun or one settle wait (--send-settle-time covers the lag of
// Mailgun's events for an acceptance only memory knew of).
type objectMemory struct {
	// hold pauses calls to Mailgun, so that the update events of our own
	// writes do not cause immediate retries; holdKey is the generation and
	// settings it applies to: a change ends it early.
	hold    *sendprotocol.Hold
	holdKey string
	// failures counts failed Mailgun calls since the last acceptance or
	// change (holdKey), for the backoff; recheck says the last failure
	// was Mailgun refusing the settings (see sendprotocol.Input.Recheck).
	failures int
	recheck  bool
	// unsentClaim is a claim this process wrote (or tried to) and knows no
	// message went out under.
	unsentClaim string
	// refusedResend is the last resend request value reported as invalid.
	refusedResend string
	// accepted is the last acceptance this process saw, kept after the
	// record is written; it matters until then.
	accepted acceptance
}

// acceptance is an email Mailgun accepted: the Message-Id it was sent
// with, and the ID Mailgun returned.
type acceptance struct {
	messageID, id string
}

func holdKey(obj Object, s mailer.Settings) string {
	return fmt.Sprintf("%d/%s", obj.GetGeneration(), s.Fingerprint())
}

// memory holds objectMemory by object name; the UID tells a recreated
// object from the old one.
type memory struct {
	mu sync.Mutex
	m  map[types.NamespacedName]memoryEntry
}

type memoryEntry struct {
	uid types.UID
	objectMemory
}

func (m *memory) load(obj Object) objectMemory {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.m[client.ObjectKeyFromObject(obj)]
	if !ok || e.uid != obj.GetUID() {
		return objectMemory{}
	}
	return e.objectMemory
}

func (m *memory) store(obj Object, v objectMemory) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[types.NamespacedName]memoryEntry{}
	}
	m.m[client.ObjectKeyFromObject(obj)] = memoryEntry{uid: obj.GetUID(), objectMemory: v}
}

// forget drops what is kept for an object that is gone or going.
func (m *memory) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, key)
}

// len is how many objects are remembered.
func (m *memory) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.m)
}
