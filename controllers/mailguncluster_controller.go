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

// Package controllers holds the MailgunCluster reconciler.
package controllers

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/labels"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	infrav1 "github.com/capi-mailgun/cluster-api-provider-mailgun/api/v1beta1"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/mailer"
	"github.com/capi-mailgun/cluster-api-provider-mailgun/internal/send"
)

// ConfigObjects names the Secret and ConfigMap holding the operator-wide
// Mailgun settings, so that changes to them trigger a reconcile of every
// object that may use them. The namespace holds the identities' Secrets too.
type ConfigObjects struct {
	Namespace     string
	SecretName    string
	ConfigMapName string
}

// watch adds to b the watches of the settings objects: the metadata of the
// Secrets in the namespace, through secrets (their data is read past the
// cache, by config.SecretReader), and the ConfigMap, through configMap.
// With no namespace there is nothing to watch.
func (o ConfigObjects) watch(b *builder.Builder, secrets, configMap handler.EventHandler) *builder.Builder {
	if o.Namespace == "" {
		return b
	}
	inNamespace := predicate.NewPredicateFuncs(func(obj client.Object) bool { return obj.GetNamespace() == o.Namespace })
	isConfigMap := predicate.NewPredicateFuncs(func(obj client.Object) bool {
		return obj.GetNamespace() == o.Namespace && obj.GetName() == o.ConfigMapName
	})
	return b.WatchesMetadata(&corev1.Secret{}, secrets, builder.WithPredicates(inNamespace)).
		Watches(&corev1.ConfigMap{}, configMap, builder.WithPredicates(isConfigMap))
}

// Watching is what both reconcilers are told about what to watch, and
// whether Cluster API is there to be watched.
type Watching struct {
	// ConfigObjects are watched; zero value watches nothing.
	ConfigObjects ConfigObjects

	// WatchFilterValue, if set, restricts reconciliation to objects with the
	// cluster.x-k8s.io/watch-filter label of that value.
	WatchFilterValue string

	// clusterAPI is set once the apiserver serves Cluster API's kinds;
	// until then the objects wait for it.
	clusterAPI atomic.Bool
}

// MailgunClusterReconciler sends one request email per MailgunCluster.
type MailgunClusterReconciler struct {
	// Driver sends the email, through what it holds: the client, the
	// event recorder, the Mailgun settings and mailer.
	*send.Driver[*infrav1.MailgunCluster]
	Watching
}

// NewMailgunClusterReconciler returns a reconciler that sends with s.
func NewMailgunClusterReconciler(s send.Sender) *MailgunClusterReconciler {
	return &MailgunClusterReconciler{Driver: send.NewDriver(s, mailgunClusterKind)}
}

// mailgunClusterKind is what the send path needs to know of MailgunClusters.
var mailgunClusterKind = send.Kind[*infrav1.MailgunCluster]{
	Name:            "MailgunCluster",
	MessageIDPrefix: "mailguncluster",
	Finalizer:       infrav1.ClusterFinalizer,
	StatusMessageID: func(mc *infrav1.MailgunCluster) *string { return &mc.Status.MessageID },
	SetProvisioned: func(mc *infrav1.MailgunCluster, provisioned bool) {
		setProvisioned(&mc.Status.Initialization.Provisioned, provisioned)
	},
	Paused: func(ctx context.Context, r client.Reader, mc *infrav1.MailgunCluster) (bool, error) {
		return pausedLive(ctx, r, mc, ownerClusterName(mc))
	},
}

// Writes are metadata merge patches and whole-status updates (send.Scope);
// TestRoleGrantsWhatTheReconcilerCalls keeps these verbs to what is called.
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=mailgunclusters,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=mailgunclusters/status,verbs=update
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=mailgunclusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=mailgunclusteridentities,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:namespace=system,groups="",resources=secrets;configmaps,verbs=get;list;watch
// The operator creates the settings objects if missing, and takes the two
// default-named ones over from an older release's installer
// (internal/config.UserObjects). Kubernetes cannot limit create to names.
// +kubebuilder:rbac:namespace=system,groups="",resources=secrets;configmaps,verbs=create
// +kubebuilder:rbac:namespace=system,groups="",resources=secrets,resourceNames=capmg-mailgun-credentials,verbs=patch
// +kubebuilder:rbac:namespace=system,groups="",resources=configmaps,resourceNames=capmg-mailgun-config,verbs=patch

