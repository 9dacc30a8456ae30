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

package operator

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/config"
)

// TestNotReadyUntilTheSettingsObjectsAreTheUsers: while the settings
// objects cannot be taken over from their installer, the readiness check
// fails and the starter tries again; once they are, it passes. Under OLM v0
// this is what keeps the old CSV, and what it owns, until the takeover.
func TestNotReadyUntilTheSettingsObjectsAreTheUsers(t *testing.T) {
	const ns, failures = "capmg-system", 3
	owned := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: config.DefaultConfigMapName,
		Labels: map[string]string{"olm.managed": "true"}}}
	var patches atomic.Int32
	c := fake.NewClientBuilder().WithObjects(owned).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if patches.Add(1) <= failures {
				return errors.New("the apiserver is unavailable")
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	}).Build()
	s := &userObjectsStarter{
		objects:       config.UserObjects{Client: c, Reader: c, Namespace: ns, SecretName: config.DefaultSecretName, ConfigMapName: config.DefaultConfigMapName},
		log:           logr.Discard(),
		firstInterval: time.Millisecond,
		maxInterval:   4 * time.Millisecond,
	}
	if err := s.Check(nil); err == nil {
		t.Fatal("ready before the settings objects were taken over")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := s.Check(nil); err != nil {
		t.Errorf("not ready after the takeover: %v", err)
	}
	if n := patches.Load(); n != failures+1 {
		t.Errorf("%d takeover attempts, want %d: one per failure and the one that worked", n, failures+1)
	}
	got := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(owned), got); err != nil {
		t.Fatal(err)
	}
	if len(got.Labels) != 0 {
		t.Errorf("the ConfigMap still has its installer's labels %v", got.Labels)
	}
}

// TestSettingsObjectsStarterStopsWithTheManager: a starter that cannot
// succeed returns when the manager stops, not ready.
func TestSettingsObjectsStarterStopsWithTheManager(t *testing.T) {
	c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
			return errors.New("forbidden")
		},
	}).Build()
	s := &userObjectsStarter{
		objects:       config.UserObjects{Client: c, Reader: c, Namespace: "capmg-system", SecretName: "s", ConfigMapName: "c"},
		log:           logr.Discard(),
		firstInterval: time.Millisecond,
		maxInterval:   time.Hour,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := s.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Errorf("Start returned %v after the manager stopped", elapsed)
	}
	if err := s.Check(nil); err == nil {
		t.Error("ready although the settings objects were never created")
	}
}
