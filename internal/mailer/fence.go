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
	"net/http"
	"net/http/httptrace"
	"time"
)

// A send that a replica starts while it holds the leader election lease must
// not reach Mailgun after the lease may have passed to a successor: a
// replica frozen (GC pause, SIGSTOP, a paused VM) between its checks and the
// write would otherwise send after the successor did. The write deadline
// makes the kernel refuse every byte of the request written after it, so a
// request either left before the deadline or not at all.

type writeDeadlineKey struct{}

// WithWriteDeadline returns a context under which Send writes nothing to the
// network after t.
func WithWriteDeadline(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, writeDeadlineKey{}, t)
}

// deadlineTransport sets each request's write deadline on the connection
// it gets: the context's, or none, since a pooled connection keeps the
// deadline of the request before.
type deadlineTransport struct {
	next http.RoundTripper
}

func (t *deadlineTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	deadline, _ := req.Context().Value(writeDeadlineKey{}).(time.Time)
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		_ = info.Conn.SetWriteDeadline(deadline)
	}}
	return t.next.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
}
