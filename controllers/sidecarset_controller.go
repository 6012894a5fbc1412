package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/snapshot"
	"github.com/sidecarset/sidecarset-operator/internal/status"
	"github.com/sidecarset/sidecarset-operator/internal/tally"
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
	// Workers is how many SidecarSets are reconciled at once (one set is never reconciled
	// twice at once); 4 when zero.
	Workers int
	// PolicyMode: the operator runs with --injection=policy, and status says whether each
	// set's policy injects (the PolicyCompiled condition).
	PolicyMode bool
	// Policies is what the policy reconciler did with each set's policy (policy mode): PolicyCompiled
	// says True only once the API server runs it. Nil: the condition is computed from the set
	// and its stored revisions alone.
	Policies *PolicyStates
	// StatusInterval is the least time between two status writes of one set: a burst of pod
	// events changes the counts hundreds of times a second, and each write is a SidecarSet
	// update for the API server to validate, store and send to every watcher. The first write
	// after a quiet spell is immediate; the status is exact at most this long after the last
	// pod event. 250ms when zero; negative: no limit. It is measured on the wall clock, not Now.
	StatusInterval time.Duration
	// PodEventsPerRevision caps the SidecarUpdated events on pods per set and revision, so a
	// rollout over 10,000 pods does not write 10,000 events: past the cap one event on the set
	// says the rest update quietly (status counts them). 100 when zero.
	PodEventsPerRevision int

	memory rolloutMemory
	// tally keeps every set's counts current from Pod and Namespace events.
	tally *tally.Tally
	// written is the status each set was last patched to, to tell our own writes apart.
	written statusWrites
}