// Reconcile reads top-down: get the MailgunCluster, find its owner Cluster,
// honour pausing, then either send the request email or handle deletion,
// and finally patch the object.
func (r *MailgunClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	log := ctrl.LoggerFrom(ctx)

	mc := &infrav1.MailgunCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, mc); err != nil {
		if apierrors.IsNotFound(err) {
			r.Forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("getting MailgunCluster: %w", err)
	}
	// The cache has not shown our own last write yet: any write from this
	// version would be refused as a conflict. That write's watch event
	// brings the object back.
	if wait := r.CacheBehind(mc); wait > 0 {
		log.V(5).Info("Waiting for the cache to show our own last write", "resourceVersion", mc.ResourceVersion)
		return ctrl.Result{RequeueAfter: wait}, nil
	}

	// A missing owner is not an error: the Cluster may be created later (the
	// Cluster watch brings us back), or it is gone while we are deleted. Nor
	// is a missing Cluster API: the operator may be installed first.
	cluster, err := util.GetOwnerCluster(ctx, r.Client, mc.ObjectMeta)
	ownerMissing, noMatch := apierrors.IsNotFound(err), meta.IsNoMatchError(err)
	noClusterAPI := noMatch || !r.clusterAPI.Load()
	if err != nil && !ownerMissing && !noMatch {
		return ctrl.Result{}, fmt.Errorf("getting owner Cluster: %w", err)
	}
	if cluster != nil {
		log = log.WithValues("Cluster", klog.KObj(cluster))
		ctx = ctrl.LoggerInto(ctx, log)
	}

	s := send.NewScope(mc, r.Client)
	defer func() {
		mc.Status.ObservedGeneration = mc.Generation
		res, retErr = r.Finish(ctx, s, res, retErr)
	}()

	if paused := setPausedCondition(mc, cluster); paused {
		// clusterctl move pauses the Cluster and then waits for our
		// block-move annotation: a pending send attempt is resolved
		// (looked up, or dropped once known not to be accepted), and no
		// new one starts.
		log.V(4).Info("Reconciliation is paused")
		return r.SettlePending(ctx, s, mc.Spec.IdentityRef)
	}

	if !mc.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(s)
	}

	if reason, msg := notOurCluster(mc, cluster, ownerMissing, noClusterAPI); reason != "" {
		if r.Kind.Accepted(mc) {
			// Its email is accepted and stays so: a discovery failure at
			// start or a cache that has not seen the owner yet (after
			// clusterctl move) must not flip Ready, and the Cluster's
			// condition with it. A resend waits for the owner.
			log.V(4).Info("Owner not confirmed; the accepted email stands: "+msg, "reason", reason)
			return ctrl.Result{}, nil
		}
		log.Info("Not sending: "+msg, "reason", reason)
		send.SetEmailSent(mc, metav1.ConditionFalse, reason, msg)
		return ctrl.Result{}, nil
	}

	return r.reconcileNormal(ctx, s)
}

// reconcileNormal sends the request email once, with the settings of the
// MailgunCluster's identity, and follows its delivery.
func (r *MailgunClusterReconciler) reconcileNormal(ctx context.Context, s *send.Scope[*infrav1.MailgunCluster]) (ctrl.Result, error) {
	return r.EnsureSent(ctx, s, s.Object.Spec.IdentityRef, clusterEmail(s.Object))
}

