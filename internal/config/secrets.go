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

package config

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SecretReader reads Secrets without holding every Secret of the
// operator's namespace, which it may share with other operators: the cache
// keeps only their metadata (Metadata), and the data of a Secret the
// operator asks for is read past the cache (Live) and kept until the
// metadata shows a new resourceVersion. So the operator holds the data of
// the Secrets it uses and of no other, and rereads one only when it
// changed.
type SecretReader struct {
	// Metadata reads PartialObjectMetadata of Secrets, usually the
	// manager's cache.
	Metadata client.Reader
	// Live reads whole Secrets, usually the manager's API reader.
	Live client.Reader

	mu   sync.Mutex
	data map[client.ObjectKey]*corev1.Secret
}

// GetSecret reads the Secret key into secret.
func (r *SecretReader) GetSecret(ctx context.Context, key client.ObjectKey, secret *corev1.Secret) error {
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := r.Metadata.Get(ctx, key, meta); err != nil {
		r.forget(key)
		return err
	}
	r.mu.Lock()
	kept := r.data[key]
	r.mu.Unlock()
	if kept != nil && kept.ResourceVersion == meta.ResourceVersion {
		kept.DeepCopyInto(secret)
		return nil
	}
	if err := r.Live.Get(ctx, key, secret); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.data == nil {
		r.data = map[client.ObjectKey]*corev1.Secret{}
	}
	r.data[key] = secret.DeepCopy()
	return nil
}

func (r *SecretReader) forget(key client.ObjectKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.data, key)
}
