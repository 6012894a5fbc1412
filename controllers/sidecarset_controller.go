package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/snapshot"
	"github.com/sidecarset/sidecarset-operator/internal/status"
)

// SidecarSetReconciler keeps SidecarSet status exact. It is driven only by watches: SidecarSet
// spec changes, Pod and Namespace events mapped to exactly the SidecarSets they affect, and
// the Store's word on which SidecarSets' conflicts changed.
type SidecarSetReconciler struct {
	// Client reads from the manager's cache (Pods there are only opted-in ones).
	Client client.Client
	// Sets is the compiled view of the SidecarSets, used to map Pod events and for conflicts.
	Sets *snapshot.Store
	// Scope is where the pod webhook injects; pods elsewhere are counted as excluded.
	Scope status.Scope
	// Now is the clock for condition transitions; time.Now when nil.
	Now func() time.Time
	// APIReader reads Pods whole, from the API server, for in-place updates (the cache keeps
	// no Pod spec).
	APIReader client.Reader
	// Recorder records events on SidecarSets and Pods; none when nil.
	Recorder events.EventRecorder
	// Namespace is the operator's namespace, where SidecarSet revisions are stored; none are
	// when it is empty.
	Namespace string
	// Upgrade gates operator upgrades on rollouts in progress (OLM); nil: no gate.
	Upgrade *UpgradeGate

	memory rolloutMemory
}

// +kubebuilder:rbac:groups=apps.sidecarset.io,resources=sidecarsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps.sidecarset.io,resources=sidecarsets/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=pods/resize,verbs=patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconcile recomputes one SidecarSet's status and patches it when it changed.
func (r *SidecarSetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var set appsv1alpha1.SidecarSet
	if err := r.Client.Get(ctx, req.NamespacedName, &set); err != nil {
		if apierrors.IsNotFound(err) {
			r.memory.drop(req.Name)
			if err := r.Upgrade.Note(ctx, req.Name, false, ""); err != nil {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	want, err := r.compute(ctx, &set)
	stale := errors.Is(err, errStale)
	if err != nil && !stale {
		return ctrl.Result{}, err
	}
	// A pod that changed while it was being updated is tried again soon; the status is
	// written all the same.
	result := ctrl.Result{}
	if stale {
		result.RequeueAfter = time.Second
	}
	if equality.Semantic.DeepEqual(want, set.Status) {
		return result, nil
	}
	// The cached object is shared (the cache does not deep-copy SidecarSets, and the webhook
	// reads it concurrently): patch a copy. The optimistic lock turns a write based on a stale
	// cache into a conflict and a retry instead of a lost update.
	updated := set.DeepCopy()
	updated.Status = want
	patch := client.MergeFromWithOptions(&set, client.MergeFromWithOptimisticLock{})
	if err := r.Client.Status().Patch(ctx, updated, patch); err != nil {
		return ctrl.Result{}, fmt.Errorf("patching status: %w", err)
	}
	return result, nil
}

// compute returns the status the SidecarSet should have. A set that cannot be compiled (only
// possible when it was written while the validating webhook was down) gets the Invalid
// condition and no counts: it injects nothing until its spec is fixed.
func (r *SidecarSetReconciler) compute(ctx context.Context, set *appsv1alpha1.SidecarSet) (appsv1alpha1.SidecarSetStatus, error) {
	now := metav1.NewTime(r.now())
	compiled, err := inject.Compile(set)
	if err != nil {
		return status.Invalid(set, err, now), nil
	}
	pods, namespaceLabels, err := r.gather(ctx)
	if err != nil {
		return appsv1alpha1.SidecarSetStatus{}, err
	}
	// The Store may not have seen this very version of the set yet; when its verdict changes
	// it says so (Subscribe), and the set is reconciled again.
	conflicts := r.Sets.Load().Conflicts[set.Name]
	var (
		ro     *status.Rollout
		counts status.Counts
	)
	if rollingUpdate(set) {
		// The rollout classifies every pod anyway; it counts them in the same pass.
		ro, counts, err = r.roll(ctx, compiled, pods, namespaceLabels)
		if err != nil && !errors.Is(err, errStale) {
			return appsv1alpha1.SidecarSetStatus{}, err
		}
		inProgress := len(ro.Plan.Update) > 0 || ro.Plan.Waiting > 0
		why := fmt.Sprintf("%d of %d matched pods updated", counts.Updated, counts.Matched)
		if noteErr := r.Upgrade.Note(ctx, set.Name, inProgress, why); noteErr != nil {
			return appsv1alpha1.SidecarSetStatus{}, noteErr
		}
	} else {
		counts = status.Count(compiled, pods, namespaceLabels, r.Scope)
		r.memory.drop(set.Name)
		if noteErr := r.Upgrade.Note(ctx, set.Name, false, ""); noteErr != nil {
			return appsv1alpha1.SidecarSetStatus{}, noteErr
		}
	}
	st := status.Compute(compiled, counts, conflicts, ro, set.Status.Conditions, now)
	current, revErr := r.revisions(ctx, compiled)
	if revErr != nil {
		return appsv1alpha1.SidecarSetStatus{}, revErr
	}
	st.UpdateRevision = current
	return st, err
}

// gather reads the opted-in Pods and the namespace labels (without copying them: they are
// only read). Namespace labels are needed for every set: they say whether the webhook serves
// the namespace at all.
func (r *SidecarSetReconciler) gather(ctx context.Context) ([]*corev1.Pod, func(string) map[string]string, error) {
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, fmt.Errorf("listing pods: %w", err)
	}
	out := make([]*corev1.Pod, len(pods.Items))
	for i := range pods.Items {
		out[i] = &pods.Items[i]
	}
	var nss corev1.NamespaceList
	if err := r.Client.List(ctx, &nss, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, fmt.Errorf("listing namespaces: %w", err)
	}
	labels := make(map[string]map[string]string, len(nss.Items))
	for i := range nss.Items {
		labels[nss.Items[i].Name] = nss.Items[i].Labels
	}
	return out, func(ns string) map[string]string { return labels[ns] }, nil
}

func (r *SidecarSetReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// SetupWithManager registers the reconciler and its watches.
func (r *SidecarSetReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("sidecarset").
		// Every SidecarSet event, its own status writes included: a write that the cache had not
		// yet seen when status was last compared is then checked again.
		For(&appsv1alpha1.SidecarSet{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.setsForPod)).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.setsForNamespace),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		// A set's conflicts change when another set changes: the Store names both sides.
		WatchesRawSource(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			r.Sets.Subscribe(func(names []string) {
				for _, req := range requests(names) {
					q.Add(req)
				}
			})
			return nil
		})).
		Complete(r)
}

