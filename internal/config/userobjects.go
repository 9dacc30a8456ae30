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
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Names of the objects an installer may ship with first values for the
// settings (clusterctl fills them from its MAILGUN_* variables). They are
// the installer's: it may reset or delete them on every upgrade, so the
// operator reads them only to create the user's objects.
const (
	InitialSecretName    = "capmg-mailgun-initial-credentials" //nolint:gosec // G101: the name of a Secret object, not a credential
	InitialConfigMapName = "capmg-mailgun-initial-config"
)

// UserObjectDescription is the description annotation of the settings
// objects the operator creates.
const UserObjectDescription = "Mailgun settings of cluster-api-provider-mailgun. Yours: no installer ships, " +
	"resets or deletes this object; the operator created it once and never writes it again."

// UserObjects makes sure the Secret and ConfigMap the operator reads its
// settings from exist and belong to the user, not to an installer.
//
// Installers re-apply what they ship: OLM v0 on every install plan, OLM v1
// by drift correction, clusterctl upgrade by deleting and re-creating the
// provider's objects. So no installer ships these two objects. The
// operator creates each one that is missing, from the installer's initial
// object if there is one (else with empty values to fill in), and takes
// over one an older release's installer owned by removing the marks that
// installer finds its objects by: OLM v0's owner reference to its CSV
// (garbage collected with the CSV once the upgrade is done) and labels,
// and clusterctl's provider label (deleted by clusterctl upgrade and
// delete). Nothing else of an existing object is touched.
type UserObjects struct {
	// Client writes; Reader reads without a cache (the manager's cache
	// holds no Secret's data and only the user's ConfigMap).
	Client        client.Client
	Reader        client.Reader
	Namespace     string
	SecretName    string
	ConfigMapName string
}

// Ensure creates or takes over both objects and says what it did; it is
// idempotent, and safe for several replicas at once (a lost race to
// create, or a conflicting write, is an error the caller retries).
func (u UserObjects) Ensure(ctx context.Context) (done []string, err error) {
	secret := &corev1.Secret{}
	done, err = u.ensure(ctx, "Secret", secret, u.SecretName, InitialSecretName, func(seed client.Object) {
		secret.Type = corev1.SecretTypeOpaque
		secret.Data = map[string][]byte{SecretAPIKeyKey: {}}
		if s, ok := seed.(*corev1.Secret); ok {
			maps.Copy(secret.Data, s.Data)
		}
	})
	if err != nil {
		return done, err
	}
	cm := &corev1.ConfigMap{}
	more, err := u.ensure(ctx, "ConfigMap", cm, u.ConfigMapName, InitialConfigMapName, func(seed client.Object) {
		cm.Data = map[string]string{ConfigMapDomainKey: "", ConfigMapRecipientKey: "", ConfigMapAPIBaseKey: ""}
		if c, ok := seed.(*corev1.ConfigMap); ok {
			maps.Copy(cm.Data, c.Data)
		}
	})
	return append(done, more...), err
}

// ensure gets obj by name; if it is missing, fill sets its content from
// the initial object (nil if there is none) and it is created; if it
// exists, installer ownership is removed from it.
func (u UserObjects) ensure(ctx context.Context, kind string, obj client.Object, name, initialName string, fill func(seed client.Object)) ([]string, error) {
	key := types.NamespacedName{Namespace: u.Namespace, Name: name}
	err := u.Reader.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		seed := obj.DeepCopyObject().(client.Object)
		switch err := u.Reader.Get(ctx, types.NamespacedName{Namespace: u.Namespace, Name: initialName}, seed); {
		case apierrors.IsNotFound(err):
			seed = nil
		case err != nil:
			return nil, fmt.Errorf("reading the initial settings %s %s/%s: %w", kind, u.Namespace, initialName, err)
		}
		from := "with empty values"
		if seed != nil {
			from = "from " + initialName
		}
		obj.SetNamespace(u.Namespace)
		obj.SetName(name)
		obj.SetAnnotations(map[string]string{descriptionAnnotation: UserObjectDescription})
		fill(seed)
		if err := u.Client.Create(ctx, obj); err != nil {
			return nil, fmt.Errorf("creating the settings %s %s: %w", kind, key, err)
		}
		return []string{fmt.Sprintf("created %s %s %s", kind, key, from)}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the settings %s %s: %w", kind, key, err)
	}
	before := obj.DeepCopyObject().(client.Object)
	if !disown(obj) {
		return nil, nil
	}
	if err := u.Client.Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return nil, fmt.Errorf("taking the settings %s %s over from its installer: %w", kind, key, err)
	}
	return []string{fmt.Sprintf("took %s %s over from its installer", kind, key)}, nil
}

const descriptionAnnotation = "kubernetes.io/description"

// disown removes every mark by which an installer finds obj as its own,
// and reports whether there was one.
func disown(obj metav1.Object) bool {
	changed := false
	var refs []metav1.OwnerReference
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Kind == "ClusterServiceVersion" && strings.HasPrefix(ref.APIVersion, "operators.coreos.com/") {
			changed = true
			continue
		}
		refs = append(refs, ref)
	}
	obj.SetOwnerReferences(refs)
	labels := obj.GetLabels()
	for k := range labels {
		if isInstallerLabel(k) {
			delete(labels, k)
			changed = true
		}
	}
	obj.SetLabels(labels)
	return changed
}

// isInstallerLabel: OLM v0 marks what it applied with olm.managed (and
// cluster-scoped objects with olm.owner*), its operator API with
// operators.coreos.com/<operator>; clusterctl selects a provider's
// objects by cluster.x-k8s.io/provider.
func isInstallerLabel(k string) bool {
	return k == "olm.managed" || strings.HasPrefix(k, "olm.owner") ||
		strings.HasPrefix(k, "operators.coreos.com/") || k == "cluster.x-k8s.io/provider"
}
