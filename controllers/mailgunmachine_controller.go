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
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/send"
)

// MailgunMachineReconciler sends one request email per MailgunMachine,
// once Cluster API has everything the machine's builder needs.
type MailgunMachineReconciler struct {
	*send.Driver[*infrav1.MailgunMachine]
	Watching
}

// NewMailgunMachineReconciler returns a reconciler that sends with s.
func NewMailgunMachineReconciler(s send.Sender) *MailgunMachineReconciler {
	return &MailgunMachineReconciler{Driver: send.NewDriver(s, mailgunMachineKind)}
}

// mailgunMachineKind is what the send path needs to know of MailgunMachines.
var mailgunMachineKind = send.Kind[*infrav1.MailgunMachine]{
	Name:            "MailgunMachine",
	MessageIDPrefix: "mailgunmachine",
	Finalizer:       infrav1.MachineFinalizer,
	StatusMessageID: func(mm *infrav1.MailgunMachine) *string { return &mm.Status.MessageID },
	SetProvisioned: func(mm *infrav1.MailgunMachine, provisioned bool) {
		setProvisioned(&mm.Status.Initialization.Provisioned, provisioned)
	},
	// The provider ID goes into the email: it is fixed with the first
	// attempt, and the apiserver refuses to change it afterwards. A moved
	// or restored MailgunMachine (a new UID) keeps the one it has.
	Claimed: func(mm *infrav1.MailgunMachine) {
		if mm.Spec.ProviderID == "" {
			mm.Spec.ProviderID = providerID(mm)
		}
	},
	Copied: func(mm *infrav1.MailgunMachine) (string, string) {
		if mm.Spec.ProviderID == "" {
			return "", ""
		}
		return infrav1.ProviderIDCopiedReason, fmt.Sprintf("spec.providerID %s was set without a send record of this MailgunMachine: "+
			"it is a copy of the MailgunMachine that provider ID names, and sends nothing; create MailgunMachines without spec.providerID", mm.Spec.ProviderID)
	},
	Paused: func(ctx context.Context, r client.Reader, mm *infrav1.MailgunMachine) (bool, error) {
		name := mm.Labels[clusterv1.ClusterNameLabel]
		if name == "" {
			// A MailgunMachine sends only once its Cluster was found
			// through this label; removed since, it names no Cluster to
			// check, so it counts as gone: no send.
			return true, nil
		}
		return pausedLive(ctx, r, mm, name)
	},
}

// Writes are metadata merge patches (with spec.providerID in the claim) and
// whole-status updates (send.Scope).
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=mailgunmachines,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=mailgunmachines/status,verbs=update
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=mailgunmachines/finalizers,verbs=update
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get;list;watch

