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

// Package mailer sends request emails through Mailgun and answers
// whether Mailgun already accepted a given message. It turns Mailgun's
// answers into a small set of error classes the controller can act on.
package mailer

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/mailgun/mailgun-go/v4"
	"github.com/mailgun/mailgun-go/v4/events"
	"golang.org/x/net/http/httpproxy"
	"golang.org/x/time/rate"
)

// Settings are what the mailer needs to talk to Mailgun.
type Settings struct {
	// Domain is the Mailgun sending domain; the sender address is on it.
	Domain string
	// APIKey is the Mailgun private API key.
	APIKey string
	// Recipient receives the request emails.
	Recipient string
	// APIBase is the Mailgun API base URL, e.g. https://api.eu.mailgun.net/v3.
	APIBase string
	// Sender is the From address; empty means Sender(Domain).
	Sender string
}

// Request is one request email (see ClusterEmail and MachineEmail).
type Request struct {
	// MessageID is the Message-Id header, including the angle brackets. The
	// caller chooses it so it can later look the message up.
	MessageID string
	// Subject is the subject line.
	Subject string
	// Text is the plain-text body.
	Text string
	// Requester becomes the Reply-To when it is an email address.
	Requester string
	// Var names the Mailgun user variables that identify the requesting
	// object, so that the message can be found in Mailgun's logs: v:<Var>
	// holds its namespace/name (Object), v:<Var>-uid its UID.
	Var    string
	Object string
	UID    string
}

// Sender is the From address of request emails on the given domain.
func Sender(domain string) string {
	return fmt.Sprintf("Cluster API Mailgun Provider <cluster-api@%s>", domain)
}

// NewMessage builds the Mailgun message for a request.
func NewMessage(s Settings, r Request) (*mailgun.Message, error) {
	from := s.Sender
	if from == "" {
		from = Sender(s.Domain)
	}
	msg := mailgun.NewMessage(from, r.Subject, r.Text, s.Recipient)
	msg.AddHeader("Message-Id", r.MessageID)
	if IsEmailAddress(r.Requester) {
		msg.SetReplyTo(r.Requester)
	}
	for _, v := range [][2]string{{r.Var, r.Object}, {r.Var + "-uid", r.UID}} {
		if err := msg.AddVariable(v[0], v[1]); err != nil {
			return nil, fmt.Errorf("adding variable %s: %w", v[0], err)
		}
	}
	return msg, nil
}

// IsEmailAddress reports whether a requester is an address rather than the
// bare domain older manifests used. The API schema already rejected anything
// else, so the presence of '@' is enough.
func IsEmailAddress(requester string) bool {
	return strings.Contains(requester, "@")
}

// Client talks to one Mailgun account.
type Client struct {
	settings Settings
	mg       *mailgun.MailgunImpl
}

// Pool makes Clients that share one HTTP connection pool. The controller
// needs a Client per reconcile, because the settings may change at any time;
// sharing the connections keeps that from costing a new connection (and TLS
// handshake) per email and from leaving idle connections behind.
//
// The Limit applies per Mailgun account (Settings.Account), as Mailgun's own
// rate limits do: an account that fails or is rate limited, and the retries
// of its objects, do not take the budget of another.
type Pool struct {
	timeout time.Duration
	// rt carries every request, past the limit.
	rt    http.RoundTripper
	limit Limit

	mu       sync.Mutex
	limiters map[string]*rate.Limiter
}

// NewPool returns a Pool whose requests time out after timeout, go out at
// the rate limit allows, and which keeps up to concurrency idle connections
// per Mailgun host, so that that many callers in parallel reuse their
// connections instead of dialling anew.
func NewPool(timeout time.Duration, concurrency int, limit Limit) *Pool {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	// Behind a proxy (OLM sets HTTPS_PROXY, HTTP_PROXY and NO_PROXY on the
	// operator of a cluster with one), Mailgun is reached through it. Read
	// when the pool is made, not once per process as http's default does.
	proxy := httpproxy.FromEnvironment().ProxyFunc()
	transport.Proxy = func(r *http.Request) (*url.URL, error) { return proxy(r.URL) }
	transport.MaxIdleConnsPerHost = max(concurrency, 2)
	// HTTP/1.1 only: each connection carries one request at a time, so the
	// write deadline set for a send (WithWriteDeadline) applies to that send
	// alone. HTTP/2 would multiplex other requests onto it.
	transport.ForceAttemptHTTP2 = false
	transport.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	return &Pool{timeout: timeout, rt: &retryHintTransport{next: &deadlineTransport{next: transport}}, limit: limit}
}

