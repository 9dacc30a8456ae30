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

package controllers

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/send"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/sendprotocol"
)

// TestMemoryIsDroppedWhenObjectsGo: what the reconciler keeps per object
// (hold, failure count, the email its delivery tracker follows) is dropped
// when the object is deleted, also when it disappears without our
// finalizer, so that a long-running operator does not grow with every
// MailgunCluster it saw.
func TestMemoryIsDroppedWhenObjectsGo(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := infrav1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	deleting := &infrav1.MailgunCluster{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: "deleting", UID: "uid-deleting",
		Finalizers: []string{infrav1.ClusterFinalizer}, DeletionTimestamp: &metav1.Time{Time: time.Now()},
	}}
	gone := &infrav1.MailgunCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gone", UID: "uid-gone"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(deleting).WithStatusSubresource(deleting).Build()
	r := NewMailgunClusterReconciler(send.Sender{
		Client: c, Recorder: events.NewFakeRecorder(10), Protocol: sendprotocol.Protocol{ConflictDelay: time.Second},
		Settings: fixedSettings{}, Deliveries: &send.DeliveryTracker{Interval: time.Hour}, DeliveryTrackingTimeout: 24 * time.Hour,
	})
	for _, mc := range []*infrav1.MailgunCluster{deleting, gone} {
		remember(t, r, mc)
	}
	if n := r.Remembered(); n < 2 {
		t.Fatalf("%d entries remembered before the objects went, want their memory and their followed emails", n)
	}
	for _, mc := range []*infrav1.MailgunCluster{deleting, gone} {
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(mc)}); err != nil {
			t.Fatalf("reconciling %s: %v", mc.Name, err)
		}
	}
	if n := r.Remembered(); n != 0 {
		t.Errorf("%d objects still remembered after they went", n)
	}
}

// TestObjectGoneWhileReconcilingIsNotAnError: when the object disappears
// between the read and the final write (clusterctl move deletes the source
// objects), the reconcile ends quietly: no error, no requeue.
func TestObjectGoneWhileReconcilingIsNotAnError(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := infrav1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mc := &infrav1.MailgunCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "moving", UID: "uid-moving"}}
	gone := apierrors.NewNotFound(infrav1.GroupVersion.WithResource("mailgunclusters").GroupResource(), mc.Name)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(mc).WithStatusSubresource(mc).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourceUpdate: func(context.Context, client.Client, string, client.Object, ...client.SubResourceUpdateOption) error {
				return gone
			},
		}).Build()
	r := NewMailgunClusterReconciler(send.Sender{Client: c, Recorder: events.NewFakeRecorder(10), Protocol: sendprotocol.Protocol{ConflictDelay: time.Second},
		Deliveries: &send.DeliveryTracker{Interval: time.Hour}})
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(mc)})
	if err != nil || !res.IsZero() {
		t.Errorf("Reconcile = %+v, %v; want no requeue and no error", res, err)
	}
}

// remember makes r remember mc, as it does between reconciles of an
// accepted email: a refused resend request, and the email followed.
func remember(t *testing.T, r *MailgunClusterReconciler, mc *infrav1.MailgunCluster) {
	t.Helper()
	obj := mc.DeepCopy()
	obj.Annotations = map[string]string{
		infrav1.AcceptedMessageIDAnnotation: "<1.A@mg.example.com>",
		infrav1.ResendRequestAnnotation:     " ",
	}
	if _, err := r.EnsureSent(context.Background(), send.NewScope(obj, r.Client), nil, clusterEmail(obj)); err != nil {
		t.Fatalf("remembering %s: %v", mc.Name, err)
	}
}
