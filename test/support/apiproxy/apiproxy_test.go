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

package apiproxy

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// TestCounters sends requests of several kinds through the proxy to a
// stand-in apiserver: every request counts in Requests, only the writes to
// MailgunClusters and MailgunMachines in Writes (and per object), and the
// 409s among them in Conflicts.
func TestCounters(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/conflicted") {
			w.WriteHeader(http.StatusConflict)
		}
	}))
	defer api.Close()
	p, err := Start(&rest.Config{Host: api.URL}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	const base = "/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/ns/"
	for _, req := range []struct{ method, path string }{
		{http.MethodGet, base + "mailgunclusters/a"},
		{http.MethodGet, base + "mailgunclusters?watch=true"},
		{http.MethodPatch, base + "mailgunclusters/a"},
		{http.MethodPatch, base + "mailgunclusters/a/status"},
		{http.MethodPut, base + "mailgunmachines/a"},
		{http.MethodPatch, base + "mailgunclusters/conflicted"},
		{http.MethodPost, "/api/v1/namespaces/ns/events"},
		{http.MethodPatch, "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/clusters/a"},
	} {
		r, err := http.NewRequest(req.method, p.Host()+req.path, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatalf("%s %s: %v", req.method, req.path, err)
		}
		_ = resp.Body.Close()
	}
	if got := p.Requests.Load(); got != 8 {
		t.Errorf("Requests = %d, want 8 (every request)", got)
	}
	if got := p.Writes.Load(); got != 4 {
		t.Errorf("Writes = %d, want 4 (PATCH and PUT to MailgunClusters and MailgunMachines)", got)
	}
	if got := p.WritesTo("ns", "a"); got != 3 {
		t.Errorf("WritesTo(ns, a) = %d, want 3 (a MailgunCluster and a MailgunMachine of one name share it)", got)
	}
	if got := p.Conflicts.Load(); got != 1 {
		t.Errorf("Conflicts = %d, want 1", got)
	}
}

// TestHoldNextWrite: the next metadata write to the object reaches the
// apiserver at once and its answer waits for release; status writes and
// the writes after it pass.
func TestHoldNextWrite(t *testing.T) {
	var reached atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reached.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	defer api.Close()
	p, err := Start(&rest.Config{Host: api.URL}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const base = "/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/ns/mailgunclusters/a"
	patch := func(path string) int {
		r, err := http.NewRequest(http.MethodPatch, p.Host()+path, strings.NewReader("{}"))
		if err != nil {
			t.Error(err)
			return 0
		}
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(r)
		if err != nil {
			t.Error(err)
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}

	applied, release := p.HoldNextWrite("ns", "a")
	defer release()
	if got := patch(base + "/status"); got != http.StatusCreated {
		t.Errorf("status write: %d, want it answered (201)", got)
	}
	answered := make(chan int, 1)
	go func() { answered <- patch(base) }()
	select {
	case <-applied:
	case <-time.After(10 * time.Second):
		t.Fatal("the held write did not reach the apiserver")
	}
	if got := reached.Load(); got != 2 {
		t.Errorf("the apiserver saw %d writes, want 2", got)
	}
	select {
	case code := <-answered:
		t.Fatalf("the held write was answered (%d) before release", code)
	case <-time.After(200 * time.Millisecond):
	}
	release()
	select {
	case code := <-answered:
		if code != http.StatusCreated {
			t.Errorf("held write answered %d after release, want the apiserver's 201", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the held write was not answered after release")
	}
	if got := patch(base); got != http.StatusCreated {
		t.Errorf("the next write: %d, want it answered (201)", got)
	}
}
