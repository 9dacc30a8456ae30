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

package controllers_test

import (
	"bytes"
	"context"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/operator"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/mailgunfake"
)

// writeRecorder counts the writes the manager's client makes to
// MailgunClusters, by resource ("mailgunclusters",
// "mailgunclusters/status") and verb.
type writeRecorder struct {
	client.Client
	mu     sync.Mutex
	counts map[string]map[string]int
}

func (c *writeRecorder) record(obj client.Object, resource, verb string) {
	if _, ok := obj.(*infrav1.MailgunCluster); !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[string]map[string]int{}
	}
	if c.counts[resource] == nil {
		c.counts[resource] = map[string]int{}
	}
	c.counts[resource][verb]++
}

// count is how many writes with verb reached resource.
func (c *writeRecorder) count(resource, verb string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[resource][verb]
}

// verbs are the verbs used on resource.
func (c *writeRecorder) verbs(resource string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.counts[resource]))
}

func (c *writeRecorder) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.record(obj, "mailgunclusters", "create")
	return c.Client.Create(ctx, obj, opts...)
}

func (c *writeRecorder) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.record(obj, "mailgunclusters", "update")
	return c.Client.Update(ctx, obj, opts...)
}

func (c *writeRecorder) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.record(obj, "mailgunclusters", "patch")
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *writeRecorder) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.record(obj, "mailgunclusters", "delete")
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *writeRecorder) Status() client.SubResourceWriter {
	return &statusRecorder{SubResourceWriter: c.Client.Status(), c: c}
}

type statusRecorder struct {
	client.SubResourceWriter
	c *writeRecorder
}

func (s *statusRecorder) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	s.c.record(obj, "mailgunclusters/status", "update")
	return s.SubResourceWriter.Update(ctx, obj, opts...)
}

func (s *statusRecorder) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	s.c.record(obj, "mailgunclusters/status", "patch")
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

// TestRoleGrantsWhatTheReconcilerCalls runs a MailgunCluster through its
// life (a failed send, the email, a resend, deletion) and compares the
// write verbs the operator used on MailgunClusters with those its
// generated ClusterRole grants: least privilege means neither more nor
// less. (Reads go through the cache: get, list and watch.)
func TestRoleGrantsWhatTheReconcilerCalls(t *testing.T) {
	h := newHarness(t)
	rec := &writeRecorder{}
	h.fake.FailSends(mailgunfake.StatusFault(429, "slow down"))
	h.startManager(func(o *operator.Options) {
		o.WrapClient = func(c client.Client) client.Client { rec.Client = c; return rec }
	})
	_, mc := h.createOwned("lifecycle")
	h.waitForAccepted("lifecycle", 30*time.Second)
	latest := h.get("lifecycle")
	latest.Annotations[infrav1.ResendRequestAnnotation] = "again"
	if err := h.c.Update(h.ctx, latest); err != nil {
		t.Fatal(err)
	}
	h.eventually(30*time.Second, "the resend accepted", func() (bool, string) {
		n := len(h.emailsFor("lifecycle"))
		return n == 2, ""
	})
	if err := h.c.Delete(h.ctx, mc); err != nil {
		t.Fatal(err)
	}
	h.eventually(20*time.Second, "the MailgunCluster gone", func() (bool, string) {
		err := h.c.Get(h.ctx, client.ObjectKeyFromObject(mc), mc)
		return err != nil, ""
	})

	granted := grantedWrites(t, "../config/rbac/role.yaml", infrav1.GroupVersion.Group)
	for _, resource := range []string{"mailgunclusters", "mailgunclusters/status"} {
		used := rec.verbs(resource)
		want := sets.List(granted[resource])
		if !slices.Equal(used, want) {
			t.Errorf("%s: the operator wrote with %v, the role grants %v", resource, used, want)
		}
	}
}

// grantedWrites reads the write verbs the ClusterRole in path grants per
// resource of group.
func grantedWrites(t *testing.T, path, group string) map[string]sets.Set[string] {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]sets.Set[string]{}
	for _, doc := range bytes.Split(b, []byte("\n---\n")) {
		role := &rbacv1.ClusterRole{}
		if err := yaml.Unmarshal(doc, role); err != nil {
			t.Fatal(err)
		}
		if role.Kind != "ClusterRole" {
			continue
		}
		for _, r := range role.Rules {
			if !slices.Contains(r.APIGroups, group) {
				continue
			}
			for _, res := range r.Resources {
				if strings.HasSuffix(res, "/finalizers") {
					// Not a verb the client calls: the apiserver checks it
					// when an owner reference blocks owner deletion.
					continue
				}
				for _, v := range r.Verbs {
					if v == "get" || v == "list" || v == "watch" {
						continue
					}
					if out[res] == nil {
						out[res] = sets.New[string]()
					}
					out[res].Insert(v)
				}
			}
		}
	}
	return out
}
