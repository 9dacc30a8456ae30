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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/test/support/poll"
)

var (
	kubeadmConfigGVK       = schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmConfig"}
	kubeadmControlPlaneGVK = schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmControlPlane"}
)

// TestClusterClassRequestsOneEmailPerMachineAndRotatesTemplates runs Cluster
// API's ClusterClass and topology reconcilers: a Cluster of a ClusterClass
// whose infrastructure is a MailgunClusterTemplate and whose worker class
// uses a MailgunMachineTemplate gets 1 + 2 emails. Pointing the worker
// class at another MailgunMachineTemplate makes the topology controller
// rotate the Cluster's MailgunMachineTemplate (its server-side dry-run of
// the changed template is accepted) and roll the Machines: one email per
// new Machine, none for the ones it deletes. The test acts as the kubeadm
// control plane and bootstrap providers.
func TestClusterClassRequestsOneEmailPerMachineAndRotatesTemplates(t *testing.T) {
	f := &machineFixture{harness: newHarness(t)}
	f.startManager()
	f.startClusterAPI(capiTopology)
	h := f.harness
	f.actAsKubeadmProviders()

	machineTemplate := func(name, request string) *infrav1.MailgunMachineTemplate {
		return &infrav1.MailgunMachineTemplate{
			ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name},
			Spec: infrav1.MailgunMachineTemplateSpec{Template: infrav1.MailgunMachineTemplateResource{
				Spec: infrav1.MailgunMachineSpec{Priority: infrav1.PriorityUrgent, Request: request},
			}},
		}
	}
	controlPlaneTemplate := &unstructured.Unstructured{}
	controlPlaneTemplate.SetGroupVersionKind(schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmControlPlaneTemplate"})
	controlPlaneTemplate.SetNamespace(h.ns)
	controlPlaneTemplate.SetName("control-plane")
	workersConfig := &unstructured.Unstructured{}
	workersConfig.SetGroupVersionKind(schema.GroupVersionKind{Group: "bootstrap.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmConfigTemplate"})
	workersConfig.SetNamespace(h.ns)
	workersConfig.SetName("workers")
	if err := unstructured.SetNestedField(controlPlaneTemplate.Object, "cloud-config", "spec", "template", "spec", "kubeadmConfigSpec", "format"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(workersConfig.Object, "cloud-config", "spec", "template", "spec", "format"); err != nil {
		t.Fatal(err)
	}
	ref := func(obj client.Object) clusterv1.ClusterClassTemplateReference {
		gvk, err := h.c.GroupVersionKindFor(obj)
		if err != nil {
			t.Fatal(err)
		}
		return clusterv1.ClusterClassTemplateReference{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: obj.GetName()}
	}
	clusterTemplate := &infrav1.MailgunClusterTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "mailgun"},
		Spec:       infrav1.MailgunClusterTemplateSpec{Template: infrav1.MailgunClusterTemplateResource{Spec: newMailgunCluster(h.ns, "prod").Spec}},
	}
	controlPlaneMachines := machineTemplate("control-plane", "The control plane's machines.")
	workersV1 := machineTemplate("workers-v1", "8 GiB, please.")
	for _, obj := range []client.Object{clusterTemplate, controlPlaneTemplate, workersConfig, controlPlaneMachines, workersV1} {
		if err := h.c.Create(h.ctx, obj); err != nil {
			t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
		}
	}

	// Machines without a Node never become available: a rolling update
	// that may not make any unavailable (Cluster API's default) would wait
	// for the first new machine's Node forever.
	class := &clusterv1.ClusterClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "mailgun"},
		Spec: clusterv1.ClusterClassSpec{
			Infrastructure: clusterv1.InfrastructureClass{TemplateRef: ref(clusterTemplate)},
			ControlPlane: clusterv1.ControlPlaneClass{
				TemplateRef:           ref(controlPlaneTemplate),
				MachineInfrastructure: clusterv1.ControlPlaneClassMachineInfrastructureTemplate{TemplateRef: ref(controlPlaneMachines)},
			},
			Workers: clusterv1.WorkersClass{MachineDeployments: []clusterv1.MachineDeploymentClass{{
				Class:          "default-worker",
				Bootstrap:      clusterv1.MachineDeploymentClassBootstrapTemplate{TemplateRef: ref(workersConfig)},
				Infrastructure: clusterv1.MachineDeploymentClassInfrastructureTemplate{TemplateRef: ref(workersV1)},
				Rollout: clusterv1.MachineDeploymentClassRolloutSpec{Strategy: clusterv1.MachineDeploymentClassRolloutStrategy{
					Type: clusterv1.RollingUpdateMachineDeploymentStrategyType,
					RollingUpdate: clusterv1.MachineDeploymentClassRolloutStrategyRollingUpdate{
						MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(2)),
					},
				}},
			}}},
		},
	}
	if err := h.c.Create(h.ctx, class); err != nil {
		t.Fatalf("creating ClusterClass: %v", err)
	}
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "prod"},
		Spec: clusterv1.ClusterSpec{Topology: clusterv1.Topology{
			ClassRef:     clusterv1.ClusterClassRef{Name: class.Name},
			Version:      "v1.36.0",
			ControlPlane: clusterv1.ControlPlaneTopology{Replicas: ptr.To[int32](1)},
			Workers: clusterv1.WorkersTopology{MachineDeployments: []clusterv1.MachineDeploymentTopology{{
				Class: "default-worker", Name: "md-0", Replicas: ptr.To[int32](2),
			}}},
		}},
	}
	if err := h.c.Create(h.ctx, cluster); err != nil {
		t.Fatalf("creating Cluster: %v", err)
	}
	f.cluster = cluster

	first := f.waitForProvisionedMachines(2, nil)
	clusterEmails := func() int {
		return len(h.fake.MessagesWithVariable(mailer.VarCluster, h.ns+"/"+f.clusterInfrastructureName()))
	}
	if c, m := clusterEmails(), h.machineEmailCount(); c != 1 || m != 2 {
		t.Fatalf("%d cluster and %d machine emails, want 1 and 2", c, m)
	}
	rotatedFrom := f.workerTemplateName()

	// A new worker class template: the topology controller rotates the
	// Cluster's MailgunMachineTemplate and rolls the Machines.
	workersV2 := machineTemplate("workers-v2", "16 GiB, please.")
	if err := h.c.Create(h.ctx, workersV2); err != nil {
		t.Fatalf("creating MailgunMachineTemplate workers-v2: %v", err)
	}
	patchObj(h, class, func() { class.Spec.Workers.MachineDeployments[0].Infrastructure.TemplateRef = ref(workersV2) })
	h.eventually(30*time.Second, "the MachineDeployment on a rotated MailgunMachineTemplate", func() (bool, string) {
		name := f.workerTemplateName()
		return name != "" && name != rotatedFrom, fmt.Sprintf("template %q (was %q)", name, rotatedFrom)
	})
	second := f.waitForProvisionedMachines(2, first)
	for name := range second {
		emails := h.fake.MessagesWithVariable(mailer.VarMachine, h.ns+"/"+name)
		if len(emails) != 1 || !strings.Contains(emails[0].Text, "16 GiB, please.") {
			t.Errorf("MailgunMachine %s: %d emails, want 1 with the new class's request", name, len(emails))
		}
	}
	h.consistently(2*time.Second, "1 cluster and 4 machine emails after the rollout", func() (bool, string) {
		c, m := clusterEmails(), h.machineEmailCount()
		return c == 1 && m == 4, fmt.Sprintf("%d cluster and %d machine emails", c, m)
	})
	f.noBootstrapDataLeaked()
	h.noErrorLogged()
}

