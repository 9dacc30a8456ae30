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

// Package testca issues what tests of TLS need: a new CA, and serving
// certificates it signs, which a client verifies only with that CA.
package testca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"
)

// Issued is a serving certificate and the CA that signed it.
type Issued struct {
	// Cert is the serving certificate with its key, for a tls.Config.
	Cert tls.Certificate
	// CertPEM and KeyPEM are the same in PEM, for files or Secrets.
	CertPEM, KeyPEM []byte
	// CAPEM is the CA's certificate in PEM; Pool holds it.
	CAPEM []byte
	Pool  *x509.CertPool
}

// CA is a certificate authority, valid for a day, that issues serving
// certificates.
type CA struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	serial int64
	// PEM and KeyPEM are its certificate and key in PEM, for a Secret that
	// holds a CA (as cert-manager's CA issuer reads it).
	PEM, KeyPEM []byte
}

// NewCA makes a CA named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{cert: cert, key: key, serial: 1,
		PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), KeyPEM: keyPEM(t, key)}
}

// Issue makes a CA and a serving certificate, valid for a day, for the DNS
// names and IP addresses given.
func Issue(t testing.TB, dnsNames []string, ips []net.IP) Issued {
	t.Helper()
	return NewCA(t, "capmg test CA").Issue(t, dnsNames, ips)
}

// Issue signs a certificate, valid for a day, for the DNS names and IP
// addresses given, for servers (and for clients, as cert-manager's
// serving certificates are).
func (ca *CA) Issue(t testing.TB, dnsNames []string, ips []net.IP) Issued {
	t.Helper()
	key := newKey(t)
	now := time.Now()
	ca.serial++
	name := "capmg test server"
	if len(dnsNames) > 0 {
		name = dnsNames[0]
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		DNSNames: dnsNames, IPAddresses: ips,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return Issued{
		Cert:    tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  keyPEM(t, key),
		CAPEM:   ca.PEM,
		Pool:    pool,
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func keyPEM(t testing.TB, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}