// setsForPod maps a Pod (old or new state: the builder calls it for both on updates) to the
// SidecarSets it matches or was injected by.
func (r *SidecarSetReconciler) setsForPod(ctx context.Context, obj client.Object) []reconcile.Request {
	names := sets.New[string]()
	if recs, err := inject.ParseRecords(obj.GetAnnotations()); err == nil {
		names.Insert(recs.Names()...)
	}
	if inject.OptedIn(obj.GetLabels()) {
		candidates := inject.Candidates(r.Sets.Load().Valid, obj.GetLabels())
		var nsLabels map[string]string
		known := true
		if inject.NeedNamespace(candidates) {
			var ns corev1.Namespace
			err := r.Client.Get(ctx, types.NamespacedName{Name: obj.GetNamespace()}, &ns)
			nsLabels, known = ns.Labels, err == nil
		}
		for _, c := range candidates {
			// Without the namespace's labels, enqueue every candidate: a spare reconcile is
			// cheap, a missed one leaves status wrong.
			if !known || c.SelectsNamespace(nsLabels) {
				names.Insert(c.Name())
			}
		}
	}
	return requests(sets.List(names))
}

// setsForNamespace maps a Namespace label change to every SidecarSet: a namespace selector may
// now match or not, and the opt-out label makes the namespace's pods excluded or reachable
// again for any set. Namespace labels change rarely; a spare reconcile only recounts.
func (r *SidecarSetReconciler) setsForNamespace(context.Context, client.Object) []reconcile.Request {
	var names []string
	for _, c := range r.Sets.Load().Valid {
		names = append(names, c.Name())
	}
	return requests(names)
}

func requests(names []string) []reconcile.Request {
	out := make([]reconcile.Request, len(names))
	for i, n := range names {
		out[i] = reconcile.Request{NamespacedName: types.NamespacedName{Name: n}}
	}
	return out
}