// Reconcile reads top-down: get the MailgunMachine, its owner Machine and
// Cluster, honour pausing, then either handle deletion, wait for what
// Cluster API has yet to provide, or send the request email; and finally
// patch the object.
func (r *MailgunMachineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	log := ctrl.LoggerFrom(ctx)
	mm := &infrav1.MailgunMachine{}
	if err := r.Client.Get(ctx, req.NamespacedName, mm); err != nil {
		if apierrors.IsNotFound(err) {
			r.Forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("getting MailgunMachine: %w", err)
	}
	if wait := r.CacheBehind(mm); wait > 0 {
		log.V(5).Info("Waiting for the cache to show our own last write", "resourceVersion", mm.ResourceVersion)
		return ctrl.Result{RequeueAfter: wait}, nil
	}

	// Missing owners are waits, not errors: Cluster API creates them, or
	// is not installed yet.
	machine, err := util.GetOwnerMachine(ctx, r.Client, mm.ObjectMeta)
	if err != nil && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
		return ctrl.Result{}, fmt.Errorf("getting owner Machine: %w", err)
	}
	cluster, err := util.GetClusterFromMetadata(ctx, r.Client, mm.ObjectMeta)
	if err != nil && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) && !errors.Is(err, util.ErrNoCluster) {
		return ctrl.Result{}, fmt.Errorf("getting the Cluster: %w", err)
	}
	if machine != nil {
		log = log.WithValues("Machine", klog.KObj(machine))
	}
	if cluster != nil {
		log = log.WithValues("Cluster", klog.KObj(cluster))
	}
	ctx = ctrl.LoggerInto(ctx, log)
	identity, infraFound, err := r.identityOf(ctx, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}

	s := send.NewScope(mm, r.Client)
	defer func() {
		mm.Status.ObservedGeneration = mm.Generation
		res, retErr = r.Finish(ctx, s, res, retErr)
	}()

	if setPausedCondition(mm, cluster) {
		log.V(4).Info("Reconciliation is paused")
		return r.SettlePending(ctx, s, identity)
	}
	if !mm.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(s)
	}
	if reason, msg := machineNotReady(mm, machine, cluster, infraFound, r.clusterAPI.Load()); reason != "" {
		if r.Kind.Accepted(mm) {
			log.V(4).Info("Owners not confirmed; the accepted email stands: "+msg, "reason", reason)
			return ctrl.Result{}, nil
		}
		log.V(1).Info("Not sending yet: "+msg, "reason", reason)
		send.SetEmailSent(mm, metav1.ConditionFalse, reason, msg)
		return ctrl.Result{}, nil
	}
	return r.reconcileNormal(ctx, s, machine, cluster, identity)
}

// reconcileNormal sends the request email once, with the settings of the
// Cluster's MailgunCluster, and follows its delivery.
func (r *MailgunMachineReconciler) reconcileNormal(ctx context.Context, s *send.Scope[*infrav1.MailgunMachine],
	machine *clusterv1.Machine, cluster *clusterv1.Cluster, identity *infrav1.MailgunClusterIdentityReference) (ctrl.Result, error) {
	// The failure domain the email asks for; kept as it was once the
	// email is accepted.
	if !r.Kind.Accepted(s.Object) {
		s.Object.Status.FailureDomain = machine.Spec.FailureDomain
	}
	return r.EnsureSent(ctx, s, identity, machineEmail(s.Object, machine, cluster))
}

func (r *MailgunMachineReconciler) reconcileDelete(s *send.Scope[*infrav1.MailgunMachine]) (ctrl.Result, error) {
	mm := s.Object
	// Nothing is sent: whoever built the machine takes it down by hand,
	// told by the event which one.
	send.SetEmailSent(mm, metav1.ConditionFalse, infrav1.DeletingReason, "the MailgunMachine is being deleted")
	r.Forget(client.ObjectKeyFromObject(mm))
	if controllerutil.RemoveFinalizer(mm, infrav1.MachineFinalizer) {
		r.Recorder.Eventf(mm, nil, corev1.EventTypeNormal, "Deleted", "Delete", "%s", machineDeletedMessage(mm, r.Kind.RecordedMessageID(mm), r.Kind.LastAcceptedMessageID(mm)))
	}
	return ctrl.Result{}, nil
}

// identityOf returns the MailgunClusterIdentity the Cluster's MailgunCluster
// sends with: nil for the operator-wide settings, also when the Cluster's
// infrastructure is not a MailgunCluster. It reports false when the
// MailgunCluster the Cluster names does not exist (yet).
func (r *MailgunMachineReconciler) identityOf(ctx context.Context, cluster *clusterv1.Cluster) (*infrav1.MailgunClusterIdentityReference, bool, error) {
	if cluster == nil {
		return nil, false, nil
	}
	ref := cluster.Spec.InfrastructureRef
	if ref.APIGroup != infrav1.GroupVersion.Group || ref.Kind != "MailgunCluster" {
		return nil, true, nil
	}
	mc := &infrav1.MailgunCluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: ref.Name}, mc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("getting the Cluster's MailgunCluster: %w", err)
	}
	return mc.Spec.IdentityRef, true, nil
}
