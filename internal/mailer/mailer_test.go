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

package mailer_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/mailgunfake"
)

const (
	domain    = "mg.example.com"
	apiKey    = "key-0123456789abcdef-secret"
	recipient = "ops@example.com"
)

func newClient(t *testing.T, fake *mailgunfake.Server, key string) *mailer.Client {
	t.Helper()
	return mailer.New(mailer.Settings{Domain: domain, APIKey: key, Recipient: recipient, APIBase: fake.APIBase()}, 2*time.Second)
}

func request(id string) mailer.Request {
	return mailer.ClusterEmail{
		Priority:  "Urgent",
		Request:   "3 nodes, GPU please",
		Requester: "alice@example.com",
		Object:    "default/demo",
		UID:       "1234",
	}.Email(id)
}

func TestSendRecordsEveryField(t *testing.T) {
	fake := mailgunfake.Start(domain, apiKey)
	defer fake.Close()

	id, err := newClient(t, fake, apiKey).Send(context.Background(), request("<mailguncluster.1234@mg.example.com>"))
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if id != "<mailguncluster.1234@mg.example.com>" {
		t.Errorf("id = %q, want the Message-Id we chose", id)
	}
	msgs := fake.Messages()
	if len(msgs) != 1 {
		t.Fatalf("fake recorded %d messages, want 1", len(msgs))
	}
	m := msgs[0]
	checks := []struct{ field, got, want string }{
		{"from", m.From, "Cluster API Mailgun Provider <cluster-api@mg.example.com>"},
		{"to", strings.Join(m.To, ","), recipient},
		{"subject", m.Subject, "[Urgent] New Cluster requested"},
		{"text", m.Text, "Hello! One cluster please.\n\n3 nodes, GPU please\n"},
		{"reply-to", m.ReplyTo, "alice@example.com"},
		{"message-id", m.Headers["Message-Id"], "<mailguncluster.1234@mg.example.com>"},
		{"v:mailguncluster", m.Variables["mailguncluster"], "default/demo"},
		{"v:mailguncluster-uid", m.Variables["mailguncluster-uid"], "1234"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.field, c.got, c.want)
		}
	}
}

func TestSendWithDomainRequesterHasNoReplyTo(t *testing.T) {
	fake := mailgunfake.Start(domain, apiKey)
	defer fake.Close()
	r := request("<a@mg.example.com>")
	r.Requester = "example.org"
	if _, err := newClient(t, fake, apiKey).Send(context.Background(), r); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if got := fake.Messages()[0].ReplyTo; got != "" {
		t.Errorf("Reply-To = %q, want none for a domain requester", got)
	}
}

