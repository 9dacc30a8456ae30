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

package v1beta1

// Condition types set on a MailgunCluster. Ready and Paused follow the
// Cluster API v1beta2 contract; EmailSent is this provider's own.
const (
	// ReadyCondition is True once the request email was accepted by Mailgun.
	// It mirrors EmailSent; Cluster API mirrors it into the Cluster's
	// InfrastructureReady condition.
	ReadyCondition = "Ready"

	// EmailSentCondition reports the state of the request email.
	EmailSentCondition = "EmailSent"

	// PausedCondition is True while reconciliation is paused, through the
	// Cluster's spec.paused or the cluster.x-k8s.io/paused annotation.
	PausedCondition = "Paused"

	// EmailDeliveredCondition follows the accepted email through Mailgun's
	// events: Unknown while delivery is pending, True once delivered, False
	// when it bounced or was rejected.
	EmailDeliveredCondition = "EmailDelivered"
)

// Reasons for the EmailDelivered condition.
const (
	// DeliveryPendingReason: accepted; no delivery outcome yet.
	DeliveryPendingReason = "DeliveryPending"
	// DeliveryRetryingReason: a delivery attempt failed temporarily and
	// Mailgun retries it.
	DeliveryRetryingReason = "DeliveryRetrying"
	// DeliveredReason: the recipient's mail server took the email.
	DeliveredReason = "Delivered"
	// ComplainedReason: delivered, and the recipient marked it as spam.
	ComplainedReason = "Complained"
	// DeliveryFailedReason: delivery failed permanently (a bounce).
	DeliveryFailedReason = "DeliveryFailed"
	// DeliveryRejectedReason: Mailgun refused to deliver the email.
	DeliveryRejectedReason = "DeliveryRejected"
	// DeliveryTrackingExpiredReason: no outcome within the tracking window
	// (--delivery-tracking-timeout); the operator stopped looking.
	DeliveryTrackingExpiredReason = "DeliveryTrackingExpired"
)

// Reasons for the EmailSent (and mirrored Ready) condition. Each is
// documented, with its fix, in docs/operations.md.
const (
	// EmailAcceptedReason: Mailgun accepted the request email.
	EmailAcceptedReason = "EmailAccepted"

	// WaitingForClusterReason: no Cluster owns the MailgunCluster yet; Cluster
	// API sets the owner reference once a Cluster's infrastructureRef points
	// at it.
	WaitingForClusterReason = "WaitingForCluster"

	// WaitingForClusterAPIReason: Cluster API is not installed (the apiserver
	// does not serve its Cluster kind); the operator watches for it and goes
	// on once it is.
	WaitingForClusterAPIReason = "WaitingForClusterAPI"

	// NotClusterInfrastructureReason: the owner Cluster's
	// spec.infrastructureRef names another object, so this MailgunCluster is
	// not its infrastructure and sends nothing.
	NotClusterInfrastructureReason = "NotClusterInfrastructure"

	// MailgunNotConfiguredReason: the operator lacks Mailgun settings (domain,
	// API key or recipient), or they, or the MailgunClusterIdentity's, are
	// invalid.
	MailgunNotConfiguredReason = "MailgunNotConfigured"

	// IdentityNotFoundReason: spec.identityRef names a MailgunClusterIdentity
	// that does not exist.
	IdentityNotFoundReason = "IdentityNotFound"

	// IdentityNotAllowedReason: the MailgunClusterIdentity's
	// spec.allowedNamespaces does not allow the MailgunCluster's namespace.
	IdentityNotAllowedReason = "IdentityNotAllowed"

	// IdentitySecretNotFoundReason: the MailgunClusterIdentity's Secret does
	// not exist in the operator's namespace, or has no api_key.
	IdentitySecretNotFoundReason = "IdentitySecretNotFound"

	// SettingsChangedDuringSendReason: a send attempt whose outcome is not
	// known was made with another Mailgun domain than the settings now
	// give, so Mailgun's events cannot tell whether it was accepted. Nothing
	// is sent until the settings give that domain again (or the user, who
	// knows the email did not go out, removes the claim).
	SettingsChangedDuringSendReason = "SettingsChangedDuringSend"

	// InvalidCredentialsReason: Mailgun answered 401; the API key is wrong or
	// belongs to another region.
	InvalidCredentialsReason = "InvalidCredentials"

	// RecipientNotAuthorizedReason: Mailgun answered 403, usually a sandbox
	// domain whose authorised recipients do not include the recipient.
	RecipientNotAuthorizedReason = "RecipientNotAuthorized"

	// MessageRejectedReason: Mailgun answered 400 and will not accept this
	// message as it is. Terminal until the spec or configuration changes.
	MessageRejectedReason = "MessageRejected"

	// RateLimitedReason: Mailgun answered 429; the send is retried after the
	// rate-limit window.
	RateLimitedReason = "RateLimited"

	// MailgunUnavailableReason: Mailgun answered 5xx, or could not be
	// reached, to a domain check or an events lookup; retried with a capped
	// backoff.
	MailgunUnavailableReason = "MailgunUnavailable"

	// SendOutcomeUnknownReason: a send attempt ended without a definite
	// answer (timeout, connection reset, 5xx, 408). The controller does not
	// send again until Mailgun's events have had the settle time to show the
	// message and do not.
	SendOutcomeUnknownReason = "SendOutcomeUnknown"

	// InvalidAnnotationReason: a send-record annotation holds a value this
	// operator never writes (e.g. a Message-Id with line breaks, which
	// would inject mail headers); nothing is sent until it is removed.
	InvalidAnnotationReason = "InvalidAnnotation"

	// DeletingReason: the MailgunCluster or MailgunMachine is being deleted.
	DeletingReason = "Deleting"
)

// Reasons for a MailgunMachine's EmailSent (and mirrored Ready) condition
// while it waits for what Cluster API provides before a machine can be
// requested. Each is documented, with its fix, in docs/operations.md.
const (
	// WaitingForMachineReason: no Machine owns the MailgunMachine yet, or
	// the owner Machine does not exist.
	WaitingForMachineReason = "WaitingForMachine"

	// NotMachineInfrastructureReason: the owner Machine's
	// spec.infrastructureRef names another object, so this MailgunMachine
	// is not its infrastructure and sends nothing.
	NotMachineInfrastructureReason = "NotMachineInfrastructure"

	// WaitingForClusterInfrastructureReason: the Cluster's infrastructure
	// (its MailgunCluster's email) is not provisioned yet.
	WaitingForClusterInfrastructureReason = "WaitingForClusterInfrastructure"

	// WaitingForControlPlaneInitializedReason: a worker Machine waits for
	// its cluster's control plane to be initialized before the bootstrap
	// provider writes its bootstrap data.
	WaitingForControlPlaneInitializedReason = "WaitingForControlPlaneInitialized"

	// WaitingForBootstrapDataReason: the Machine has no
	// spec.bootstrap.dataSecretName yet.
	WaitingForBootstrapDataReason = "WaitingForBootstrapData"

	// ProviderIDCopiedReason: the MailgunMachine was created with a
	// spec.providerID but without a send record of its own: it is a copy
	// of another MailgunMachine, whose machine that provider ID names.
	// Nothing is sent for it.
	ProviderIDCopiedReason = "ProviderIDCopied"
)

// Reasons for the Paused condition.
const (
	// PausedReason: reconciliation is paused.
	PausedReason = "Paused"
	// NotPausedReason: reconciliation is not paused.
	NotPausedReason = "NotPaused"
)
