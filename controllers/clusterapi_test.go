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
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/mailgunfake"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/poll"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/testenv"
)

// TestInstalledBeforeClusterAPI: on a control plane without Cluster API the
// operator starts, says that it waits for Cluster API (log and the
// MailgunClusters' condition) and sends nothing; once Cluster API's CRDs
// are installed it goes on, without a restart, and sends.
func TestInstalledBeforeClusterAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane: run by make test, not make test-unit")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env, err := testenv.StartWith(testenv.Options{WithoutClusterAPI: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	fake := mailgunfake.Start(testDomain, testAPIKey)
	defer fake.Close()
	logs := testenv.RunOperator(ctx, t, "operator", env.Config, testenv.Settings(testDomain, testAPIKey, testRecipient, fake.APIBase()))

	const ns = "early"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	// One MailgunCluster no Cluster owns yet, and one that names an owner
	// Cluster (restored from a backup, say): looking that owner up is what
	// fails without Cluster API.
	first := newMailgunCluster(ns, "first")
	owned := newMailgunCluster(ns, "owned")
	ownedBy(owned, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "owned", UID: "00000000-0000-0000-0000-0000000000aa"}})
	for _, mc := range []*infrav1.MailgunCluster{first, owned} {
		if err := env.Client.Create(ctx, mc); err != nil {
			t.Fatal(err)
		}
	}
	waitReason := func(name, reason string) *infrav1.MailgunCluster {
		t.Helper()
		got := &infrav1.MailgunCluster{}
		if ok, state := poll.Until(ctx, 30*time.Second, 100*time.Millisecond, func() (bool, string) {
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, got); err != nil {
				return false, err.Error()
			}
			c := conditions.Get(got, infrav1.ReadyCondition)
			return c != nil && c.Reason == reason, fmt.Sprintf("Ready %+v", c)
		}); !ok {
			t.Fatalf("MailgunCluster %s not %s: %s\n%s", name, reason, state, logs.String())
		}
		return got
	}
	for _, name := range []string{"first", "owned"} {
		got := waitReason(name, infrav1.WaitingForClusterAPIReason)
		if msg := conditions.GetMessage(got, infrav1.ReadyCondition); !strings.Contains(msg, "Cluster API is not installed") {
			t.Errorf("%s: Ready message = %q, want it to say Cluster API is not installed", name, msg)
		}
	}
	if !strings.Contains(logs.String(), "Cluster API is not installed") {
		t.Errorf("the log does not say that the operator waits for Cluster API:\n%s", logs.String())
	}

	if err := env.InstallClusterAPI(); err != nil {
		t.Fatal(err)
	}
	// Cluster API's own reasons take over: no Cluster references the
	// first, the second's owner does not exist.
	waitReason("owned", infrav1.WaitingForClusterReason)
	waitReason("first", infrav1.WaitingForClusterReason)
	cluster := testenv.ClusterFor(ns, "first")
	if err := env.Client.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	current := &infrav1.MailgunCluster{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(first), current); err != nil {
		t.Fatal(err)
	}
	ownedBy(current, cluster)
	if err := env.Client.Update(ctx, current); err != nil {
		t.Fatal(err)
	}
	waitReason("first", infrav1.EmailAcceptedReason)
	if n := len(fake.MessagesWithVariable(mailer.VarCluster, ns+"/first")); n != 1 {
		t.Errorf("%d emails, want 1", n)
	}
	if n := len(fake.MessagesWithVariable(mailer.VarCluster, ns+"/owned")); n != 0 {
		t.Errorf("%d emails for the MailgunCluster whose owner does not exist, want 0", n)
	}
	for _, line := range logs.ErrorLines() {
		t.Errorf("the operator logged an error: %s", line)
	}
}
