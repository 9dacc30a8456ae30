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
	"errors"
	"fmt"
	"net/http"
	"time"

	"golang.org/x/time/rate"
)

// Limit bounds the rate of requests to Mailgun from one Pool, whatever the
// number of MailgunClusters: per-object backoff bounds each object's calls,
// this bounds their sum (a burst after a settings fix, many objects at the
// start of an outage). The zero value sets no bound.
type Limit struct {
	// QPS is the sustained number of requests per second; 0 means no bound.
	QPS float64
	// Burst is how many requests may go out at once above QPS.
	Burst int
}

// limitTransport holds each request until the Limit lets it go. A request
// the Limit would hold for more than half the time left before its
// deadline, or before its write deadline (a send under the lease fence),
// fails at once without being sent: let go that late, it would likely time
// out after it was written, and a send that times out has an unknown
// outcome (a settle wait and lookups) where a refused one has none.
//
// Background requests (delivery polls) only use spare capacity: they go
// while at least half the burst is left and never wait, so that polls for
// thousands of accepted emails cannot starve the sends of new ones.
type limitTransport struct {
	limiter *rate.Limiter
	next    http.RoundTripper
}

type backgroundKey struct{}

// inBackground marks ctx's requests as background: they use only spare
// capacity of the Limit.
func inBackground(ctx context.Context) context.Context {
	return context.WithValue(ctx, backgroundKey{}, true)
}

func (t *limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	now := time.Now()
	if background, _ := ctx.Value(backgroundKey{}).(bool); background {
		// Taking one must leave half the burst for sends.
		if reserve := float64(t.limiter.Burst() / 2); t.limiter.TokensAt(now) < reserve+1 {
			return nil, &throttledError{background: true}
		}
		if !t.limiter.AllowN(now, 1) {
			return nil, &throttledError{background: true}
		}
		return t.next.RoundTrip(req)
	}
	deadline, ok := ctx.Deadline()
	if d, fenced := ctx.Value(writeDeadlineKey{}).(time.Time); fenced && !d.IsZero() && (!ok || d.Before(deadline)) {
		deadline, ok = d, true
	}
	r := t.limiter.ReserveN(now, 1)
	delay := r.DelayFrom(now)
	if !r.OK() || ok && delay > deadline.Sub(now)/2 {
		r.CancelAt(now)
		return nil, &throttledError{delay: delay, left: deadline.Sub(now)}
	}
	if delay > 0 {
		timer := time.NewTimer(delay)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
			r.Cancel()
			return nil, &throttledError{delay: delay, left: deadline.Sub(now), err: ctx.Err()}
		}
	}
	return t.next.RoundTrip(req)
}

// throttledError is a request the Limit held back: nothing was sent.
type throttledError struct {
	delay, left time.Duration
	err         error
	// background: a delivery poll deferred to leave the capacity to sends.
	background bool
}

// Deferred reports whether err is a background request (a delivery poll)
// the Limit deferred because sends need the capacity: not a failure.
func Deferred(err error) bool {
	var t *throttledError
	return errors.As(err, &t) && t.background
}

// reason is the error without the figures that change from one request
// to the next.
func (e *throttledError) reason() string {
	if e.background {
		return "deferred: delivery polls only use spare capacity of the operator's bound on requests to Mailgun (--mailgun-qps); sends come first"
	}
	return "not sent: the operator's own bound on requests to Mailgun (--mailgun-qps) would have held it for more than half the time left before its deadline"
}

func (e *throttledError) Error() string {
	if e.background {
		return e.reason()
	}
	msg := fmt.Sprintf("not sent: the operator's own bound on requests to Mailgun (--mailgun-qps) would hold it %v with %v left before its deadline",
		e.delay.Round(time.Millisecond), e.left.Round(time.Millisecond))
	if e.err != nil {
		msg += ": " + e.err.Error()
	}
	return msg
}

func (e *throttledError) Unwrap() error { return e.err }
