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

package controllers_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/config"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/operator"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/testenv"
)

// TestOwnerClusterMissing: a MailgunCluster whose owner Cluster does not
// exist says so in its condition, logs no error and sends nothing; once the
// Cluster is created it sends.
func TestOwnerClusterMissing(t *testing.T) {
	h := newHarness(t)
	h.startManager()
	cluster := testenv.ClusterFor(h.ns, "late")
	cluster.UID = "00000000-0000-0000-0000-00000000dead"
	mc := newMailgunCluster(h.ns, "late")
	ownedBy(mc, cluster)
	if err := h.c.Create(h.ctx, mc); err != nil {
		t.Fatal(err)
	}
	got := h.waitForReason("late", infrav1.WaitingForClusterReason, 20*time.Second)
	if msg := conditions.GetMessage(got, infrav1.EmailSentCondition); !strings.Contains(msg, "owner Cluster late does not exist") {
		t.Errorf("EmailSent message = %q, want it to name the missing owner Cluster", msg)
	}
	h.consistently(time.Second, "no email without the owner Cluster", func() (bool, string) {
		n := len(h.emailsFor("late"))
		return n == 0, fmt.Sprintf("%d emails", n)
	})
	// Cluster API's Cluster controller then points the owner reference at
	// the new Cluster, as it does for its infrastructureRef.
	late := h.createCluster("late")
	current := h.get("late")
	current.OwnerReferences = []metav1.OwnerReference{testenv.OwnerRef(late)}
	if err := h.c.Update(h.ctx, current); err != nil {
		t.Fatal(err)
	}
	h.waitForAccepted("late", 20*time.Second)
	h.noErrorLogged()
}

// TestAcceptedStaysReadyWithoutItsOwner: an object whose email was accepted
// keeps Ready when its owner cannot be confirmed (a cache that has not seen
// the Cluster yet after clusterctl move, a discovery failure at start; here
// the Cluster is deleted, as envtest runs no garbage collector): Ready and
// the Cluster's condition that mirrors it do not flap.
func TestAcceptedStaysReadyWithoutItsOwner(t *testing.T) {
	h := newHarness(t)
	h.startManager()
	cluster, _ := h.createOwned("orphaned")
	h.waitForAccepted("orphaned", 20*time.Second)
	if err := h.c.Delete(h.ctx, cluster); err != nil {
		t.Fatal(err)
	}
	mc := h.get("orphaned")
	mc.Labels = map[string]string{"touched": "yes"}
	if err := h.c.Update(h.ctx, mc); err != nil {
		t.Fatal(err)
	}
	h.consistently(2*time.Second, "Ready stays True", func() (bool, string) {
		c := conditions.Get(h.get("orphaned"), infrav1.ReadyCondition)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == infrav1.EmailAcceptedReason, fmt.Sprintf("Ready %+v", c)
	})
	h.noErrorLogged()
}

// TestOnlyTheInfrastructureRefTargetSends: a second MailgunCluster owned by
// the same Cluster, which the Cluster's spec.infrastructureRef does not
// name, sends nothing and says why.
func TestOnlyTheInfrastructureRefTargetSends(t *testing.T) {
	h := newHarness(t)
	h.startManager()
	cluster, _ := h.createOwned("main")
	extra := newMailgunCluster(h.ns, "extra")
	ownedBy(extra, cluster)
	if err := h.c.Create(h.ctx, extra); err != nil {
		t.Fatal(err)
	}
	h.waitForAccepted("main", 20*time.Second)
	got := h.waitForReason("extra", infrav1.NotClusterInfrastructureReason, 20*time.Second)
	if msg := conditions.GetMessage(got, infrav1.EmailSentCondition); !strings.Contains(msg, "spec.infrastructureRef") {
		t.Errorf("EmailSent message = %q, want it to point at spec.infrastructureRef", msg)
	}
	h.consistently(time.Second, "no email for the object the Cluster does not name", func() (bool, string) {
		n := len(h.emailsFor("extra"))
		return n == 0, fmt.Sprintf("%d emails", n)
	})
	h.noErrorLogged()
}

// TestSettingsChangeKeepsTheFilters: the requeue of every MailgunCluster on
// a settings change skips the objects the watch filters out (another
// instance's watch-filter label, the externally-managed annotation).
func TestSettingsChangeKeepsTheFilters(t *testing.T) {
	h := newHarness(t)
	h.startManager(func(o *operator.Options) { o.WatchFilterValue = "team-a" })
	h.createOwned("other-team", func(mc *infrav1.MailgunCluster) {
		mc.Labels = map[string]string{clusterv1.WatchLabel: "team-b"}
	})
	h.createOwned("external", func(mc *infrav1.MailgunCluster) {
		mc.Labels = map[string]string{clusterv1.WatchLabel: "team-a"}
		mc.Annotations = map[string]string{clusterv1.ManagedByAnnotation: "someone-else"}
	})
	h.createOwned("ours", func(mc *infrav1.MailgunCluster) {
		mc.Labels = map[string]string{clusterv1.WatchLabel: "team-a"}
	})
	h.waitForAccepted("ours", 20*time.Second)
	// A settings change requeues every MailgunCluster that may be waiting
	// for working settings.
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: config.DefaultConfigMapName},
		Data:       map[string]string{config.ConfigMapRecipientKey: testRecipient},
	}
	if err := setSettings(h, cm); err != nil {
		t.Fatal(err)
	}
	h.consistently(2*time.Second, "no email for the filtered-out objects", func() (bool, string) {
		n, m := len(h.emailsFor("other-team")), len(h.emailsFor("external"))
		return n+m == 0, fmt.Sprintf("%d emails for other-team, %d for external", n, m)
	})
	for _, name := range []string{"other-team", "external"} {
		if got := h.get(name); len(got.Status.Conditions) != 0 {
			t.Errorf("%s was reconciled: %+v", name, got.Status.Conditions)
		}
	}
}

// TestInjectedMessageIDIsRefused: a message-id annotation that is not one
// the operator writes (here with a line break that would add a Bcc header)
// is never sent with; the condition names the annotation. Removing it lets
// the operator choose its own.
func TestInjectedMessageIDIsRefused(t *testing.T) {
	h := newHarness(t)
	h.startManager()
	h.createOwned("injected", func(mc *infrav1.MailgunCluster) {
		mc.Annotations = map[string]string{infrav1.MessageIDAnnotation: "<mailguncluster.x@mg.example.com>\r\nBcc: everyone@example.com"}
	})
	got := h.waitForReason("injected", infrav1.InvalidAnnotationReason, 20*time.Second)
	if msg := conditions.GetMessage(got, infrav1.EmailSentCondition); !strings.Contains(msg, infrav1.MessageIDAnnotation) {
		t.Errorf("EmailSent message = %q, want it to name the annotation", msg)
	}
	h.consistently(time.Second, "no email with the injected Message-Id", func() (bool, string) {
		sends, _ := h.fake.Requests()
		return sends == 0, fmt.Sprintf("%d send requests", sends)
	})
	delete(got.Annotations, infrav1.MessageIDAnnotation)
	if err := h.c.Update(h.ctx, got); err != nil {
		t.Fatal(err)
	}
	h.waitForAccepted("injected", 20*time.Second)
	if n := len(h.emailsFor("injected")); n != 1 {
		t.Errorf("%d emails, want 1", n)
	}
}
