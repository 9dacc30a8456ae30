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
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/operator"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/poll"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/proc"
)

// TestMetricsEndpointTLS checks the metrics endpoint's TLS as a client sees
// it: HTTP/2 is refused unless --enable-http2 (HTTP/2 Rapid Reset,
// CVE-2023-44487), and TLS below 1.2 is refused.
func TestMetricsEndpointTLS(t *testing.T) {
	tests := []struct {
		name          string
		enableHTTP2   bool
		clientMaxTLS  uint16
		wantHandshake bool
		wantProto     string
	}{
		{name: "HTTP/2 offered, HTTP/1.1 negotiated", clientMaxTLS: tls.VersionTLS13, wantHandshake: true, wantProto: "http/1.1"},
		{name: "HTTP/2 negotiated with --enable-http2", enableHTTP2: true, clientMaxTLS: tls.VersionTLS13, wantHandshake: true, wantProto: "h2"},
		{name: "TLS 1.1 refused", clientMaxTLS: tls.VersionTLS11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			addr, err := proc.LoopbackAddr()
			if err != nil {
				t.Fatal(err)
			}
			h.startManager(func(o *operator.Options) {
				o.MetricsBindAddress = addr
				o.EnableHTTP2 = tt.enableHTTP2
			})
			dial := func(maxTLS uint16) (*tls.Conn, error) {
				return tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{
					// The endpoint's certificate is self-signed; only the
					// negotiation is under test.
					InsecureSkipVerify: true, //nolint:gosec // G402: see above
					MinVersion:         tls.VersionTLS10,
					MaxVersion:         maxTLS,
					NextProtos:         []string{"h2", "http/1.1"},
				})
			}
			if up, state := poll.Until(h.ctx, 30*time.Second, 100*time.Millisecond, func() (bool, string) {
				c, err := dial(tls.VersionTLS13)
				if err != nil {
					return false, err.Error()
				}
				_ = c.Close()
				return true, ""
			}); !up {
				t.Fatalf("metrics endpoint %s not serving TLS: %s", addr, state)
			}
			conn, err := dial(tt.clientMaxTLS)
			if !tt.wantHandshake {
				if err == nil {
					_ = conn.Close()
					t.Fatalf("handshake with TLS at most %x succeeded, want it refused", tt.clientMaxTLS)
				}
				return
			}
			if err != nil {
				t.Fatalf("handshake: %v", err)
			}
			defer func() { _ = conn.Close() }()
			if got := conn.ConnectionState().NegotiatedProtocol; got != tt.wantProto {
				t.Errorf("negotiated protocol %q, want %q", got, tt.wantProto)
			}
		})
	}
}
