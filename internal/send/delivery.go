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

package send

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
)

// deliveryOutcomes maps a final delivery state to the EmailDelivered
// condition, the event type and the metric label.
var deliveryOutcomes = map[mailer.DeliveryState]struct {
	status    metav1.ConditionStatus
	reason    string
	eventType string
	metric    string
}{
	mailer.Delivered:          {metav1.ConditionTrue, infrav1.DeliveredReason, corev1.EventTypeNormal, "delivered"},
	mailer.DeliveryComplained: {metav1.ConditionTrue, infrav1.ComplainedReason, corev1.EventTypeWarning, "complained"},
	mailer.DeliveryFailed:     {metav1.ConditionFalse, infrav1.DeliveryFailedReason, corev1.EventTypeWarning, "failed"},
	mailer.DeliveryRejected:   {metav1.ConditionFalse, infrav1.DeliveryRejectedReason, corev1.EventTypeWarning, "rejected"},
}

// trackDelivery follows an accepted email until it is delivered, bounces
// or is rejected, for at most DeliveryTrackingTimeout, through the
// DeliveryTracker, which brings the object back when news arrives. Tracking
// is best-effort and never affects EmailSent or Ready.
func (d *Driver[T]) trackDelivery(ctx context.Context, obj T, identity *infrav1.MailgunClusterIdentityReference, id string) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	current := conditions.Get(obj, infrav1.EmailDeliveredCondition)
	key := client.ObjectKeyFromObject(obj)
	if current != nil && deliveryFinal(current.Reason) {
		// The outcome is saved: the tracker may forget the email.
		d.Deliveries.Stop(d.Kind.Name, key)
		return ctrl.Result{}, nil
	}
	if current == nil {
		setDeliveryPending(obj, id)
	}

	acceptedAt := time.Now()
	if sent := conditions.Get(obj, infrav1.EmailSentCondition); sent != nil && sent.Status == metav1.ConditionTrue && !sent.LastTransitionTime.IsZero() {
		acceptedAt = sent.LastTransitionTime.Time
	}
	age := time.Since(acceptedAt)
	left := d.DeliveryTrackingTimeout - age
	if left <= 0 {
		d.Deliveries.Stop(d.Kind.Name, key)
		conditions.Set(obj, metav1.Condition{
			Type: infrav1.EmailDeliveredCondition, Status: metav1.ConditionUnknown, Reason: infrav1.DeliveryTrackingExpiredReason,
			Message: fmt.Sprintf("no delivery outcome for %s within %s of its acceptance; check Mailgun's logs", id, d.DeliveryTrackingTimeout),
		})
		d.Metrics.Deliveries.WithLabelValues(d.Kind.Name, "expired").Inc()
		return ctrl.Result{}, nil
	}

	dl, followed := d.Deliveries.Lookup(id)
	if !followed {
		settings, unusable, err := d.Settings.For(ctx, obj.GetNamespace(), identity)
		if err == nil && unusable != nil {
			err = errors.New(unusable.Message)
		}
		if err != nil {
			// Without settings we cannot look; the configuration watch or
			// this retry, less often as the email ages, will. The send
			// path reports the settings in a condition.
			after := min(max(age/4, d.Deliveries.Interval), maxPollBackoff*d.Deliveries.Interval)
			log.V(1).Info("No usable settings to follow the delivery with; will try again", "error", err.Error(), "after", after)
			return ctrl.Result{RequeueAfter: after}, nil
		}
		d.Deliveries.Follow(d.Kind.Name, key, settings, id, acceptedAt)
		return ctrl.Result{RequeueAfter: left}, nil
	}

	if outcome, final := deliveryOutcomes[dl.State]; final {
		msg := fmt.Sprintf("%s at %s", dl.State, dl.At.Format(time.RFC3339))
		if dl.Detail != "" {
			msg += ": " + dl.Detail
		}
		conditions.Set(obj, metav1.Condition{Type: infrav1.EmailDeliveredCondition, Status: outcome.status, Reason: outcome.reason, Message: msg})
		d.Metrics.Deliveries.WithLabelValues(d.Kind.Name, outcome.metric).Inc()
		d.memory.forget(key)
		d.Recorder.Eventf(obj, nil, outcome.eventType, outcome.reason, "TrackDelivery", "request email %s: %s", id, msg)
		log.Info("Delivery outcome of the request email", "messageID", id, "state", dl.State, "detail", dl.Detail)
		return ctrl.Result{}, nil
	}
	if dl.State == mailer.DeliveryRetrying {
		conditions.Set(obj, metav1.Condition{
			Type: infrav1.EmailDeliveredCondition, Status: metav1.ConditionUnknown, Reason: infrav1.DeliveryRetryingReason,
			Message: fmt.Sprintf("a delivery attempt failed temporarily at %s and Mailgun retries: %s", dl.At.Format(time.RFC3339), dl.Detail),
		})
	}
	// The tracker brings the object back with news; this only ends the
	// tracking in time.
	return ctrl.Result{RequeueAfter: left}, nil
}

// deliveryFinal reports whether an EmailDelivered reason is final: one of
// the outcomes above, or tracking gave up.
func deliveryFinal(reason string) bool {
	if reason == infrav1.DeliveryTrackingExpiredReason {
		return true
	}
	for _, o := range deliveryOutcomes {
		if o.reason == reason {
			return true
		}
	}
	return false
}

// setDeliveryPending starts following the delivery of a newly accepted email.
func setDeliveryPending(obj Object, id string) {
	conditions.Set(obj, metav1.Condition{
		Type: infrav1.EmailDeliveredCondition, Status: metav1.ConditionUnknown, Reason: infrav1.DeliveryPendingReason,
		Message: fmt.Sprintf("waiting for Mailgun to deliver %s", id),
	})
}