// clusterEmail is the request email of mc.
func clusterEmail(mc *infrav1.MailgunCluster) send.Email {
	return mailer.ClusterEmail{
		Priority:  string(mc.Spec.Priority),
		Request:   mc.Spec.Request,
		Requester: mc.Spec.Requester,
		Object:    types.NamespacedName{Namespace: mc.Namespace, Name: mc.Name}.String(),
		UID:       string(mc.UID),
	}.Email
}

// notOurCluster says why the MailgunCluster must not send yet: Cluster API
// is not installed, it has no owner Cluster, the owner does not exist, or
// the owner's spec.infrastructureRef names another object (a second
// MailgunCluster owned by the same Cluster is not its infrastructure). The
// first ends when the Cluster API waiter finds Cluster API, the others when
// the MailgunCluster or its Cluster changes, which the watches report.
func notOurCluster(mc *infrav1.MailgunCluster, cluster *clusterv1.Cluster, ownerMissing, noClusterAPI bool) (reason, message string) {
	switch {
	case noClusterAPI:
		return infrav1.WaitingForClusterAPIReason, fmt.Sprintf("Cluster API is not installed (the apiserver does not serve %s); waiting for it",
			clusterv1.GroupVersion.WithKind("Cluster"))
	case ownerMissing:
		return infrav1.WaitingForClusterReason, fmt.Sprintf("the owner Cluster %s does not exist; waiting for it to be created", ownerClusterName(mc))
	case cluster == nil:
		return infrav1.WaitingForClusterReason, "waiting for a Cluster to reference this MailgunCluster in spec.infrastructureRef"
	}
	ref := cluster.Spec.InfrastructureRef
	switch {
	case !ref.IsDefined():
		return infrav1.WaitingForClusterReason, fmt.Sprintf("waiting for the owner Cluster %s to set spec.infrastructureRef", cluster.Name)
	case ref.APIGroup != infrav1.GroupVersion.Group || ref.Kind != "MailgunCluster" || ref.Name != mc.Name:
		return infrav1.NotClusterInfrastructureReason, fmt.Sprintf("the owner Cluster %s names %s %s in spec.infrastructureRef, not this MailgunCluster; nothing is sent for it", cluster.Name, ref.Kind, ref.Name)
	}
	return "", ""
}

func (r *MailgunClusterReconciler) reconcileDelete(s *send.Scope[*infrav1.MailgunCluster]) (ctrl.Result, error) {
	mc := s.Object
	// An email cannot be recalled: nothing outside the apiserver needs
	// cleaning up. The finalizer exists so Cluster API waits for us and so the
	// deletion is recorded.
	send.SetEmailSent(mc, metav1.ConditionFalse, infrav1.DeletingReason, "the MailgunCluster is being deleted")
	r.Forget(client.ObjectKeyFromObject(mc))
	if controllerutil.RemoveFinalizer(mc, infrav1.ClusterFinalizer) {
		r.Recorder.Eventf(mc, nil, corev1.EventTypeNormal, "Deleted", "Delete",
			"MailgunCluster deleted; the request email (message ID %q) cannot be recalled", r.Kind.RecordedMessageID(mc))
	}
	return ctrl.Result{}, nil
}

