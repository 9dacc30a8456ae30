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

package operator

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/testca"
)

// TestMetricsServeTheConfiguredCertificate: with --metrics-cert-path, the
// metrics endpoint presents the certificate found there, which a scraper
// verifies with the CA that issued it (as Prometheus does with a
// ServiceMonitor's tlsConfig.ca); without it, another one.
func TestMetricsServeTheConfiguredCertificate(t *testing.T) {
	dir := t.TempDir()
	issued := writeServingCert(t, dir, "serving.crt", "serving.key")
	tests := []struct {
		name     string
		certPath string
		wantOurs bool
	}{
		{name: "certificate from --metrics-cert-path", certPath: dir, wantOurs: true},
		{name: "no --metrics-cert-path", certPath: "", wantOurs: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DefaultOptions()
			o.MetricsBindAddress = "127.0.0.1:0"
			o.MetricsCertPath, o.MetricsCertName, o.MetricsCertKey = tt.certPath, "serving.crt", "serving.key"
			if err := o.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			// The apiserver the authentication filter would ask is never
			// reached: only the TLS handshake is checked.
			srv, err := metricsserver.NewServer(o.metricsOptions(), &rest.Config{Host: "https://127.0.0.1:1"}, http.DefaultClient)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- srv.Start(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("metrics server: %v", err)
				}
			}()
			addr := boundAddr(t, srv)

			// What the endpoint presents, verified here rather than by
			// the handshake, so that either certificate can be looked at.
			conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // G402: verified below
			if err != nil {
				t.Fatalf("TLS handshake: %v", err)
			}
			presented := conn.ConnectionState().PeerCertificates[0]
			_ = conn.Close()
			ours := bytes.Equal(presented.Raw, issued.Cert.Certificate[0])
			_, verifyErr := presented.Verify(x509.VerifyOptions{Roots: issued.Pool, DNSName: metricsServiceDNSName})
			if ours != tt.wantOurs || (verifyErr == nil) != tt.wantOurs {
				t.Errorf("the endpoint presents the certificate of --metrics-cert-path: %v (verified with its CA: %v), want %v", ours, verifyErr, tt.wantOurs)
			}
		})
	}
}

// metricsServiceDNSName is the name the metrics Service has in the cluster,
// which a scraper verifies.
const metricsServiceDNSName = "capmg-controller-manager-metrics-service.capmg-system.svc"

// boundAddr waits, at most 10s, until srv listens, and returns its address.
func boundAddr(t *testing.T, srv metricsserver.Server) string {
	t.Helper()
	s, ok := srv.(interface{ GetBindAddr() string })
	if !ok {
		t.Fatalf("%T does not tell its address", srv)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if addr := s.GetBindAddr(); addr != "" {
			return addr
		}
	}
	t.Fatal("the metrics server did not start listening within 10s")
	return ""
}

// writeServingCert writes into dir a certificate for the metrics Service's
// DNS name and its key, issued by a new CA, and returns them.
func writeServingCert(t *testing.T, dir, certName, keyName string) testca.Issued {
	t.Helper()
	issued := testca.Issue(t, []string{metricsServiceDNSName}, nil)
	for name, b := range map[string][]byte{certName: issued.CertPEM, keyName: issued.KeyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return issued
}
