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

// Package metrics defines the provider's Prometheus metrics.
package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the provider's own metrics, on top of controller-runtime's.
// Each has a "kind" label: the kind of the object the email is for
// (MailgunCluster, MailgunMachine).
type Metrics struct {
	// EmailsSent counts request emails Mailgun accepted.
	EmailsSent *prometheus.CounterVec
	// EmailsFailed counts failed send attempts, by failure class.
	EmailsFailed *prometheus.CounterVec
	// SendDuration observes how long send attempts took, by result.
	SendDuration *prometheus.HistogramVec
	// Lookups counts Mailgun event lookups made to settle an earlier attempt
	// whose outcome was unknown, by result (accepted, not_found, error).
	Lookups *prometheus.CounterVec
	// Deliveries counts delivery outcomes of accepted emails, by result
	// (delivered, complained, failed, rejected, expired).
	Deliveries *prometheus.CounterVec
}

// New returns unregistered metrics.
func New() *Metrics {
	return &Metrics{
		EmailsSent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capmg_emails_sent_total",
			Help: "Request emails accepted by Mailgun.",
		}, []string{"kind"}),
		EmailsFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capmg_email_send_failures_total",
			Help: "Failed attempts to send a request email, by failure class.",
		}, []string{"kind", "class"}),
		SendDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "capmg_email_send_duration_seconds",
			Help:    "Duration of calls to Mailgun's send API, by result.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 12),
		}, []string{"kind", "result"}),
		Lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capmg_email_lookups_total",
			Help: "Mailgun event lookups made to settle send attempts with unknown outcome, by result.",
		}, []string{"kind", "result"}),
		Deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "capmg_email_deliveries_total",
			Help: "Delivery outcomes of accepted request emails, by result: delivered, complained, failed (bounced), rejected, expired.",
		}, []string{"kind", "result"}),
	}
}

// Register registers the metrics with r.
func (m *Metrics) Register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.EmailsSent, m.EmailsFailed, m.SendDuration, m.Lookups, m.Deliveries} {
		if err := r.Register(c); err != nil {
			return fmt.Errorf("registering metric: %w", err)
		}
	}
	return nil
}