// +kubebuilder:rbac:groups=apps.sidecarset.io,resources=sidecarsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps.sidecarset.io,resources=sidecarsets/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=pods/resize,verbs=patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconcile recomputes one SidecarSet's status and patches it when it changed. What one job of
// the pass fails to do (a pod update, the revision store, the OLM gate) never keeps the others
// from running or the status from being written: the errors are returned together afterwards,
// and the set is reconciled again.
func (r *SidecarSetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var set appsv1alpha1.SidecarSet
	if err := r.Client.Get(ctx, req.NamespacedName, &set); err != nil {
		if apierrors.IsNotFound(err) {
			r.memory.drop(req.Name)
			r.tally.Forget(req.Name)
			r.written.forget(req.Name)
			unexport(req.Name)
			if err := r.Upgrade.Note(ctx, req.Name, false, ""); err != nil {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	want, jobErr := r.compute(ctx, &set)
	// A pod that changed while it was being updated is tried again soon; a job that failed is
	// retried with backoff (the error returned below).
	result := ctrl.Result{}
	if errors.Is(jobErr, errStale) {
		result.RequeueAfter = time.Second
	}
	export(set.Name, &want)
	if !r.written.needed(&set, &set.Status, &want) {
		return result, withoutStale(jobErr)
	}
	// Writing later writes what is current then: the counts go on changing in the meantime.
	if wait := r.written.wait(set.Name, time.Now(), r.statusInterval()); wait > 0 {
		if result.RequeueAfter == 0 || wait < result.RequeueAfter {
			result.RequeueAfter = wait
		}
		return result, withoutStale(jobErr)
	}
	// The cached object is shared (the cache does not deep-copy SidecarSets, and the webhook
	// reads it concurrently): patch a copy. The optimistic lock turns a write based on a stale
	// cache into a conflict and a retry instead of a lost update.
	updated := set.DeepCopy()
	updated.Status = want
	patch := client.MergeFromWithOptions(&set, client.MergeFromWithOptimisticLock{})
	if err := r.Client.Status().Patch(ctx, updated, patch); err != nil {
		return ctrl.Result{}, errors.Join(fmt.Errorf("patching status: %w", err), withoutStale(jobErr))
	}
	r.written.note(updated, time.Now())
	r.announce(updated, &set.Status, &want)
	return result, withoutStale(jobErr)
}

// withoutStale drops errStale from the errors of a pass (a stale pod is retried on a timer,
// not with backoff); nil when nothing else failed.
func withoutStale(err error) error {
	all := []error{err}
	var joined interface{ Unwrap() []error }
	if errors.As(err, &joined) {
		all = joined.Unwrap()
	}
	var rest []error
	for _, e := range all {
		if !errors.Is(e, errStale) {
			rest = append(rest, e)
		}
	}
	return errors.Join(rest...)
}

// compute returns the status the SidecarSet should have, and what went wrong on the way (the
// status is complete all the same: a job that failed keeps what the set's status said of it).
// A set that cannot be compiled (only possible when it was written while the validating
// webhook was down) gets the Invalid condition and no counts: it injects nothing until its
// spec is fixed.
func (r *SidecarSetReconciler) compute(ctx context.Context, set *appsv1alpha1.SidecarSet) (appsv1alpha1.SidecarSetStatus, error) {
	now := metav1.NewTime(r.now())
	compiled, err := inject.Compile(set)
	if err != nil {
		r.tally.Forget(set.Name)
		return status.Invalid(set, err, now), nil
	}
	// The Store may not have seen this very version of the set yet; when its verdict changes
	// it says so (Subscribe), and the set is reconciled again.
	conflicts := r.Sets.Load().Conflicts[set.Name]
	var (
		ro     *status.Rollout
		counts status.Counts
		errs   []error
	)
	if rollingUpdate(set) {
		// The rollout classifies the set's pods anyway; it counts them in the same pass.
		pods, namespaceLabels := r.tally.Selected(compiled)
		ro, counts, err = r.roll(ctx, compiled, pods, namespaceLabels)
		errs = append(errs, err)
		// Pods that only their own namespace's unavailable pods hold back (a tenant's broken
		// pod) may wait forever: they do not hold operator upgrades back with them.
		inProgress := len(ro.Plan.Update) > 0 || ro.Plan.Restarting > 0 || ro.Plan.Waiting > ro.Plan.HeldBackPods
		why := fmt.Sprintf("%d of %d matched pods updated", counts.Updated, counts.Matched)
		errs = append(errs, r.Upgrade.Note(ctx, set.Name, inProgress, why))
	} else {
		counts = r.tally.Sync(compiled)
		r.memory.drop(set.Name)
		errs = append(errs, r.Upgrade.Note(ctx, set.Name, false, ""))
	}
	st := status.Compute(compiled, counts, conflicts, ro, set.Status.Conditions, now)
	if r.PolicyMode {
		cond, err := r.policyCondition(ctx, set)
		if err == nil {
			cond.LastTransitionTime = now
			meta.SetStatusCondition(&st.Conditions, cond)
		}
		errs = append(errs, err)
	} else {
		meta.RemoveStatusCondition(&st.Conditions, appsv1alpha1.ConditionPolicyCompiled)
	}
	st.UpdateRevision = set.Status.UpdateRevision
	if current, err := r.revisions(ctx, compiled); err == nil {
		st.UpdateRevision = current
	} else {
		errs = append(errs, err)
	}
	return st, errors.Join(errs...)
}

func (r *SidecarSetReconciler) statusInterval() time.Duration {
	if r.StatusInterval == 0 {
		return 250 * time.Millisecond
	}
	return max(0, r.StatusInterval)
}

func (r *SidecarSetReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// SetupWithManager registers the reconciler and its watches.
func (r *SidecarSetReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.tally = tally.New(r.Scope)
	workers := r.Workers
	if workers == 0 {
		workers = 4
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("sidecarset").
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		// Spec changes and others' status writes; our own status writes are recognised and
		// cause no reconcile (see statusWrites).
		For(&appsv1alpha1.SidecarSet{}, builder.WithPredicates(predicate.Funcs{UpdateFunc: r.written.notOurs})).
		// Pod and Namespace events go through the tally; only the sets whose counts they change
		// (and sets rolling through the pod) are reconciled.
		Watches(&corev1.Pod{}, r.podEvents()).
		Watches(&corev1.Namespace{}, r.namespaceEvents()).
		// A set's conflicts change when another set changes: the Store names both sides.
		WatchesRawSource(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			r.Sets.Subscribe(func(names []string) {
				enqueue(q, names)
			})
			return nil
		}))
	if r.Policies != nil {
		// PolicyCompiled follows what the policy reconciler saw the API server run.
		b = b.WatchesRawSource(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			r.Policies.Subscribe(func(names []string) { enqueue(q, names) })
			return nil
		}))
	}
	if r.PolicyMode && r.Namespace != "" {
		// PolicyCompiled says whether the revision a set pins is stored.
		b = b.Watches(&appsv1.ControllerRevision{}, handler.EnqueueRequestsFromMapFunc(
			func(_ context.Context, obj client.Object) []reconcile.Request {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: obj.GetLabels()[appsv1alpha1.RevisionSetLabel]}}}
			}))
	}
	return b.Complete(r)
}

// policyCondition is the set's PolicyCompiled condition in policy mode.
func (r *SidecarSetReconciler) policyCondition(ctx context.Context, set *appsv1alpha1.SidecarSet) (metav1.Condition, error) {
	if r.Policies != nil {
		return r.Policies.Condition(set), nil
	}
	revs, err := r.pinnable(ctx, set)
	if err != nil {
		return metav1.Condition{}, err
	}
	return PolicyCondition(set, revs), nil
}