func TestSendClassifiesFailures(t *testing.T) {
	tests := []struct {
		name        string
		key         string
		fault       *mailgunfake.Fault
		sandbox     bool
		wantClass   mailer.Class
		wantStatus  int
		wantMessage string
		wantRetry   time.Duration
		wantRecords int
	}{
		{name: "wrong key", key: "wrong", wantClass: mailer.ClassUnauthorized, wantStatus: 401, wantMessage: "Forbidden"},
		{name: "sandbox recipient", sandbox: true, wantClass: mailer.ClassForbidden, wantStatus: 403, wantMessage: "authorized recipients"},
		{name: "bad request", fault: ptr(mailgunfake.StatusFault(400, "'to' parameter is not a valid address")),
			wantClass: mailer.ClassRejected, wantStatus: 400, wantMessage: "not a valid address"},
		{name: "rate limited with reset", fault: &mailgunfake.Fault{Kind: mailgunfake.Status, Status: 429,
			Body: `{"message":"slow down"}`, Header: http.Header{"Retry-After": {"7"}}},
			wantClass: mailer.ClassRateLimited, wantStatus: 429, wantRetry: 7 * time.Second},
		{name: "rate limited without reset", fault: ptr(mailgunfake.StatusFault(429, "slow down")),
			wantClass: mailer.ClassRateLimited, wantStatus: 429},
		{name: "server error", fault: ptr(mailgunfake.StatusFault(503, "maintenance")),
			wantClass: mailer.ClassUnavailable, wantStatus: 503, wantMessage: "maintenance"},
		{name: "timeout", fault: &mailgunfake.Fault{Kind: mailgunfake.Hang}, wantClass: mailer.ClassOutcomeUnknown},
		{name: "accepted but reply lost", fault: &mailgunfake.Fault{Kind: mailgunfake.AcceptAndDropReply},
			wantClass: mailer.ClassOutcomeUnknown, wantRecords: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := mailgunfake.Start(domain, apiKey)
			defer fake.Close()
			if tt.fault != nil {
				fake.FailSends(*tt.fault)
			}
			if tt.sandbox {
				fake.AuthorizeRecipients("someone-else@example.com")
			}
			key := apiKey
			if tt.key != "" {
				key = tt.key
			}
			c := mailer.New(mailer.Settings{Domain: domain, APIKey: key, Recipient: recipient, APIBase: fake.APIBase()}, 300*time.Millisecond)
			_, err := c.Send(context.Background(), request("<x@mg.example.com>"))
			var se *mailer.SendError
			if !errors.As(err, &se) {
				t.Fatalf("Send error = %v, want a *SendError", err)
			}
			if se.Class != tt.wantClass || se.StatusCode != tt.wantStatus {
				t.Errorf("class/status = %s/%d, want %s/%d (%v)", se.Class, se.StatusCode, tt.wantClass, tt.wantStatus, se)
			}
			if !strings.Contains(se.Message, tt.wantMessage) {
				t.Errorf("message = %q, want it to contain %q", se.Message, tt.wantMessage)
			}
			if se.RetryAfter != tt.wantRetry {
				t.Errorf("RetryAfter = %v, want %v", se.RetryAfter, tt.wantRetry)
			}
			if strings.Contains(err.Error(), apiKey) {
				t.Errorf("error %q contains the API key", err)
			}
			if got := len(fake.Messages()); got != tt.wantRecords {
				t.Errorf("fake recorded %d messages, want %d", got, tt.wantRecords)
			}
		})
	}
}

