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

package config_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/config"
)

// TestSecretReaderRereadsOnlyChangedSecrets: the data of a Secret is read
// past the cache once, and again only after the Secret changed; a deleted
// Secret is not found, and its data is not kept.
func TestSecretReaderRereadsOnlyChangedSecrets(t *testing.T) {
	ctx := context.Background()
	live := 0
	c := fake.NewClientBuilder().WithObjects(secret("key-1")).Build()
	counting := interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Secret); ok {
				live++
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	r := &config.SecretReader{Metadata: c, Live: counting}
	key := client.ObjectKey{Namespace: ns, Name: config.DefaultSecretName}
	read := func(want string) {
		t.Helper()
		got := &corev1.Secret{}
		if err := r.GetSecret(ctx, key, got); err != nil {
			t.Fatalf("GetSecret: %v", err)
		}
		if string(got.Data[config.SecretAPIKeyKey]) != want {
			t.Fatalf("api_key %q, want %q", got.Data[config.SecretAPIKeyKey], want)
		}
	}

	read("key-1")
	read("key-1")
	if live != 1 {
		t.Errorf("%d reads past the cache for an unchanged Secret, want 1", live)
	}
	changed := &corev1.Secret{}
	if err := c.Get(ctx, key, changed); err != nil {
		t.Fatal(err)
	}
	changed.Data[config.SecretAPIKeyKey] = []byte("key-2")
	if err := c.Update(ctx, changed); err != nil {
		t.Fatal(err)
	}
	read("key-2")
	if live != 2 {
		t.Errorf("%d reads past the cache after one change, want 2", live)
	}
	if err := c.Delete(ctx, changed); err != nil {
		t.Fatal(err)
	}
	if err := r.GetSecret(ctx, key, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("GetSecret of a deleted Secret: %v, want NotFound", err)
	}
}
