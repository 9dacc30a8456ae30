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
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/labels"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
)

// SetupWithManager registers the controller and its watches: its Machine
// (Cluster API sets the owner, infrastructureRef and bootstrap data), its
// Cluster (pause, infrastructure provisioned, control plane initialized),
// its Cluster's MailgunCluster (the identity), and, for every
// MailgunMachine, the settings and identities. If Cluster API is not
// installed yet, its watches start once it is (see clusterAPIWaiter).
func (r *MailgunMachineReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	log := ctrl.LoggerFrom(ctx)
	scheme := mgr.GetScheme()
	capiKinds := []schema.GroupKind{clusterGroupKind, machineGroupKind}
	served, lookupErr := clusterAPIServed(mgr.GetRESTMapper(), capiKinds...)
	toMachines, err := util.ClusterToTypedObjectsMapper(mgr.GetClient(), &infrav1.MailgunMachineList{}, scheme)
	if err != nil {
		return fmt.Errorf("mapping Clusters to MailgunMachines: %w", err)
	}
	capiSources := []source.Source{
		source.Kind[client.Object](mgr.GetCache(), &clusterv1.Machine{},
			handler.EnqueueRequestsFromMapFunc(util.MachineToInfrastructureMapFunc(infrav1.GroupVersion.WithKind("MailgunMachine"))),
			predicates.ResourceHasFilterLabel(scheme, log, r.WatchFilterValue)),
		source.Kind[client.Object](mgr.GetCache(), &clusterv1.Cluster{},
			handler.EnqueueRequestsFromMapFunc(toMachines),
			clusterGatesChanged,
			predicates.ResourceHasFilterLabel(scheme, log, r.WatchFilterValue)),
	}
	all := handler.EnqueueRequestsFromMapFunc(r.allMailgunMachines)
	b := ctrl.NewControllerManagedBy(mgr).
		For(&infrav1.MailgunMachine{}, builder.WithPredicates(
			predicates.ResourceHasFilterLabel(scheme, log, r.WatchFilterValue),
			predicates.ResourceIsNotExternallyManaged(scheme, log),
		)).
		WithOptions(options).
		Named("mailgunmachine").
		WatchesRawSource(r.Deliveries.Source(r.Kind.Name)).
		Watches(&infrav1.MailgunCluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterMachines),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// Rare changes that may let any MailgunMachine send.
		Watches(&infrav1.MailgunClusterIdentity{}, all).
		Watches(&corev1.Namespace{}, all, builder.WithPredicates(predicate.LabelChangedPredicate{}))
	wake := make(chan event.GenericEvent, 1)
	if served {
		r.clusterAPI.Store(true)
		for _, src := range capiSources {
			b = b.WatchesRawSource(src)
		}
	} else {
		b = b.WatchesRawSource(source.Channel(wake, all))
	}
	b = r.ConfigObjects.watch(b, all, all)
	c, err := b.Build(r)
	if err != nil {
		return fmt.Errorf("creating MailgunMachine controller: %w", err)
	}
	if served {
		return nil
	}
	return r.waitForClusterAPI(mgr, r.Kind.Name, capiKinds, lookupErr, c, capiSources, wake)
}

// allMailgunMachines maps a change that may concern any MailgunMachine to
// all of them.
func (r *MailgunMachineReconciler) allMailgunMachines(ctx context.Context, _ client.Object) []reconcile.Request {
	return r.mailgunMachines(ctx)
}

// clusterMachines maps a MailgunCluster (its identity may have changed) to
// the MailgunMachines of its Cluster.
func (r *MailgunMachineReconciler) clusterMachines(ctx context.Context, obj client.Object) []reconcile.Request {
	name := ownerClusterName(obj.(*infrav1.MailgunCluster))
	if name == "" {
		return nil
	}
	return r.mailgunMachines(ctx, client.InNamespace(obj.GetNamespace()), client.MatchingLabels{clusterv1.ClusterNameLabel: name})
}

// mailgunMachines maps the MailgunMachines matching opts to requests, with
// the same filters as the MailgunMachine watch.
func (r *MailgunMachineReconciler) mailgunMachines(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	list := &infrav1.MailgunMachineList{}
	if err := r.Client.List(ctx, list, opts...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing MailgunMachines to reconcile them")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		mm := &list.Items[i]
		if (r.WatchFilterValue != "" && !labels.HasWatchLabel(mm, r.WatchFilterValue)) || annotations.IsExternallyManaged(mm) {
			continue
		}
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(mm)})
	}
	return reqs
}

// clusterGatesChanged passes the Cluster events that may change what a
// MailgunMachine waits for: a new Cluster, and changes of spec.paused or
// status.initialization (infrastructure provisioned, control plane
// initialized), not the Cluster's every status write.
var clusterGatesChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*clusterv1.Cluster)
		cur, okNew := e.ObjectNew.(*clusterv1.Cluster)
		if !okOld || !okNew {
			return false
		}
		return !ptr.Equal(old.Spec.Paused, cur.Spec.Paused) ||
			!ptr.Equal(old.Status.Initialization.InfrastructureProvisioned, cur.Status.Initialization.InfrastructureProvisioned) ||
			!ptr.Equal(old.Status.Initialization.ControlPlaneInitialized, cur.Status.Initialization.ControlPlaneInitialized)
	},
}