// SetupWithManager registers the controller and its watches. If Cluster
// API is not installed yet, the Cluster watch starts once it is (see
// clusterAPIWaiter), without a restart.
func (r *MailgunClusterReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, options controller.Options) error {
	log := ctrl.LoggerFrom(ctx)
	scheme := mgr.GetScheme()
	// A discovery failure at start is no answer: wait as if Cluster API
	// were missing (the waiter asks again within a second) rather than fail
	// the operator over an apiserver hiccup.
	served, lookupErr := clusterAPIServed(mgr.GetRESTMapper(), clusterGroupKind)
	clusters := source.Kind[client.Object](mgr.GetCache(), &clusterv1.Cluster{},
		handler.EnqueueRequestsFromMapFunc(util.ClusterToInfrastructureMapFunc(ctx,
			infrav1.GroupVersion.WithKind("MailgunCluster"), mgr.GetClient(), &infrav1.MailgunCluster{})),
		predicates.ClusterPausedTransitions(scheme, log),
		predicates.ResourceHasFilterLabel(scheme, log, r.WatchFilterValue),
	)
	b := ctrl.NewControllerManagedBy(mgr).
		For(&infrav1.MailgunCluster{}, builder.WithPredicates(
			predicates.ResourceHasFilterLabel(scheme, log, r.WatchFilterValue),
			predicates.ResourceIsNotExternallyManaged(scheme, log),
		)).
		WithOptions(options).
		Named("mailguncluster").
		WatchesRawSource(r.Deliveries.Source(r.Kind.Name))
	enqueueAll := handler.EnqueueRequestsFromMapFunc(r.allMailgunClusters)
	wake := make(chan event.GenericEvent, 1)
	if served {
		r.clusterAPI.Store(true)
		b = b.WatchesRawSource(clusters)
	} else {
		b = b.WatchesRawSource(source.Channel(wake, enqueueAll))
	}

	if err := mgr.GetFieldIndexer().IndexField(ctx, &infrav1.MailgunCluster{}, identityRefIndex, indexIdentityRef); err != nil {
		return fmt.Errorf("indexing MailgunClusters by %s: %w", identityRefIndex, err)
	}
	b = b.Watches(&infrav1.MailgunClusterIdentity{}, handler.EnqueueRequestsFromMapFunc(r.identityUsers)).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.namespaceIdentityUsers),
			builder.WithPredicates(predicate.LabelChangedPredicate{}))
	b = r.ConfigObjects.watch(b, handler.EnqueueRequestsFromMapFunc(r.secretUsers), enqueueAll)
	c, err := b.Build(r)
	if err != nil {
		return fmt.Errorf("creating MailgunCluster controller: %w", err)
	}
	if served {
		return nil
	}
	return r.waitForClusterAPI(mgr, r.Kind.Name, []schema.GroupKind{clusterGroupKind}, lookupErr, c, []source.Source{clusters}, wake)
}

// setProvisioned sets an initialization.provisioned field: true, or unset
// (the contract's "not provisioned").
func setProvisioned(field **bool, provisioned bool) {
	*field = nil
	if provisioned {
		*field = ptr.To(true)
	}
}

// allMailgunClusters maps a configuration change, or Cluster API's
// arrival, to every MailgunCluster: any of them may be waiting for it.
func (r *MailgunClusterReconciler) allMailgunClusters(ctx context.Context, _ client.Object) []reconcile.Request {
	return r.mailgunClusters(ctx, nil)
}

// mailgunClusters maps the MailgunClusters matching opts, and keep if not
// nil, to requests, with the same filters as the MailgunCluster watch:
// objects for another instance of the operator, or managed by someone
// else, stay untouched.
func (r *MailgunClusterReconciler) mailgunClusters(ctx context.Context, keep func(*infrav1.MailgunCluster) bool, opts ...client.ListOption) []reconcile.Request {
	list := &infrav1.MailgunClusterList{}
	if err := r.Client.List(ctx, list, opts...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing MailgunClusters to reconcile them")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		mc := &list.Items[i]
		if (r.WatchFilterValue != "" && !labels.HasWatchLabel(mc, r.WatchFilterValue)) || annotations.IsExternallyManaged(mc) || (keep != nil && !keep(mc)) {
			continue
		}
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(mc)})
	}
	return reqs
}

// identityRefIndex indexes MailgunClusters by the name of the
// MailgunClusterIdentity they send with.
const identityRefIndex = "spec.identityRef.name"

func indexIdentityRef(obj client.Object) []string {
	if ref := obj.(*infrav1.MailgunCluster).Spec.IdentityRef; ref != nil {
		return []string{ref.Name}
	}
	return nil
}

