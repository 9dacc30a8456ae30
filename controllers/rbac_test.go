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

// verbRecorder records the write verbs the manager's client uses on
// MailgunClusters, by resource ("mailgunclusters", "mailgunclusters/status").
type verbRecorder struct {
	client.Client
	mu   sync.Mutex
	used map[string]sets.Set[string]
}

func (c *verbRecorder) record(resource, verb string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.used == nil {
		c.used = map[string]sets.Set[string]{}
	}
	if c.used[resource] == nil {
		c.used[resource] = sets.New[string]()
	}
	c.used[resource].Insert(verb)
}

func isMailgunCluster(obj client.Object) bool {
	_, ok := obj.(*infrav1.MailgunCluster)
	return ok
}

func (c *verbRecorder) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if isMailgunCluster(obj) {
		c.record("mailgunclusters", "create")
	}
	return c.Client.Create(ctx, obj, opts...)
}

func (c *verbRecorder) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if isMailgunCluster(obj) {
		c.record("mailgunclusters", "update")
	}
	return c.Client.Update(ctx, obj, opts...)
}

func (c *verbRecorder) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if isMailgunCluster(obj) {
		c.record("mailgunclusters", "patch")
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *verbRecorder) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if isMailgunCluster(obj) {
		c.record("mailgunclusters", "delete")
	}
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *verbRecorder) Status() client.SubResourceWriter {
	return &statusVerbRecorder{SubResourceWriter: c.Client.Status(), c: c}
}

type statusVerbRecorder struct {
	client.SubResourceWriter
	c *verbRecorder
}

func (s *statusVerbRecorder) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if isMailgunCluster(obj) {
		s.c.record("mailgunclusters/status", "update")
	}
	return s.SubResourceWriter.Update(ctx, obj, opts...)
}

func (s *statusVerbRecorder) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if isMailgunCluster(obj) {
		s.c.record("mailgunclusters/status", "patch")
	}
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

// TestRoleGrantsWhatTheReconcilerCalls runs a MailgunCluster through its
// life (a failed send, the email, a resend, deletion) and compares the
// write verbs the operator used on MailgunClusters with those its
// generated ClusterRole grants: least privilege means neither more nor
// less. (Reads go through the cache: get, list and watch.)
func TestRoleGrantsWhatTheReconcilerCalls(t *testing.T) {
	h := newHarness(t)
	rec := &verbRecorder{}
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
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, resource := range []string{"mailgunclusters", "mailgunclusters/status"} {
		used := sets.List(rec.used[resource])
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
