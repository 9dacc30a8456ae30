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

package mailer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mailgun/mailgun-go/v4"
)

// maxMessageLen bounds how much of Mailgun's error text ends up in
// conditions and events.
const maxMessageLen = 512

// classify turns an error from mailgun-go into a *SendError. hint holds what
// the transport saw of a rate-limited answer.
func classify(err error, hint *retryHint) *SendError {
	var ure *mailgun.UnexpectedResponseError
	if errors.As(err, &ure) {
		se := &SendError{StatusCode: ure.Actual, Message: responseMessage(ure.Data), Err: err}
		switch code := ure.Actual; {
		case code == http.StatusUnauthorized:
			se.Class = ClassUnauthorized
		case code == http.StatusForbidden:
			se.Class = ClassForbidden
		case code == http.StatusNotFound:
			se.Class = ClassDomainNotFound
		case code == http.StatusTooManyRequests:
			se.Class = ClassRateLimited
			se.RetryAfter = hint.get()
		case code == http.StatusRequestTimeout || code >= 500:
			se.Class = ClassUnavailable
		case code >= 400:
			se.Class = ClassRejected
		default:
			// A 1xx/3xx/other 2xx reaching here is not something Mailgun
			// documents; we cannot tell whether it took the message.
			se.Class = ClassOutcomeUnknown
		}
		return se
	}
	if errors.Is(err, mailgun.ErrInvalidMessage) {
		return &SendError{Class: ClassRejected, Message: err.Error(), Err: err}
	}
	if tlsFailed(err) {
		return &SendError{Class: ClassTLS, Message: err.Error(), Err: err}
	}
	if notSent(err) {
		return &SendError{Class: ClassUnreachable, Message: unreachableMessage(err), Err: err}
	}
	return &SendError{Class: ClassOutcomeUnknown, Message: err.Error(), Err: err}
}

// classify is classify with what the client knows of its settings added to
// the explanation: a 404 for the domain mostly means the wrong region.
func (c *Client) classify(err error, hint *retryHint) *SendError {
	se := classify(err, hint)
	if se.Class == ClassDomainNotFound {
		se.Message = fmt.Sprintf("%s: Mailgun does not know domain %q at %s; check the domain name, and the region: "+
			"EU domains need mailgun_api_base https://api.eu.mailgun.net/v3", se.Message, c.settings.Domain, c.settings.APIBase)
	}
	return se
}

// notSent reports whether err proves the request never reached Mailgun:
// the connection (to Mailgun, or to the proxy on the way) could not be
// opened, or the rate Limit held the request back, so nothing was
// transmitted.
func notSent(err error) bool {
	var throttled *throttledError
	if errors.As(err, &throttled) {
		return true
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return true
	}
	// A proxy that cannot be reached shows as a "proxyconnect" error around
	// the dial error, so look at every error in the chain.
	for e := err; e != nil; {
		var opErr *net.OpError
		if !errors.As(e, &opErr) {
			return false
		}
		if opErr.Op == "dial" {
			return true
		}
		e = opErr.Err
	}
	return false
}

// tlsFailed reports whether err is a failed TLS handshake, before any
// request was written: the server's certificate is not trusted, has
// expired or names another host, or the server does not speak TLS. (A
// record error on a connection already in use could come after the
// request; it stays an unknown outcome.)
func tlsFailed(err error) bool {
	var (
		verify    *tls.CertificateVerificationError
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
	)
	return errors.As(err, &verify) || errors.As(err, &unknownCA) || errors.As(err, &hostname) || errors.As(err, &invalid) ||
		// net/http reports a plain-HTTP server met by a new connection's
		// handshake with an untyped error of this text.
		strings.Contains(err.Error(), "server gave HTTP response to HTTPS client")
}

// unreachableMessage explains a request that never reached Mailgun in
// words that stay the same from one try to the next (no IP address, port
// or wait time), so that a retry failing the same way changes no condition
// and costs no status write.
func unreachableMessage(err error) string {
	var throttled *throttledError
	if errors.As(err, &throttled) {
		return throttled.reason()
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return fmt.Sprintf("could not connect to Mailgun: looking up %s: %s", dnsErr.Name, dnsErr.Err)
	}
	// The innermost dial error names the cause, e.g. "connect:
	// connection refused"; the ones around it add addresses.
	var cause error
	for e := err; e != nil; {
		var opErr *net.OpError
		if !errors.As(e, &opErr) {
			break
		}
		cause, e = opErr.Err, opErr.Err
	}
	if cause == nil {
		return err.Error()
	}
	return "could not connect to Mailgun: " + cause.Error()
}

// responseMessage extracts Mailgun's explanation from an error body, which
// is JSON {"message": "..."} for most endpoints and plain text for some
// (401 answers "Forbidden").
func responseMessage(body []byte) string {
	var parsed struct {
		Message string `json:"message"`
	}
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &parsed) == nil && parsed.Message != "" {
		msg = parsed.Message
	}
	if msg == "" {
		msg = "no explanation in the response"
	}
	if len(msg) > maxMessageLen {
		msg = msg[:maxMessageLen] + "..."
	}
	return msg
}

// retryHint carries what the transport learnt about when to retry from a
// 429 answer; mailgun-go does not expose response headers.
type retryHint struct {
	mu    sync.Mutex
	after time.Duration
}

func (h *retryHint) set(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.after = d
}

func (h *retryHint) get() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.after
}

type retryHintKey struct{}

func withRetryHint(ctx context.Context, h *retryHint) context.Context {
	return context.WithValue(ctx, retryHintKey{}, h)
}

// retryHintTransport records the retry delay of 429 answers into the
// retryHint of the request's context.
type retryHintTransport struct {
	next http.RoundTripper
}

func (t *retryHintTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusTooManyRequests {
		return resp, err
	}
	if h, ok := req.Context().Value(retryHintKey{}).(*retryHint); ok {
		h.set(RetryAfter(resp.Header, time.Now()))
	}
	return resp, nil
}

// RetryAfter reads how long to wait from a rate-limited answer: the standard
// Retry-After header (seconds or HTTP date), else Mailgun's X-RateLimit-Reset
// (a Unix timestamp, in milliseconds or seconds). It returns 0 if neither is
// present or usable.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if secs, err := strconv.ParseInt(v, 10, 64); err == nil && secs > 0 {
			return time.Duration(secs) * time.Second
		}
		if t, err := http.ParseTime(v); err == nil && t.After(now) {
			return t.Sub(now)
		}
	}
	if v := strings.TrimSpace(h.Get("X-RateLimit-Reset")); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
			reset := time.Unix(n, 0)
			if n > 1e12 { // milliseconds
				reset = time.UnixMilli(n)
			}
			if reset.After(now) {
				return reset.Sub(now)
			}
		}
	}
	return 0
}
