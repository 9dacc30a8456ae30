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

// Package send carries out, for any kind of object, the exactly-once send
// of its request email: the send record kept in the object's annotations,
// the driver that performs the steps internal/sendprotocol decides, the
// fence before a send, resend requests, copied records, delivery tracking
// and what is remembered per object between reconciles.
//
// A kind (MailgunCluster, MailgunMachine) plugs in through Kind: its
// Message-Id prefix, finalizer and the status fields that record
// acceptance; its reconciler gives the email to send. The reconcilers in controllers/ decide when an object may
// send (its owner, pausing, deletion) and hand it to a Driver.
package send

import (
	"context"
	"time"

	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/config"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/metrics"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/sendprotocol"
)

// Mailer sends request emails and looks them up; *mailer.Client implements it.
type Mailer interface {
	Send(ctx context.Context, r mailer.Request) (string, error)
	WasAccepted(ctx context.Context, messageID string) (bool, error)
}

// CredentialsVerifier checks, with Mailgun, that the API key, domain and
// region fit together; errors are *mailer.SendError.
type CredentialsVerifier interface {
	Verify(ctx context.Context, settings mailer.Settings) error
}

// SettingsSource gives the Mailgun settings an object sends with: its
// MailgunClusterIdentity's, or the operator-wide ones, or what the user
// must fix first; config.Settings implements it.
type SettingsSource interface {
	For(ctx context.Context, namespace string, ref *infrav1.MailgunClusterIdentityReference) (mailer.Settings, *config.Unusable, error)
}

// Lease reports since when this replica has held its leader election
// lease without a break, and until when it holds it with time to spare, so
// that no successor can be sending meanwhile; or why it does not.
type Lease interface {
	Held() (since, until time.Time, err error)
}

// Sender is what sending needs, shared by the drivers of every kind.
type Sender struct {
	Client   client.Client
	Recorder events.EventRecorder
	Settings SettingsSource
	// NewMailer returns a Mailer for the given settings.
	NewMailer func(mailer.Settings) Mailer
	Metrics   *metrics.Metrics

	// Protocol decides when to claim, send, look up and wait.
	Protocol sendprotocol.Protocol

	// Credentials, if set, is consulted before sending.
	Credentials CredentialsVerifier

	// APIReader reads past the cache right before a send: the object's
	// Cluster, to check it is not paused, and the object, to check that its
	// claim is still this replica's, unless the Lease shows it must be.
	APIReader client.Reader
	// Lease, if set (leader election on), must be held before a send.
	Lease Lease

	// Deliveries follows the delivery of accepted emails.
	Deliveries *DeliveryTracker

	// DeliveryTrackingTimeout is how long after acceptance delivery is
	// followed before giving up.
	DeliveryTrackingTimeout time.Duration
}

// Object is an object that causes exactly one request email: its
// conditions carry EmailSent, Ready and EmailDelivered.
type Object interface {
	client.Object
	conditions.Setter
}

// Email is the request email an object sends with a Message-Id.
type Email func(messageID string) mailer.Request

// Kind is what the send path needs to know of one kind of object.
type Kind[T Object] struct {
	// Name is the kind's name in messages, e.g. "MailgunCluster".
	Name string
	// MessageIDPrefix starts the local part of the kind's Message-Ids,
	// e.g. "mailguncluster" in <mailguncluster.UID@domain>.
	MessageIDPrefix string
	// Finalizer is added with the first claim.
	Finalizer string
	// StatusMessageID points at obj's status.messageID: written on
	// acceptance, cleared with a copied record, and read as the record of
	// objects written before the send record existed.
	StatusMessageID func(obj T) *string
	// SetProvisioned marks obj's infrastructure provisioned (its email was
	// accepted) or not (a copy that dropped another object's record).
	SetProvisioned func(obj T, provisioned bool)
	// Claimed, if set, fixes in obj's spec what the email names and must
	// never change once it may have gone out (a MailgunMachine's provider
	// ID); it is written with the first claim, in the same locked write.
	Claimed func(obj T)
	// Copied, if set, says why obj, which holds no send record of its own,
	// must send nothing (a MailgunMachine copied with another one's
	// provider ID): the EmailSent condition's reason and message; "" if it
	// may send.
	Copied func(obj T) (reason, message string)
	// Paused reports whether obj (as the apiserver last returned it) or
	// its Cluster, read live from r, is paused, or the Cluster is gone;
	// checked right before a send, past the cache.
	Paused func(ctx context.Context, r client.Reader, obj T) (bool, error)
}

// Driver sends the request emails of one kind of object; it keeps what it
// remembers per object between reconciles.
type Driver[T Object] struct {
	Sender
	Kind   Kind[T]
	memory memory
	// own is what the driver's own writes replaced, for CacheBehind.
	own ownWrites
}

// NewDriver returns the driver for kind.
func NewDriver[T Object](s Sender, kind Kind[T]) *Driver[T] {
	if s.Metrics != nil {
		// Exported at 0 from the start: a series that appears only with
		// the first email breaks rate() and absent() alerts.
		s.Metrics.EmailsSent.WithLabelValues(kind.Name)
	}
	return &Driver[T]{Sender: s, Kind: kind}
}
