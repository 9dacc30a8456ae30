//go:build faults

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

package faults

import (
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"
)

// apiProxy is a loopback reverse proxy in front of kube-apiserver that fails
// a share of the writes to MailgunClusters (metadata and status): some are
// refused before reaching the apiserver, some are applied and then answered
// with an error, like a response lost on the way back.
type apiProxy struct {
	target  *url.URL
	proxy   *httputil.ReverseProxy
	srv     *http.Server
	addr    string
	enabled atomic.Bool

	mu       sync.Mutex
	rng      *rand.Rand
	failRate float64 // share of writes that fail
	lostRate float64 // share of writes applied, then failed

	Refused, Lost, Writes atomic.Int64
}

func startAPIProxy(t *testing.T, cfg *rest.Config, seed uint64, failRate, lostRate float64) *apiProxy {
	t.Helper()
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := &apiProxy{target: target, rng: rand.New(rand.NewPCG(seed, seed+1)), failRate: failRate, lostRate: lostRate}
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
		t.Fatal(err)
	}
	p.addr = l.Addr().String()
	p.srv = &http.Server{Handler: p}
	go func() { _ = p.srv.Serve(l) }()
	t.Cleanup(func() { _ = p.srv.Close() })
	p.enabled.Store(true)
	return p
}

// Config is a rest.Config reaching the apiserver through the proxy, which
// authenticates on the client's behalf.
func (p *apiProxy) Config() *rest.Config {
	return &rest.Config{Host: "http://" + p.addr, QPS: 200, Burst: 400}
}

func (p *apiProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !p.enabled.Load() || !isMailgunClusterWrite(r) {
		p.proxy.ServeHTTP(w, r)
		return
	}
	p.Writes.Add(1)
	p.mu.Lock()
	x := p.rng.Float64()
	p.mu.Unlock()
	switch {
	case x < p.failRate-p.lostRate:
		p.Refused.Add(1)
		injectedError(w)
	case x < p.failRate:
		p.Lost.Add(1)
		p.proxy.ServeHTTP(discardWriter{header: http.Header{}}, r)
		injectedError(w)
	default:
		p.proxy.ServeHTTP(w, r)
	}
}

func isMailgunClusterWrite(r *http.Request) bool {
	return (r.Method == http.MethodPatch || r.Method == http.MethodPut) && strings.Contains(r.URL.Path, "/mailgunclusters/")
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
