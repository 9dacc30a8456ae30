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

// Delivery reads the message's events and summarises its delivery. Later
// outcomes win over earlier ones: a complaint implies delivery, a delivery
// after temporary failures is a delivery.
func (c *Client) Delivery(ctx context.Context, messageID string) (Delivery, error) {
	// Polls only use the request budget sends leave (limitTransport).
	ctx = inBackground(ctx)
	d := Delivery{State: DeliveryPending}
	rank := map[DeliveryState]int{DeliveryPending: 0, DeliveryRetrying: 1, DeliveryRejected: 2, DeliveryFailed: 3, Delivered: 4, DeliveryComplained: 5}
	err := c.eachEvent(ctx, messageID, func(ev mailgun.Event) bool {
		next := summarise(ev)
		if rank[next.State] >= rank[d.State] && next.State != DeliveryPending {
			d = next
		}
		return true
	})
	if err != nil {
		return Delivery{}, err
	}
	return d, nil
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
