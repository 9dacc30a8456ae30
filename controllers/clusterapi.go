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
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/source"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/backoff"
)

// clusterGroupKind and machineGroupKind are Cluster API's Cluster and
// Machine, at the version the operator reads.
var (
	clusterGroupKind = schema.GroupKind{Group: clusterv1.GroupVersion.Group, Kind: "Cluster"}
	machineGroupKind = schema.GroupKind{Group: clusterv1.GroupVersion.Group, Kind: "Machine"}
)

// clusterAPIServed reports whether the apiserver serves all of Cluster
// API's kinds, at the version the operator reads: the CRDs of one install
// become served one by one, and a watch started on a kind not served yet
// fails. A discovery failure is an error, not an answer.
func clusterAPIServed(mapper meta.RESTMapper, kinds ...schema.GroupKind) (bool, error) {
	for _, gk := range kinds {
		_, err := mapper.RESTMapping(gk, clusterv1.GroupVersion.Version)
		switch {
		case meta.IsNoMatchError(err):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("looking up Cluster API's %s in discovery: %w", clusterv1.GroupVersion.WithKind(gk.Kind), err)
		}
	}
	return true, nil
}

// clusterAPIWaiter runs while Cluster API is not installed: it looks for the
// Cluster kind in discovery, at once, then after firstInterval and less
// often up to every maxInterval (one discovery request each), and once it is
// served, starts the controller's watches of Cluster API's kinds and wakes
// every object of the controller's kind, which until then say
// WaitingForClusterAPI. The operator is Ready meanwhile: it is healthy,
// Cluster API is just not there yet.
type clusterAPIWaiter struct {
	log logr.Logger
	// kind is the controller's kind, for the log.
	kind string
	// lookupErr is why discovery could not tell at start, if it could not.
	lookupErr error
	mapper    meta.RESTMapper
	// kinds are the Cluster API kinds the sources watch.
	kinds         []schema.GroupKind
	controller    controller.Controller
	sources       []source.Source
	wake          chan<- event.GenericEvent
	served        func()
	firstInterval time.Duration
	maxInterval   time.Duration
}

// Start implements manager.Runnable; it runs on the leader only, as the
// controller does.
func (w *clusterAPIWaiter) Start(ctx context.Context) error {
	log := w.log
	if w.lookupErr != nil {
		log.Info("Could not tell whether Cluster API is installed; "+w.kind+"s wait until discovery answers (condition reason "+
			infrav1.WaitingForClusterAPIReason+")", "reason", w.lookupErr.Error())
	} else {
		log.Info("Cluster API is not installed: the apiserver does not serve " + clusterv1.GroupVersion.WithKind("Cluster").String() +
			"; " + w.kind + "s wait for it (condition reason " + infrav1.WaitingForClusterAPIReason + ")")
	}
	var watchErr error
	backoff.Until(ctx, w.firstInterval, w.maxInterval, func(time.Duration) bool {
		served, err := clusterAPIServed(w.mapper, w.kinds...)
		if err != nil {
			log.V(1).Info("Cluster API lookup failed; trying again", "reason", err.Error())
		}
		if !served {
			return false
		}
		log.Info("Cluster API is installed; watching its kinds")
		for _, src := range w.sources {
			if err := w.controller.Watch(src); err != nil {
				watchErr = fmt.Errorf("watching Cluster API's kinds: %w", err)
				return true
			}
		}
		w.served()
		select {
		case w.wake <- event.GenericEvent{Object: &metav1.PartialObjectMetadata{}}:
		default:
		}
		return true
	})
	return watchErr
}

// waitForClusterAPI adds, for controller c of kind, a clusterAPIWaiter that
// starts sources once Cluster API's kinds are served, then wakes the controller
// through wake and records that Cluster API is there.
func (w *Watching) waitForClusterAPI(mgr manager.Manager, kind string, kinds []schema.GroupKind, lookupErr error, c controller.Controller, sources []source.Source, wake chan<- event.GenericEvent) error {
	return mgr.Add(&clusterAPIWaiter{
		log:           mgr.GetLogger().WithName("cluster-api-waiter"),
		kind:          kind,
		lookupErr:     lookupErr,
		mapper:        mgr.GetRESTMapper(),
		kinds:         kinds,
		controller:    c,
		sources:       sources,
		wake:          wake,
		served:        func() { w.clusterAPI.Store(true) },
		firstInterval: time.Second,
		maxInterval:   30 * time.Second,
	})
}