// httpClient is the HTTP client for the account of s: the shared
// connections, behind the account's limiter.
func (p *Pool) httpClient(s Settings) *http.Client {
	if p.limit.QPS <= 0 {
		return &http.Client{Timeout: p.timeout, Transport: p.rt}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.limiters == nil {
		p.limiters = map[string]*rate.Limiter{}
	}
	l, ok := p.limiters[s.Account()]
	if !ok {
		l = rate.NewLimiter(rate.Limit(p.limit.QPS), max(p.limit.Burst, 1))
		p.limiters[s.Account()] = l
	}
	return &http.Client{Timeout: p.timeout, Transport: &limitTransport{limiter: l, next: p.rt}}
}

// Client returns a Client for s that uses the pool's connections.
func (p *Pool) Client(s Settings) *Client {
	mg := mailgun.NewMailgun(s.Domain, s.APIKey)
	if s.APIBase != "" {
		mg.SetAPIBase(s.APIBase)
	}
	mg.SetClient(p.httpClient(s))
	return &Client{settings: s, mg: mg}
}

// New returns a Client with a pool of its own, for a single user. timeout
// bounds every HTTP request to Mailgun.
func New(s Settings, timeout time.Duration) *Client {
	return NewPool(timeout, 1, Limit{}).Client(s)
}

// Send sends a request email and returns the ID Mailgun assigned to it.
// Errors are *SendError.
func (c *Client) Send(ctx context.Context, r Request) (string, error) {
	msg, err := NewMessage(c.settings, r)
	if err != nil {
		return "", &SendError{Class: ClassRejected, Message: err.Error(), Err: err}
	}
	hint := &retryHint{}
	_, id, err := c.mg.Send(withRetryHint(ctx, hint), msg)
	if err != nil {
		return "", c.classify(err, hint)
	}
	if id == "" {
		// Mailgun always returns the ID of an accepted message; an empty one
		// means the reply was not what we expect, so we cannot tell.
		return "", &SendError{Class: ClassOutcomeUnknown, Message: "Mailgun accepted the request but returned no message ID"}
	}
	return id, nil
}

// WasAccepted looks a message up in Mailgun's events by its Message-Id and
// reports whether Mailgun accepted it. Mailgun logs an "accepted" event for
// every message it takes; any later event (delivered, failed, ...) implies it
// too. "rejected" means Mailgun refused it.
func (c *Client) WasAccepted(ctx context.Context, messageID string) (bool, error) {
	accepted := false
	err := c.eachEvent(ctx, messageID, func(ev mailgun.Event) bool {
		accepted = ev.GetName() != events.EventRejected
		return !accepted
	})
	if err != nil {
		return false, err
	}
	return accepted, nil
}

// maxEventPages bounds the events read for one message: a message has a
// handful (accepted, delivered or a few temporary failures, opened, ...).
const maxEventPages = 10

// eachEvent calls fn with the events of the message, oldest first, until fn
// returns false, the events end or maxEventPages pages have been read.
func (c *Client) eachEvent(ctx context.Context, messageID string, fn func(mailgun.Event) bool) error {
	it := c.mg.ListEvents(&mailgun.ListEventOptions{
		Filter:         map[string]string{"message-id": strings.Trim(messageID, "<>")},
		Limit:          100,
		ForceAscending: true,
		// Longer than any Mailgun plan keeps events.
		Begin: time.Now().Add(-30 * 24 * time.Hour),
	})
	hint := &retryHint{}
	var page []mailgun.Event
	for pages := 0; pages < maxEventPages && it.Next(withRetryHint(ctx, hint), &page); pages++ {
		for _, ev := range page {
			if !fn(ev) {
				return nil
			}
		}
	}
	if err := it.Err(); err != nil {
		return c.classify(err, hint)
	}
	return nil
}

// Class says what a failed Mailgun call means for the caller. The values
// are metric labels.
type Class string

const (
	// ClassOutcomeUnknown means no answer (timeout, reset connection, garbled
	// reply). Mailgun may have accepted the message.
	ClassOutcomeUnknown Class = "OutcomeUnknown"
	// ClassUnavailable means Mailgun answered 5xx or 408. Mailgun documents that
	// a 5xx does not prove the message was not queued.
	ClassUnavailable Class = "Unavailable"
	// ClassUnreachable means the connection to Mailgun could not be opened (DNS,
	// dial), or the Pool's Limit held the request back; nothing was
	// transmitted.
	ClassUnreachable Class = "Unreachable"
	// ClassRateLimited means Mailgun answered 429. Retry after RetryAfter.
	ClassRateLimited Class = "RateLimited"
	// ClassUnauthorized means Mailgun answered 401, the API key is wrong.
	ClassUnauthorized Class = "Unauthorized"
	// ClassForbidden means Mailgun answered 403, e.g. a sandbox domain and an
	// unauthorised recipient.
	ClassForbidden Class = "Forbidden"
	// ClassDomainNotFound means Mailgun answered 404, the domain does not exist in
	// this account or region.
	ClassDomainNotFound Class = "DomainNotFound"
	// ClassRejected means Mailgun answered another 4xx; the message will not be
	// accepted as it is.
	ClassRejected Class = "Rejected"
	// ClassTLS means the TLS handshake failed (a certificate this machine
	// does not trust or that names another host, an http server at an https
	// API base): the settings or the trust store are wrong, and since no
	// request is written before the handshake completes, nothing was sent.
	ClassTLS Class = "TLSFailed"
)

func (c Class) String() string { return string(c) }

// SendError is a failed Mailgun call, classified.
type SendError struct {
	Class Class
	// StatusCode is the HTTP status Mailgun answered with, 0 if none.
	StatusCode int
	// Message is Mailgun's explanation, or a description of the failure.
	Message string
	// RetryAfter is how long Mailgun asked us to wait (429), 0 if it did not say.
	RetryAfter time.Duration
	// Err is the underlying error.
	Err error
}

func (e *SendError) Error() string {
	if e.StatusCode != 0 {
		return fmt.Sprintf("mailgun answered %d (%s): %s", e.StatusCode, e.Class, e.Message)
	}
	return fmt.Sprintf("mailgun call failed (%s): %s", e.Class, e.Message)
}

func (e *SendError) Unwrap() error { return e.Err }

// RefusesSettings reports whether err is Mailgun's definite refusal of the
// settings (key, domain or region: 401, 403, 404), as opposed to no error,
// or Mailgun being unavailable.
func RefusesSettings(err error) bool {
	if err == nil {
		return false
	}
	switch AsSendError(err).Class {
	case ClassUnauthorized, ClassForbidden, ClassDomainNotFound, ClassTLS:
		return true
	}
	return false
}

// AsSendError returns the *SendError in err's chain, or one of class
// ClassOutcomeUnknown wrapping err.
func AsSendError(err error) *SendError {
	var se *SendError
	if errors.As(err, &se) {
		return se
	}
	return &SendError{Class: ClassOutcomeUnknown, Message: err.Error(), Err: err}
}

// String describes the settings without the API key, so they can be logged.
func (s Settings) String() string {
	key := "unset"
	if s.APIKey != "" {
		key = "set"
	}
	return fmt.Sprintf("domain=%q sender=%q recipient=%q apiBase=%q apiKey=%s", s.Domain, s.Sender, s.Recipient, s.APIBase, key)
}

// Account identifies, without revealing the key, the Mailgun account s
// talks to: its API key in its region.
func (s Settings) Account() string {
	h := sha256.Sum256([]byte(s.APIBase + "\x00" + s.APIKey))
	return hex.EncodeToString(h[:])
}

// Events identifies, without revealing the key, whose delivery events s
// reads: those of its recipient, on a domain of an account.
func (s Settings) Events() string {
	h := sha256.Sum256([]byte(s.APIBase + "\x00" + s.APIKey + "\x00" + s.Domain + "\x00" + s.Recipient))
	return hex.EncodeToString(h[:])
}

// Fingerprint identifies the settings (the key included) without
// revealing them, to notice when they change.
func (s Settings) Fingerprint() string {
	h := sha256.Sum256([]byte(s.Domain + "\x00" + s.Recipient + "\x00" + s.APIBase + "\x00" + s.APIKey + "\x00" + s.Sender))
	return hex.EncodeToString(h[:])
}

// GoString keeps %#v from printing the API key.
func (s Settings) GoString() string { return "mailer.Settings{" + s.String() + "}" }