// clusterInfrastructureName is the MailgunCluster the topology controller
// made for the Cluster, or "" before it did.
func (f *machineFixture) clusterInfrastructureName() string {
	cluster := &clusterv1.Cluster{}
	if err := f.c.Get(f.ctx, client.ObjectKeyFromObject(f.cluster), cluster); err != nil {
		return ""
	}
	return cluster.Spec.InfrastructureRef.Name
}

// workerTemplateName is the MailgunMachineTemplate the Cluster's one
// MachineDeployment uses, or "" before the topology controller made it.
func (f *machineFixture) workerTemplateName() string {
	mds := &clusterv1.MachineDeploymentList{}
	if err := f.c.List(f.ctx, mds, client.InNamespace(f.ns)); err != nil || len(mds.Items) != 1 {
		return ""
	}
	return mds.Items[0].Spec.Template.Spec.InfrastructureRef.Name
}

// actAsKubeadmProviders does, until the test ends, what the kubeadm control
// plane and bootstrap providers would: it reports every KubeadmControlPlane
// initialized and stable at its version, and gives every KubeadmConfig a
// data Secret (holding the canary). The harness's context bounds it.
func (f *machineFixture) actAsKubeadmProviders() {
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		poll.Until(ctx, 2*time.Minute, 200*time.Millisecond, func() (bool, string) {
			f.provideControlPlanes(ctx)
			f.provideBootstrapData(ctx)
			return false, ""
		})
	}()
	f.t.Cleanup(func() { cancel(); <-done })
}

func (f *machineFixture) provideControlPlanes(ctx context.Context) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(kubeadmControlPlaneGVK.GroupVersion().WithKind("KubeadmControlPlaneList"))
	if err := f.c.List(ctx, list, client.InNamespace(f.ns)); err != nil {
		return
	}
	for i := range list.Items {
		cp := &list.Items[i]
		version, _, _ := unstructured.NestedString(cp.Object, "spec", "version")
		current, _, _ := unstructured.NestedString(cp.Object, "status", "version")
		replicas, _, _ := unstructured.NestedInt64(cp.Object, "spec", "replicas")
		if current == version {
			continue
		}
		// A merge patch of status: Cluster API writes the object too.
		patch := fmt.Sprintf(`{"status":{"initialization":{"controlPlaneInitialized":true},"version":%q,"replicas":%d,"readyReplicas":%[2]d,"availableReplicas":%[2]d,"upToDateReplicas":%[2]d}}`,
			version, replicas)
		_ = f.c.Status().Patch(ctx, cp, client.RawPatch(types.MergePatchType, []byte(patch)))
	}
}

func (f *machineFixture) provideBootstrapData(ctx context.Context) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(kubeadmConfigGVK.GroupVersion().WithKind("KubeadmConfigList"))
	if err := f.c.List(ctx, list, client.InNamespace(f.ns)); err != nil {
		return
	}
	for i := range list.Items {
		config := &list.Items[i]
		if name, _, _ := unstructured.NestedString(config.Object, "status", "dataSecretName"); name != "" {
			continue
		}
		// A Secret left by a try whose status patch failed is reused.
		secret := newBootstrapSecret(f.ns, config.GetName())
		if err := f.c.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
			continue
		}
		_ = f.c.Status().Patch(ctx, config, dataSecretPatch(secret.Name))
	}
}
