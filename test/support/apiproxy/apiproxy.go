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

// Package apiproxy is a loopback reverse proxy in front of kube-apiserver for
// the fault and load suites. It authenticates to the apiserver on the
// clients' behalf, counts the writes to MailgunClusters and MailgunMachines
// (the objects the operator sends for), and can fail a
// share of them: some refused before reaching the apiserver, some applied
// and then answered with an error, like a response lost on the way back.
package apiproxy

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Options configure the injected failures.
type Options struct {
	// Seed makes the failures reproducible.
	Seed uint64
	// FailRate is the share of MailgunCluster and MailgunMachine writes
	// that fail.
	FailRate float64
	// LostRate is the share of writes applied but answered with an error;
	// it is part of FailRate.
	LostRate float64
}

// Proxy is a running proxy.
type Proxy struct {
	proxy *httputil.ReverseProxy
	srv   *http.Server
	addr  string
	opts  Options

	// mu guards rng, writesTo and holds.
	mu  sync.Mutex
	rng *rand.Rand
	// writesTo counts the writes per object, "<namespace>/<name>": a
	// MailgunCluster and a MailgunMachine of one name share a count.
	writesTo map[string]int
	// holds are the objects whose next metadata write's answer is held
	// back (HoldNextWrite).
	holds map[string]*hold

	// Writes counts PATCH/PUT requests to MailgunClusters and
	// MailgunMachines (metadata and status); Refused and Lost the injected
	// failures among them;
	// Conflicts those the apiserver refused with 409 Conflict.
	Writes, Refused, Lost, Conflicts atomic.Int64
	// Requests counts every request, of any verb and resource (a watch
	// once, when it starts).
	Requests atomic.Int64
}

// hold is a write applied by the apiserver whose answer waits for release.
type hold struct {
	applied, release chan struct{}
}

// Start starts a proxy in front of the apiserver of cfg.
func Start(cfg *rest.Config, opts Options) (*Proxy, error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	p := &Proxy{opts: opts, rng: rand.New(rand.NewPCG(opts.Seed, opts.Seed+1))}
	p.proxy = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
		},
		Transport:     transport,
		FlushInterval: -1, // watches stream
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening: %w", err)
	}
	p.addr = l.Addr().String()
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = p.srv.Serve(l) }()
	return p, nil
}

// Close stops the proxy.
func (p *Proxy) Close() { _ = p.srv.Close() }

// Host is the URL clients use: plain HTTP on loopback, no credentials.
func (p *Proxy) Host() string { return "http://" + p.addr }

// Config is a rest.Config reaching the apiserver through the proxy.
func (p *Proxy) Config() *rest.Config {
	return &rest.Config{Host: p.Host(), QPS: 200, Burst: 400}
}

// WriteKubeconfig writes a kubeconfig for the proxy, for processes such as
// the manager binary, and returns its path.
func (p *Proxy) WriteKubeconfig(dir string) (string, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["proxy"] = &clientcmdapi.Cluster{Server: p.Host()}
	cfg.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	cfg.CurrentContext = "proxy"
	path := filepath.Join(dir, "proxy.kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}

// HoldNextWrite makes the next write to the metadata or spec (not status)
// of the MailgunCluster or MailgunMachine namespace/name reach the
// apiserver, and holds its answer back until release is called (or the
// client gives up): a reply slow on its way back, or one the client, frozen,
// has not read yet. applied is closed once the apiserver has answered.
// release may be called more than once. A held write meets none of the
// injected failures. A second call for the same object before its write
// came replaces the first (whose applied then never closes).
func (p *Proxy) HoldNextWrite(namespace, name string) (applied <-chan struct{}, release func()) {
	h := &hold{applied: make(chan struct{}), release: make(chan struct{})}
	p.mu.Lock()
	if p.holds == nil {
		p.holds = map[string]*hold{}
	}
	p.holds[namespace+"/"+name] = h
	p.mu.Unlock()
	var once sync.Once
	return h.applied, func() { once.Do(func() { close(h.release) }) }
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.Requests.Add(1)
	object := writtenObject(r)
	if object == "" {
		p.proxy.ServeHTTP(w, r)
		return
	}
	p.Writes.Add(1)
	p.mu.Lock()
	if p.writesTo == nil {
		p.writesTo = map[string]int{}
	}
	p.writesTo[object]++
	h := p.holds[object]
	if h != nil && !strings.HasSuffix(r.URL.Path, "/status") {
		delete(p.holds, object)
	} else {
		h = nil
	}
	p.mu.Unlock()
	if h != nil {
		answer := httptest.NewRecorder()
		p.proxy.ServeHTTP(answer, r)
		close(h.applied)
		select {
		case <-h.release:
		case <-r.Context().Done():
			return
		}
		for k, v := range answer.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(answer.Code)
		_, _ = w.Write(answer.Body.Bytes()) // the client may have gone; it then sees no answer, as intended
		return
	}
	if p.opts.FailRate == 0 {
		p.proxy.ServeHTTP(&conflictCounter{ResponseWriter: w, conflicts: &p.Conflicts}, r)
		return
	}
	p.mu.Lock()
	x := p.rng.Float64()
	p.mu.Unlock()
	switch {
	case x < p.opts.FailRate-p.opts.LostRate:
		p.Refused.Add(1)
		injectedError(w)
	case x < p.opts.FailRate:
		p.Lost.Add(1)
		p.proxy.ServeHTTP(discardWriter{header: http.Header{}}, r)
		injectedError(w)
	default:
		p.proxy.ServeHTTP(&conflictCounter{ResponseWriter: w, conflicts: &p.Conflicts}, r)
	}
}

// conflictCounter counts the 409 Conflict answers passing through it.
type conflictCounter struct {
	http.ResponseWriter
	conflicts *atomic.Int64
}

func (c *conflictCounter) WriteHeader(code int) {
	if code == http.StatusConflict {
		c.conflicts.Add(1)
	}
	c.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (c *conflictCounter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// WritesTo is how many writes reached the proxy for the MailgunCluster or
// MailgunMachine namespace/name, metadata and status.
func (p *Proxy) WritesTo(namespace, name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.writesTo[namespace+"/"+name]
}

// sendObjects are the resources the operator sends an email for.
var sendObjects = map[string]bool{"mailgunclusters": true, "mailgunmachines": true}

// writtenObject is "<namespace>/<name>" of the MailgunCluster or
// MailgunMachine a write goes to, or "" for any other write:
// .../namespaces/<namespace>/<resource>/<name>[/status].
func writtenObject(r *http.Request) string {
	if r.Method != http.MethodPatch && r.Method != http.MethodPut {
		return ""
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	for i := 0; i+3 < len(parts); i++ {
		if parts[i] == "namespaces" && sendObjects[parts[i+2]] {
			return parts[i+1] + "/" + parts[i+3]
		}
	}
	return ""
}

func injectedError(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected write failure","reason":"ServiceUnavailable","code":503}`))
}

type discardWriter struct{ header http.Header }

func (d discardWriter) Header() http.Header         { return d.header }
func (d discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d discardWriter) WriteHeader(int)             {}