// The controller builds a Client per reconcile; the Pool must keep that
// from opening a connection per email.
func TestPoolReusesConnectionsAcrossClients(t *testing.T) {
	fake := mailgunfake.Start(domain, apiKey)
	defer fake.Close()
	fake.SetSendLatency(5 * time.Millisecond)
	const workers, sendsEach = 4, 5
	pool := mailer.NewPool(2*time.Second, workers, mailer.Limit{})
	settings := mailer.Settings{Domain: domain, APIKey: apiKey, Recipient: recipient, APIBase: fake.APIBase()}

	var wg sync.WaitGroup
	errs := make(chan error, workers*sendsEach)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range sendsEach {
				if _, err := pool.Client(settings).Send(context.Background(), request(fmt.Sprintf("<%d.%d@%s>", w, i, domain))); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := len(fake.Messages()); got != workers*sendsEach {
		t.Fatalf("fake got %d messages, want %d", got, workers*sendsEach)
	}
	// Without reuse every send opens its own (20). With it, about one per
	// worker: net/http may dial one more while a busy connection is being
	// handed back (CI saw 5 under load), so the bound leaves that room.
	if got := fake.Connections(); got > 2*workers {
		t.Errorf("%d sends by %d workers opened %d connections, want at most %d", workers*sendsEach, workers, got, 2*workers)
	}
}

// TestRefusedConnectionIsUnreachable: Mailgun refusing connections (egress
// blocked, a wrong host) fails every call as Unreachable, also for a
// client that kept a connection open, and calls succeed once it listens
// again.
func TestRefusedConnectionIsUnreachable(t *testing.T) {
	fake := mailgunfake.Start(domain, apiKey)
	defer fake.Close()
	c := newClient(t, fake, apiKey)
	ctx := context.Background()
	if _, err := c.Send(ctx, request("<before@mg.example.com>")); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if err := fake.RefuseConnections(true); err != nil {
		t.Fatal(err)
	}
	_, sendErr := c.Send(ctx, request("<during@mg.example.com>"))
	_, lookupErr := c.WasAccepted(ctx, "<before@mg.example.com>")
	for what, err := range map[string]error{"send": sendErr, "lookup": lookupErr} {
		if se := mailer.AsSendError(err); err == nil || se.Class != mailer.ClassUnreachable {
			t.Errorf("%s while refusing: %v, want class Unreachable: a refused connection proves nothing was sent", what, err)
		}
		// The same words every time (no address or port), so that a retry
		// failing the same way writes no status.
		if se := mailer.AsSendError(err); se.Message != "could not connect to Mailgun: connect: connection refused" {
			t.Errorf("%s while refusing: message %q, want one without addresses", what, se.Message)
		}
	}
	if err := fake.RefuseConnections(false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, request("<after@mg.example.com>")); err != nil {
		t.Errorf("Send after the fake listens again: %v", err)
	}
	if n := len(fake.Messages()); n != 2 {
		t.Errorf("%d messages accepted, want 2", n)
	}
}

// TestEventsLag: the fake shows a message in its events only after the
// lag Mailgun's events have.
func TestEventsLag(t *testing.T) {
	fake := mailgunfake.Start(domain, apiKey)
	defer fake.Close()
	fake.SetEventLag(300 * time.Millisecond)
	c := newClient(t, fake, apiKey)
	ctx := context.Background()
	if _, err := c.Send(ctx, request("<lagging@mg.example.com>")); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if found, err := c.WasAccepted(ctx, "<lagging@mg.example.com>"); err != nil || found {
		t.Errorf("WasAccepted right after the send = %v, %v; want false: the events lag", found, err)
	}
	time.Sleep(400 * time.Millisecond)
	if found, err := c.WasAccepted(ctx, "<lagging@mg.example.com>"); err != nil || !found {
		t.Errorf("WasAccepted after the lag = %v, %v; want true", found, err)
	}
}

func TestWasAccepted(t *testing.T) {
	fake := mailgunfake.Start(domain, apiKey)
	defer fake.Close()
	c := newClient(t, fake, apiKey)
	ctx := context.Background()

	if _, err := c.Send(ctx, request("<sent@mg.example.com>")); err != nil {
		t.Fatalf("Send: %v", err)
	}
	for _, tt := range []struct {
		id   string
		want bool
	}{
		{"<sent@mg.example.com>", true},
		{"<never-sent@mg.example.com>", false},
	} {
		got, err := c.WasAccepted(ctx, tt.id)
		if err != nil {
			t.Fatalf("WasAccepted(%s): %v", tt.id, err)
		}
		if got != tt.want {
			t.Errorf("WasAccepted(%s) = %v, want %v", tt.id, got, tt.want)
		}
	}

	fake.FailEvents(mailgunfake.StatusFault(500, "events down"))
	if _, err := c.WasAccepted(ctx, "<sent@mg.example.com>"); mailer.AsSendError(err).Class != mailer.ClassUnavailable {
		t.Errorf("WasAccepted with failing events API: err = %v, want class Unavailable", err)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		header http.Header
		want   time.Duration
	}{
		{"none", http.Header{}, 0},
		{"seconds", http.Header{"Retry-After": {"30"}}, 30 * time.Second},
		{"http date", http.Header{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}}, 90 * time.Second},
		{"reset millis", http.Header{"X-Ratelimit-Reset": {itoa(now.Add(5 * time.Second).UnixMilli())}}, 5 * time.Second},
		{"reset seconds", http.Header{"X-Ratelimit-Reset": {itoa(now.Add(12 * time.Second).Unix())}}, 12 * time.Second},
		{"reset in the past", http.Header{"X-Ratelimit-Reset": {itoa(now.Add(-time.Minute).Unix())}}, 0},
		{"garbage", http.Header{"Retry-After": {"soon"}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mailer.RetryAfter(tt.header, now); got != tt.want {
				t.Errorf("RetryAfter = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSettingsStringHidesKey(t *testing.T) {
	s := mailer.Settings{Domain: domain, APIKey: apiKey, Recipient: recipient}
	for _, out := range []string{s.String(), s.GoString()} {
		if strings.Contains(out, apiKey) {
			t.Errorf("%q contains the API key", out)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestWriteDeadlineFencesTheSend: a send whose write deadline has passed
// (the replica's lease may have moved on while it was frozen) puts nothing
// on the wire, and the connection pool's next, unfenced send is not
// affected by the deadline of the one before.
func TestWriteDeadlineFencesTheSend(t *testing.T) {
	fake := mailgunfake.Start(domain, apiKey)
	defer fake.Close()
	pool := mailer.NewPool(2*time.Second, 1, mailer.Limit{})
	c := pool.Client(mailer.Settings{Domain: domain, APIKey: apiKey, Recipient: recipient, APIBase: fake.APIBase()})
	// Warm a pooled connection, then fence a send on it.
	if _, err := c.Send(context.Background(), request("<warm@"+domain+">")); err != nil {
		t.Fatal(err)
	}
	fenced := mailer.WithWriteDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	if _, err := c.Send(fenced, request("<fenced@"+domain+">")); err == nil {
		t.Fatal("a send past its write deadline succeeded")
	}
	// A fenced send in time, then an unfenced one on the same connection
	// after that deadline has passed.
	inTime := mailer.WithWriteDeadline(context.Background(), time.Now().Add(200*time.Millisecond))
	if _, err := c.Send(inTime, request("<in-time@"+domain+">")); err != nil {
		t.Fatalf("a send within its write deadline: %v", err)
	}
	time.Sleep(300 * time.Millisecond)
	if _, err := c.Send(context.Background(), request("<after@"+domain+">")); err != nil {
		t.Fatalf("the next send on the pool: %v", err)
	}
	var ids []string
	for _, m := range fake.Messages() {
		ids = append(ids, m.ID)
	}
	if want := []string{"<warm@" + domain + ">", "<in-time@" + domain + ">", "<after@" + domain + ">"}; !slices.Equal(ids, want) {
		t.Errorf("Mailgun got %v, want %v", ids, want)
	}
}

// TestPoolBoundsTheRequestRate: however many callers there are, requests
// leave the Pool at no more than its Limit, and a request that would wait
// past its write deadline (a fenced send) is refused as not sent, with
// nothing on the wire.
func TestPoolBoundsTheRequestRate(t *testing.T) {
	fake := mailgunfake.Start(domain, apiKey)
	defer fake.Close()
	const qps, burst, callers, each = 40, 4, 8, 3
	pool := mailer.NewPool(5*time.Second, callers, mailer.Limit{QPS: qps, Burst: burst})
	settings := mailer.Settings{Domain: domain, APIKey: apiKey, Recipient: recipient, APIBase: fake.APIBase()}

	start := time.Now()
	var wg sync.WaitGroup
	for w := range callers {
		wg.Go(func() {
			for i := range each {
				if _, err := pool.Client(settings).Send(context.Background(), request(fmt.Sprintf("<%d.%d@%s>", w, i, domain))); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	// The first burst goes at once, the rest at qps.
	elapsed := time.Since(start)
	if want := time.Duration(float64(callers*each-burst) / qps * float64(time.Second)); elapsed < want*9/10 {
		t.Errorf("%d requests took %v; at %d per second after a burst of %d they take at least %v", callers*each, elapsed, qps, burst, want)
	}
	if got := len(fake.Messages()); got != callers*each {
		t.Fatalf("fake got %d messages, want %d", got, callers*each)
	}

	// A fenced send is let go only if the limit holds it for at most half
	// the time left before its write deadline; else it is refused at once,
	// unsent. (The pool's timeout, 30s, leaves room for both waits.)
	slow := mailer.NewPool(30*time.Second, 1, mailer.Limit{QPS: 0.5, Burst: 1})
	fake2 := mailgunfake.Start(domain, apiKey)
	defer fake2.Close()
	settings.APIBase = fake2.APIBase()
	if _, err := slow.Client(settings).Send(context.Background(), request("<first@"+domain+">")); err != nil {
		t.Fatal(err)
	}
	// The next token is about 2s away.
	refusedAt := time.Now()
	_, err := slow.Client(settings).Send(mailer.WithWriteDeadline(context.Background(), time.Now().Add(time.Second)), request("<fenced@"+domain+">"))
	if err == nil {
		t.Error("a send the limit holds past half its time to the write deadline went out")
	} else if se := mailer.AsSendError(err); se.Class != mailer.ClassUnreachable {
		t.Errorf("send held back by the limit: %v, want class Unreachable: nothing was sent", err)
	}
	if d := time.Since(refusedAt); d > 100*time.Millisecond {
		t.Errorf("the refusal took %v; it must not wait for a token it cannot use", d)
	}
	if _, err := slow.Client(settings).Send(mailer.WithWriteDeadline(context.Background(), time.Now().Add(10*time.Second)), request("<in-time@"+domain+">")); err != nil {
		t.Errorf("a fenced send with time to spare after its wait: %v", err)
	}
	if n := len(fake2.Messages()); n != 2 {
		t.Errorf("Mailgun got %d messages, want the first and the one in time", n)
	}
}

// TestPoolGoesThroughTheEnvironmentsProxy: with HTTP(S)_PROXY set, as OLM
// sets it on the operator of a cluster behind a proxy, calls to Mailgun go
// through the proxy. (NO_PROXY comes from the same environment settings,
// golang.org/x/net/http/httpproxy's; a direct call is not tried here, as it
// would leave the machine.)
func TestPoolGoesThroughTheEnvironmentsProxy(t *testing.T) {
	fake := mailgunfake.Start(domain, apiKey)
	defer fake.Close()
	backend, err := url.Parse(fake.APIBase())
	if err != nil {
		t.Fatal(err)
	}
	var proxied atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A forward proxy: whatever host was asked for, the fake answers.
		proxied.Add(1)
		httputil.NewSingleHostReverseProxy(&url.URL{Scheme: backend.Scheme, Host: backend.Host}).ServeHTTP(w, r)
	}))
	defer proxy.Close()
	for _, key := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy"} {
		t.Setenv(key, "")
	}
	t.Setenv("HTTP_PROXY", proxy.URL)
	// An address only the proxy sees (TEST-NET-1): loopback is never
	// proxied, and a name would need DNS.
	settings := mailer.Settings{Domain: domain, APIKey: apiKey, Recipient: recipient, APIBase: "http://192.0.2.10/v3"}
	if _, err := mailer.NewPool(2*time.Second, 1, mailer.Limit{}).Client(settings).Send(context.Background(), request("<proxied@"+domain+">")); err != nil {
		t.Fatalf("send through the proxy: %v", err)
	}
	if n := proxied.Load(); n != 1 || len(fake.Messages()) != 1 {
		t.Errorf("the proxy saw %d requests and Mailgun got %d messages, want 1 and 1", n, len(fake.Messages()))
	}
}

// TestSendThroughAnUnreachableProxyIsUnreachable: a proxy that refuses the
// connection proves the request never left, as a refused Mailgun does.
func TestSendThroughAnUnreachableProxyIsUnreachable(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	proxyURL := closed.URL
	closed.Close()
	for _, key := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy"} {
		t.Setenv(key, "")
	}
	t.Setenv("HTTP_PROXY", proxyURL)
	settings := mailer.Settings{Domain: domain, APIKey: apiKey, Recipient: recipient, APIBase: "http://192.0.2.10/v3"}
	_, err := mailer.NewPool(2*time.Second, 1, mailer.Limit{}).Client(settings).Send(context.Background(), request("<x@"+domain+">"))
	if se := mailer.AsSendError(err); err == nil || se.Class != mailer.ClassUnreachable {
		t.Errorf("send through a proxy that refuses connections: %v, want class Unreachable", err)
	}
}

// TestTLSFailuresAreTheirOwnClass: a certificate this machine does not
// trust, or an API base whose server does not speak TLS, is a settings
// problem in which nothing was sent (no request is written before the
// handshake), not an outcome to look up.
func TestTLSFailuresAreTheirOwnClass(t *testing.T) {
	var requests atomic.Int64
	handler := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { requests.Add(1) })
	untrusted := httptest.NewTLSServer(handler)
	defer untrusted.Close()
	plain := httptest.NewServer(handler)
	defer plain.Close()
	for name, base := range map[string]string{
		"certificate not trusted":   untrusted.URL + "/v3",
		"server does not speak TLS": strings.Replace(plain.URL, "http://", "https://", 1) + "/v3",
	} {
		t.Run(name, func(t *testing.T) {
			c := mailer.New(mailer.Settings{Domain: domain, APIKey: apiKey, Recipient: recipient, APIBase: base}, 2*time.Second)
			_, err := c.Send(context.Background(), request("<tls@mg.example.com>"))
			if se := mailer.AsSendError(err); err == nil || se.Class != mailer.ClassTLS || !mailer.RefusesSettings(err) {
				t.Errorf("send: %v, want class %s, refusing the settings", err, mailer.ClassTLS)
			}
		})
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests reached the servers, want none", n)
	}
}

// TestDeliveryPollsLeaveTheBudgetToSends: delivery polls go only while at
// least half the burst is left, and never wait; sends then have the rest.
// Before, thousands of polls for accepted emails shared --mailgun-qps with
// the sends of new ones and left them a few per second.
func TestDeliveryPollsLeaveTheBudgetToSends(t *testing.T) {
	fake := mailgunfake.Start(domain, apiKey)
	defer fake.Close()
	// A slow refill: the test sees the burst only.
	pool := mailer.NewPool(2*time.Second, 4, mailer.Limit{QPS: 0.01, Burst: 6})
	c := pool.Client(mailer.Settings{Domain: domain, APIKey: apiKey, Recipient: recipient, APIBase: fake.APIBase()})
	ctx := context.Background()

	polled, deferred := 0, 0
	for range 10 {
		start := time.Now()
		_, _, _, err := c.DeliveryEvents(start.Add(-time.Hour)).Next(ctx)
		switch {
		case err == nil:
			polled++
		case mailer.Deferred(err):
			deferred++
			if d := time.Since(start); d > 50*time.Millisecond {
				t.Errorf("a deferred poll took %s: polls must not wait for the budget", d)
			}
		default:
			t.Fatalf("poll: %v", err)
		}
	}
	if polled != 3 || deferred != 7 {
		t.Errorf("%d polls went and %d were deferred, want 3 and 7: polls leave half the burst of 6", polled, deferred)
	}
	for i := range 3 {
		if _, err := c.Send(ctx, request(fmt.Sprintf("<send-%d@mg.example.com>", i))); err != nil {
			t.Errorf("send %d after the polls: %v, want the half of the burst the polls left", i, err)
		}
	}
}

// TestDeliveryEventsFollowEveryMessageInOneRequest: one page of the
// domain's delivery events tells the outcome of every message in it, the
// later event of a message winning; events before since are not read;
// a full page says more may follow, and the next page has them.
func TestDeliveryEventsFollowEveryMessageInOneRequest(t *testing.T) {
	fake := mailgunfake.Start(domain, apiKey)
	defer fake.Close()
	c := newClient(t, fake, apiKey)
	ctx := context.Background()
	send := func(id string) {
		t.Helper()
		if _, err := c.Send(ctx, request(id)); err != nil {
			t.Fatalf("Send: %v", err)
		}
	}
	for _, id := range []string{"<old@mg.example.com>", "<delivered@mg.example.com>", "<bounced@mg.example.com>", "<retried@mg.example.com>", "<pending@mg.example.com>"} {
		send(id)
	}
	fake.AddEvent("<old@mg.example.com>", mailgunfake.Event{Name: "delivered", Message: "250 OK"})
	// Mailgun's begin has whole seconds.
	time.Sleep(1100 * time.Millisecond)
	since := time.Now()
	fake.AddEvent("<delivered@mg.example.com>", mailgunfake.Event{Name: "delivered", Message: "250 OK"})
	fake.AddEvent("<bounced@mg.example.com>", mailgunfake.Event{Name: "failed", Severity: "permanent", Reason: "bounce", Message: "550 no such user", Code: 550})
	fake.AddEvent("<retried@mg.example.com>", mailgunfake.Event{Name: "failed", Severity: "temporary", Reason: "generic", Message: "421 try later", Code: 421})
	fake.AddEvent("<retried@mg.example.com>", mailgunfake.Event{Name: "delivered", Message: "250 OK"})

	_, before := fake.Requests()
	outcomes, last, full, err := c.DeliveryEvents(since).Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, after := fake.Requests(); after-before != 1 {
		t.Errorf("%d requests for one page, want 1", after-before)
	}
	want := map[string]mailer.DeliveryState{"delivered@mg.example.com": mailer.Delivered, "bounced@mg.example.com": mailer.DeliveryFailed,
		"retried@mg.example.com": mailer.Delivered}
	if len(outcomes) != len(want) || full || last.Before(since.Add(-time.Second)) {
		t.Errorf("outcomes %v (full %v, last event at %v), want %v, not full, the last event after %v", outcomes, full, last, want, since)
	}
	for id, state := range want {
		if outcomes[id].State != state {
			t.Errorf("%s: %s, want %s", id, outcomes[id].State, state)
		}
	}

	for range mailer.DeliveryPageSize {
		fake.AddEvent("<pending@mg.example.com>", mailgunfake.Event{Name: "failed", Severity: "temporary", Reason: "generic", Message: "421 try later", Code: 421})
	}
	pages := c.DeliveryEvents(since)
	if _, _, full, err := pages.Next(ctx); err != nil || !full {
		t.Fatalf("a page of %d events: full %v, %v; want full", mailer.DeliveryPageSize, full, err)
	}
	outcomes, _, full, err = pages.Next(ctx)
	if err != nil || full || outcomes["pending@mg.example.com"].State != mailer.DeliveryRetrying {
		t.Errorf("the next page: %v (full %v), %v; want the rest: pending@ retrying", outcomes, full, err)
	}
}

// TestEachAccountHasItsOwnBudget: the bound on requests applies per Mailgun
// account. An account whose objects spend the budget (an outage's retries,
// a burst of new clusters) leaves another account's sends untouched.
func TestEachAccountHasItsOwnBudget(t *testing.T) {
	busy := mailgunfake.Start(domain, apiKey)
	defer busy.Close()
	other := mailgunfake.Start("mg.other.example.com", "key-other")
	defer other.Close()
	// A slow refill: the test sees the burst only.
	pool := mailer.NewPool(2*time.Second, 4, mailer.Limit{QPS: 0.01, Burst: 2})
	busyAccount := mailer.Settings{Domain: domain, APIKey: apiKey, Recipient: recipient, APIBase: busy.APIBase()}
	otherAccount := mailer.Settings{Domain: other.Domain, APIKey: "key-other", Recipient: recipient, APIBase: other.APIBase()}
	ctx := context.Background()
	for i := range 2 {
		if _, err := pool.Client(busyAccount).Send(ctx, request(fmt.Sprintf("<busy-%d@%s>", i, domain))); err != nil {
			t.Fatalf("send %d within the burst: %v", i, err)
		}
	}
	if _, err := pool.Client(busyAccount).Send(ctx, request("<busy-over@"+domain+">")); mailer.AsSendError(err).Class != mailer.ClassUnreachable {
		t.Fatalf("a send over the busy account's budget: %v, want it held back (class Unreachable)", err)
	}
	if _, err := pool.Client(otherAccount).Send(ctx, request("<other@mg.other.example.com>")); err != nil {
		t.Errorf("the other account's send after the busy one spent its budget: %v, want it sent", err)
	}
}

// TestDeliveryMerge: of two events of one message, the higher state wins,
// and of two equal ones the later, whatever the order they are read in.
func TestDeliveryMerge(t *testing.T) {
	early, late := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC)
	retryEarly := mailer.Delivery{State: mailer.DeliveryRetrying, Detail: "first", At: early}
	retryLate := mailer.Delivery{State: mailer.DeliveryRetrying, Detail: "second", At: late}
	delivered := mailer.Delivery{State: mailer.Delivered, At: early}
	tests := []struct {
		name      string
		a, b      mailer.Delivery
		wantState mailer.DeliveryState
		wantAt    time.Time
	}{
		{"nothing yet", mailer.Delivery{}, mailer.Delivery{State: mailer.DeliveryPending}, mailer.DeliveryPending, time.Time{}},
		{"a delivery after retries", retryLate, delivered, mailer.Delivered, early},
		{"retries read in order", retryEarly, retryLate, mailer.DeliveryRetrying, late},
		{"retries read out of order", retryLate, retryEarly, mailer.DeliveryRetrying, late},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.Merge(tt.b); got.State != tt.wantState || !got.At.Equal(tt.wantAt) {
				t.Errorf("Merge = %v, want %s at %v", got, tt.wantState, tt.wantAt)
			}
		})
	}
}

// TestMachineEmailNamesWhatTheBuilderNeeds: the machine email names the
// cluster, the machine, its role, version, failure domain, provider ID and
// where the bootstrap data is; fields left empty say so rather than
// printing nothing.
func TestMachineEmailNamesWhatTheBuilderNeeds(t *testing.T) {
	e := mailer.MachineEmail{ //nolint:gosec // G101: names a Secret, holds no credential
		Priority: "Urgent", Cluster: "team/prod", Machine: "team/prod-md-0-abc", Object: "team/prod-md-0-xyz", UID: "42",
		Role: "worker", MachineDeployment: "prod-md-0", MachineSet: "prod-md-0-abc12", Version: "v1.36.0", FailureDomain: "rack-1",
		ProviderID: "mailgun://42", BootstrapSecret: "team/prod-md-0-abc-bootstrap", ControlPlaneEndpoint: "10.0.0.1:6443",
		Request: "16 GiB, please",
	}
	r := e.Email("<mailgunmachine.42@mg.example.com>")
	if want := "[Urgent] New worker Machine requested for cluster team/prod"; r.Subject != want {
		t.Errorf("subject = %q, want %q", r.Subject, want)
	}
	for _, want := range []string{
		"Role:                   worker\n", "Kubernetes version:     v1.36.0\n", "Failure domain:         rack-1\n",
		"Control plane endpoint: 10.0.0.1:6443\n", "Machine:                team/prod-md-0-abc\n", "MachineDeployment:      prod-md-0\n",
		"MachineSet:             prod-md-0-abc12\n", "MailgunMachine:         team/prod-md-0-xyz\n",
		"--provider-id=mailgun://42", `key "value" of Secret team/prod-md-0-abc-bootstrap`, "\n16 GiB, please\n",
	} {
		if !strings.Contains(r.Text, want) {
			t.Errorf("the email lacks %q:\n%s", want, r.Text)
		}
	}
	if r.Var != mailer.VarMachine || r.Object != "team/prod-md-0-xyz" || r.UID != "42" || r.MessageID != "<mailgunmachine.42@mg.example.com>" {
		t.Errorf("request = %+v", r)
	}

	bare := mailer.MachineEmail{Priority: "Urgent", Role: "control-plane"}.Email("<m@x>")
	for _, want := range []string{"Kubernetes version:     not set", "Failure domain:         any", "Control plane endpoint: not known yet", "MachineDeployment:      none"} {
		if !strings.Contains(bare.Text, want) {
			t.Errorf("the email of a bare Machine lacks %q:\n%s", want, bare.Text)
		}
	}
}
