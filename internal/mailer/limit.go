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
// that would wait past its deadline, or past its write deadline (a send
// under the lease fence), fails at once without being sent.
type limitTransport struct {
	limiter *rate.Limiter
	next    http.RoundTripper
}

func (t *limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if d, ok := ctx.Value(writeDeadlineKey{}).(time.Time); ok && !d.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d)
		defer cancel()
	}
	if err := t.limiter.Wait(ctx); err != nil {
		return nil, &throttledError{err: err}
	}
	return t.next.RoundTrip(req)
}

// throttledError is a request the Limit held back: nothing was sent.
type throttledError struct{ err error }

func (e *throttledError) Error() string {
	return fmt.Sprintf("not sent: the operator's own bound on requests to Mailgun (--mailgun-qps) would delay it past its deadline: %v", e.err)
}

func (e *throttledError) Unwrap() error { return e.err }
