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
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/config"
)

// olmV0Owned marks obj the way OLM v0 marks a Secret or ConfigMap it
// applied from a bundle: an owner reference to the CSV and olm.managed.
func olmV0Owned(obj client.Object) client.Object {
	obj.SetOwnerReferences([]metav1.OwnerReference{
		{APIVersion: "operators.coreos.com/v1alpha1", Kind: "ClusterServiceVersion", Name: "cluster-api-provider-mailgun.v0.1.0", UID: "csv-uid"},
		{APIVersion: "v1", Kind: "ConfigMap", Name: "users-own-owner", UID: "other-uid"},
	})
	obj.SetLabels(map[string]string{"olm.managed": "true", "operators.coreos.com/cluster-api-provider-mailgun.capmg-system": "", "team": "infra"})
	return obj
}

// clusterctlOwned marks obj as clusterctl init applies a provider's
// components.
func clusterctlOwned(obj client.Object) client.Object {
	obj.SetLabels(map[string]string{"cluster.x-k8s.io/provider": "infrastructure-mailgun", "team": "infra"})
	return obj
}

func named(name string, obj client.Object) client.Object {
	obj.SetNamespace(ns)
	obj.SetName(name)
	return obj
}

func TestUserObjectsEnsure(t *testing.T) {
	userKey := &corev1.Secret{Data: map[string][]byte{config.SecretAPIKeyKey: []byte("user-key")}}
	userConfig := &corev1.ConfigMap{Data: map[string]string{config.ConfigMapDomainKey: "user.example.com", "extra": "kept"}}
	initialSecret := named(config.InitialSecretName, &corev1.Secret{Data: map[string][]byte{config.SecretAPIKeyKey: []byte("installer-key")}})
	initialConfig := named(config.InitialConfigMapName, &corev1.ConfigMap{Data: map[string]string{
		config.ConfigMapDomainKey: "installer.example.com", config.ConfigMapRecipientKey: "ops@example.com",
	}})
	userData := map[string]string{config.ConfigMapDomainKey: "user.example.com", "extra": "kept"}

	tests := []struct {
		name       string
		objs       []client.Object
		wantKey    string
		wantConfig map[string]string
		// wantCreated: the operator created both objects (else it left the
		// user's content alone).
		wantCreated bool
	}{
		{
			name:        "nothing there: created with empty values to fill in",
			wantConfig:  map[string]string{config.ConfigMapDomainKey: "", config.ConfigMapRecipientKey: "", config.ConfigMapAPIBaseKey: ""},
			wantCreated: true,
		},
		{
			name:    "created from the installer's initial objects",
			objs:    []client.Object{initialSecret, initialConfig},
			wantKey: "installer-key",
			wantConfig: map[string]string{
				config.ConfigMapDomainKey: "installer.example.com", config.ConfigMapRecipientKey: "ops@example.com", config.ConfigMapAPIBaseKey: "",
			},
			wantCreated: true,
		},
		{
			name: "the user's objects win over the initial ones",
			objs: []client.Object{initialSecret, initialConfig,
				named(config.DefaultSecretName, userKey.DeepCopy()), named(config.DefaultConfigMapName, userConfig.DeepCopy())},
			wantKey:    "user-key",
			wantConfig: userData,
		},
		{
			name: "taken over from OLM v0, which would garbage-collect them with the old CSV",
			objs: []client.Object{olmV0Owned(named(config.DefaultSecretName, userKey.DeepCopy())),
				olmV0Owned(named(config.DefaultConfigMapName, userConfig.DeepCopy()))},
			wantKey:    "user-key",
			wantConfig: userData,
		},
		{
			name: "taken over from clusterctl, which deletes them on upgrade",
			objs: []client.Object{initialSecret, clusterctlOwned(named(config.DefaultSecretName, userKey.DeepCopy())),
				clusterctlOwned(named(config.DefaultConfigMapName, userConfig.DeepCopy()))},
			wantKey:    "user-key",
			wantConfig: userData,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			c := fake.NewClientBuilder().WithObjects(tt.objs...).Build()
			u := config.UserObjects{Client: c, Reader: c, Namespace: ns, SecretName: config.DefaultSecretName, ConfigMapName: config.DefaultConfigMapName}
			done, err := u.Ensure(ctx)
			if err != nil {
				t.Fatalf("Ensure: %v", err)
			}
			t.Logf("Ensure: %q", done)
			secret, cm := &corev1.Secret{}, &corev1.ConfigMap{}
			mustGet(t, c, config.DefaultSecretName, secret)
			mustGet(t, c, config.DefaultConfigMapName, cm)
			if got := string(secret.Data[config.SecretAPIKeyKey]); got != tt.wantKey {
				t.Errorf("api_key = %q, want %q", got, tt.wantKey)
			}
			if _, ok := secret.Data[config.SecretAPIKeyKey]; !ok {
				t.Errorf("Secret has no %s key to fill in: %v", config.SecretAPIKeyKey, secret.Data)
			}
			if !maps.Equal(cm.Data, tt.wantConfig) {
				t.Errorf("ConfigMap data = %v, want %v", cm.Data, tt.wantConfig)
			}
			for _, obj := range []client.Object{secret, cm} {
				for _, ref := range obj.GetOwnerReferences() {
					if ref.Kind == "ClusterServiceVersion" {
						t.Errorf("%s still owned by a CSV: %v", obj.GetName(), ref)
					}
				}
				for k := range obj.GetLabels() {
					if k == "olm.managed" || k == "cluster.x-k8s.io/provider" || k == "operators.coreos.com/cluster-api-provider-mailgun.capmg-system" {
						t.Errorf("%s keeps the installer's label %s", obj.GetName(), k)
					}
				}
				created := obj.GetAnnotations()["kubernetes.io/description"] == config.UserObjectDescription
				if created != tt.wantCreated {
					t.Errorf("%s created by the operator = %v, want %v", obj.GetName(), created, tt.wantCreated)
				}
			}
			// A second start writes nothing.
			before := []string{secret.ResourceVersion, cm.ResourceVersion}
			if done, err := u.Ensure(ctx); err != nil || len(done) != 0 {
				t.Fatalf("second Ensure = %q, %v; want nothing done", done, err)
			}
			mustGet(t, c, config.DefaultSecretName, secret)
			mustGet(t, c, config.DefaultConfigMapName, cm)
			if after := []string{secret.ResourceVersion, cm.ResourceVersion}; before[0] != after[0] || before[1] != after[1] {
				t.Errorf("second Ensure wrote: resourceVersions %v -> %v", before, after)
			}
		})
	}
}

// TestUserObjectsKeepOtherOwners: taking an object over from OLM removes
// only OLM's owner reference and labels.
func TestUserObjectsKeepOtherOwners(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithObjects(olmV0Owned(named(config.DefaultConfigMapName, &corev1.ConfigMap{}))).Build()
	u := config.UserObjects{Client: c, Reader: c, Namespace: ns, SecretName: config.DefaultSecretName, ConfigMapName: config.DefaultConfigMapName}
	if _, err := u.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{}
	mustGet(t, c, config.DefaultConfigMapName, cm)
	if refs := cm.GetOwnerReferences(); len(refs) != 1 || refs[0].Name != "users-own-owner" {
		t.Errorf("owner references = %v, want only the user's own", refs)
	}
	if l := cm.GetLabels(); len(l) != 1 || l["team"] != "infra" {
		t.Errorf("labels = %v, want only the user's own", l)
	}
}

func mustGet(t *testing.T, c client.Client, name string, obj client.Object) {
	t.Helper()
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, obj); err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
}
