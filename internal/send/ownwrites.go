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
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ownWriteGrace bounds how long a reconcile waits for the cache to show
// the driver's own last write: the watch event of that write normally
// arrives within milliseconds and brings the object back by itself.
const ownWriteGrace = 10 * time.Second

// ownWrites remembers, per object, the versions the driver's own writes
// replaced. A reconcile that reads one of them from the cache starts from
// a state the driver has already moved past: its locked writes could only
// fail with a conflict, which costs the apiserver a refused write and the
// object a retry. Such a reconcile waits instead for the watch event of
// the newer version, which is already on its way.
//
// Versions are only compared for equality (the API treats them as
// opaque): a version written by someone else after ours is not in the set
// and ends the wait.
type ownWrites struct {
	mu sync.Mutex
	m  map[types.NamespacedName]ownWrite
}

type ownWrite struct {
	uid types.UID
	// replaced are the versions our writes replaced, the last one
	// confirmed is not among them.
	replaced []string
	at       time.Time
}

// note records that a reconcile of obj replaced the versions replaced
// (oldest first) at now.
func (w *ownWrites) note(obj Object, replaced []string, now time.Time) {
	if len(replaced) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[types.NamespacedName]ownWrite{}
	}
	w.m[client.ObjectKeyFromObject(obj)] = ownWrite{uid: obj.GetUID(), replaced: replaced, at: now}
}

// behind reports how much longer to wait for the cache if obj, as read
// from it, is a version our own writes replaced less than ownWriteGrace
// ago; 0 if it is not. Anything else ends the wait for good.
func (w *ownWrites) behind(obj Object, now time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	key := client.ObjectKeyFromObject(obj)
	e, ok := w.m[key]
	if !ok {
		return 0
	}
	if left := e.at.Add(ownWriteGrace).Sub(now); e.uid == obj.GetUID() && left > 0 && slices.Contains(e.replaced, obj.GetResourceVersion()) {
		return left
	}
	delete(w.m, key)
	return 0
}

// forget drops what is kept for an object that is gone.
func (w *ownWrites) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, key)
}

// len is how many objects wait for the cache to show our writes.
func (w *ownWrites) len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.m)
}
