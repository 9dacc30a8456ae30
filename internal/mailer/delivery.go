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
	"strings"
	"time"

	"github.com/mailgun/mailgun-go/v4"
	"github.com/mailgun/mailgun-go/v4/events"
)

// DeliveryState is what became of an accepted message.
type DeliveryState string

const (
	// DeliveryPending means accepted, no delivery outcome yet.
	DeliveryPending DeliveryState = "Pending"
	// DeliveryRetrying means a delivery attempt failed temporarily; Mailgun retries.
	DeliveryRetrying DeliveryState = "Retrying"
	// Delivered means the recipient's server took the message.
	Delivered DeliveryState = "Delivered"
	// DeliveryComplained means delivered, and the recipient marked it as spam.
	DeliveryComplained DeliveryState = "Complained"
	// DeliveryFailed means delivery failed permanently (a bounce).
	DeliveryFailed DeliveryState = "Failed"
	// DeliveryRejected means Mailgun refused to deliver the message.
	DeliveryRejected DeliveryState = "Rejected"
)

// Delivery is the delivery outcome of a message, from Mailgun's events.
type Delivery struct {
	State DeliveryState
	// Detail is Mailgun's explanation, e.g. the receiving server's answer.
	Detail string
	// At is when the event deciding State happened.
	At time.Time
}

// rank orders the states: a later one says more. A complaint implies
// delivery; a delivery after temporary failures is a delivery.
var rank = map[DeliveryState]int{DeliveryPending: 0, DeliveryRetrying: 1, DeliveryRejected: 2, DeliveryFailed: 3, Delivered: 4, DeliveryComplained: 5}

// Merge returns what d and next, events of one message, say together: the
// higher state, and of two equal ones the later.
func (d Delivery) Merge(next Delivery) Delivery {
	if next.State != DeliveryPending && (rank[next.State] > rank[d.State] || rank[next.State] == rank[d.State] && !next.At.Before(d.At)) {
		return next
	}
	if d.State == "" {
		return Delivery{State: DeliveryPending}
	}
	return d
}

// deliveryEvents are the events that say something of a delivery.
var deliveryEvents = strings.Join([]string{events.EventDelivered, events.EventFailed, events.EventRejected, events.EventComplained}, " OR ")

// DeliveryPageSize is how many events one page of DeliveryEvents holds,
// the most Mailgun serves per request.
const DeliveryPageSize = 300

// DeliveryEvents reads the delivery events (delivered, failed, rejected,
// complained) of the domain's messages to the settings' recipient from
// since on, oldest first, one page per Next: one request follows the
// deliveries of every request email sent with the settings.
type DeliveryEvents struct {
	it *mailgun.EventIterator
	c  *Client
}

// DeliveryEvents starts reading the delivery events at since.
func (c *Client) DeliveryEvents(since time.Time) *DeliveryEvents {
	it := c.mg.ListEvents(&mailgun.ListEventOptions{
		Begin:          since,
		ForceAscending: true,
		Limit:          DeliveryPageSize,
		Filter:         map[string]string{"event": deliveryEvents, "recipient": c.settings.Recipient},
	})
	return &DeliveryEvents{it: it, c: c}
}

// Next reads the next page and summarises it per Message-Id (without angle
// brackets); last is the time of its last event, and full says more events
// may follow. Polls only use the request budget sends leave
// (limitTransport): a deferred page is an error Deferred reports. After an
// error the reader is spent.
func (e *DeliveryEvents) Next(ctx context.Context) (outcomes map[string]Delivery, last time.Time, full bool, err error) {
	hint := &retryHint{}
	var page []mailgun.Event
	if !e.it.Next(withRetryHint(inBackground(ctx), hint), &page) {
		if err := e.it.Err(); err != nil {
			return nil, time.Time{}, false, e.c.classify(err, hint)
		}
		return nil, time.Time{}, false, nil
	}
	outcomes = map[string]Delivery{}
	for _, ev := range page {
		d := summarise(ev)
		if d.At.After(last) {
			last = d.At
		}
		if id := messageIDOf(ev); id != "" {
			outcomes[id] = outcomes[id].Merge(d)
		}
	}
	return outcomes, last, len(page) >= DeliveryPageSize, nil
}

// messageIDOf is the Message-Id header of the event's message, without
// angle brackets.
func messageIDOf(ev mailgun.Event) string {
	var headers events.MessageHeaders
	switch e := ev.(type) {
	case *events.Delivered:
		headers = e.Message.Headers
	case *events.Failed:
		headers = e.Message.Headers
	case *events.Rejected:
		headers = e.Message.Headers
	case *events.Complained:
		headers = e.Message.Headers
	default:
		return ""
	}
	return strings.Trim(headers.MessageID, "<>")
}

func summarise(ev mailgun.Event) Delivery {
	at := time.Unix(0, ev.GetTimestamp().UnixNano()).UTC()
	switch e := ev.(type) {
	case *events.Delivered:
		return Delivery{State: Delivered, Detail: e.DeliveryStatus.Message, At: at}
	case *events.Complained:
		return Delivery{State: DeliveryComplained, Detail: "the recipient marked the email as spam", At: at}
	case *events.Rejected:
		return Delivery{State: DeliveryRejected, Detail: strings.TrimSpace(e.Reject.Reason + ": " + e.Reject.Description), At: at}
	case *events.Failed:
		detail := strings.TrimSpace(fmt.Sprintf("%s (%s): %s", e.Reason, e.Severity, firstNonEmpty(e.DeliveryStatus.Message, e.DeliveryStatus.Description)))
		if e.Severity == "temporary" {
			return Delivery{State: DeliveryRetrying, Detail: detail, At: at}
		}
		return Delivery{State: DeliveryFailed, Detail: detail, At: at}
	}
	return Delivery{State: DeliveryPending, At: at}
}

func firstNonEmpty(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}

// CheckDomain looks the sending domain up, which proves the API key, the
// domain and the region (API base) fit together. It returns a *SendError
// (ClassUnauthorized, ClassDomainNotFound, ...) or nil, and the domain's
// state ("active", "unverified", ...).
func (c *Client) CheckDomain(ctx context.Context) (string, error) {
	hint := &retryHint{}
	resp, err := c.mg.GetDomain(withRetryHint(ctx, hint), c.settings.Domain)
	if err != nil {
		return "", c.classify(err, hint)
	}
	return resp.Domain.State, nil
}