// identityUsers maps a MailgunClusterIdentity to the MailgunClusters that
// name it: a created, fixed or changed identity may let them send.
func (r *MailgunClusterReconciler) identityUsers(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.mailgunClusters(ctx, nil, client.MatchingFields{identityRefIndex: obj.GetName()})
}

// secretUsers maps a Secret in the operator's namespace to the
// MailgunClusters that send with it: all of them for the operator-wide
// Secret (any may use the settings), else those whose identity names it.
func (r *MailgunClusterReconciler) secretUsers(ctx context.Context, obj client.Object) []reconcile.Request {
	if obj.GetName() == r.ConfigObjects.SecretName {
		return r.allMailgunClusters(ctx, obj)
	}
	ids := &infrav1.MailgunClusterIdentityList{}
	if err := r.Client.List(ctx, ids); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing MailgunClusterIdentities to find the users of a Secret", "Secret", klog.KObj(obj))
		return nil
	}
	var reqs []reconcile.Request
	for i := range ids.Items {
		if ids.Items[i].Spec.SecretRef.Name == obj.GetName() {
			reqs = append(reqs, r.identityUsers(ctx, &ids.Items[i])...)
		}
	}
	return reqs
}

// namespaceIdentityUsers maps a namespace whose labels changed to its
// MailgunClusters that name an identity: an identity's
// allowedNamespaces.selector may now allow or refuse them.
func (r *MailgunClusterReconciler) namespaceIdentityUsers(ctx context.Context, obj client.Object) []reconcile.Request {
	hasIdentity := func(mc *infrav1.MailgunCluster) bool { return mc.Spec.IdentityRef != nil }
	return r.mailgunClusters(ctx, hasIdentity, client.InNamespace(obj.GetName()))
}

// ownerClusterName is the name of the Cluster in mc's owner references.
func ownerClusterName(mc *infrav1.MailgunCluster) string {
	for _, ref := range mc.OwnerReferences {
		if ref.Kind == "Cluster" && strings.HasPrefix(ref.APIVersion, clusterv1.GroupVersion.Group+"/") {
			return ref.Name
		}
	}
	return ""
}

// setPausedCondition sets the Paused condition and reports whether
// reconciliation is paused, through the Cluster's spec.paused or the
// cluster.x-k8s.io/paused annotation on obj.
func setPausedCondition(obj send.Object, cluster *clusterv1.Cluster) bool {
	if msg := pausedBy(obj, cluster); msg != "" {
		conditions.Set(obj, metav1.Condition{Type: infrav1.PausedCondition, Status: metav1.ConditionTrue, Reason: infrav1.PausedReason, Message: msg})
		return true
	}
	conditions.Set(obj, metav1.Condition{Type: infrav1.PausedCondition, Status: metav1.ConditionFalse, Reason: infrav1.NotPausedReason})
	return false
}

// pausedLive is the send path's last check that obj, as read live, may
// send: it reads obj's Cluster (named clusterName, "" for none yet) past
// the cache, which util.GetOwnerCluster cannot (it wants a client.Client),
// and applies pausedBy's rule. A Cluster gone since the reconcile read it
// (clusterctl move deletes the source's) counts as paused: no send.
func pausedLive(ctx context.Context, r client.Reader, obj client.Object, clusterName string) (bool, error) {
	if clusterName == "" {
		return pausedBy(obj, nil) != "", nil
	}
	cluster := &clusterv1.Cluster{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: clusterName}, cluster); err != nil {
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}
	return pausedBy(obj, cluster) != "", nil
}

// pausedBy says what pauses obj (its annotation, or its Cluster's
// spec.paused; cluster may be nil), "" if nothing does.
func pausedBy(obj client.Object, cluster *clusterv1.Cluster) string {
	switch {
	case annotations.HasPaused(obj):
		return fmt.Sprintf("the object has the %s annotation", clusterv1.PausedAnnotation)
	case cluster != nil && ptr.Deref(cluster.Spec.Paused, false):
		return fmt.Sprintf("Cluster %s is paused (spec.paused)", cluster.Name)
	}
	return ""
}
