package controllers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/time/rate"
	appsv1 "k8s.io/api/apps/v1"
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
	"github.com/sidecarset/sidecarset-operator/internal/opmetrics"
	"github.com/sidecarset/sidecarset-operator/internal/refusals"
	"github.com/sidecarset/sidecarset-operator/internal/revision"
	"github.com/sidecarset/sidecarset-operator/internal/rollout"
	"github.com/sidecarset/sidecarset-operator/internal/snapshot"
	"github.com/sidecarset/sidecarset-operator/internal/status"
)

// StatusReconciler keeps SidecarSet status exact. It reads and never writes anything but the
// sets' status: the counts come from the PodIndex, where each rollout stands from the rollout
// reconciler (RolloutStates), whether each policy is in force from the policy reconciler
// (PolicyStates), and the current revision from the ControllerRevisions the revision
// reconciler stores. It is driven only by watches: SidecarSet spec changes, Pod and Namespace
// events mapped to exactly the SidecarSets they affect, and the other reconcilers' word.
type StatusReconciler struct {
	// Metrics are the operator's metrics: the status gauges go there.
	Metrics *opmetrics.Metrics
	// RefusalQuiet is how long after the webhook's latest refusal a set's Refusing condition
	// turns False (refusals.QuietPeriod when zero).
	RefusalQuiet time.Duration
	// Client reads from the manager's cache (Pods there are only opted-in ones) and writes
	// SidecarSet status.
	Client client.Client
	// Sets is the compiled view of the SidecarSets, for conflicts.
	Sets *snapshot.Store
	// Pods is the operator's view of the opted-in Pods: each set's counts.
	Pods *PodIndex
	// Rollouts is where each RollingUpdate stands; nil: no set's rollout is known.
	Rollouts *RolloutStates
	// Now is the clock for condition transitions; time.Now when nil.
	Now func() time.Time
	// Recorder records events on SidecarSets; none when nil.
	Recorder events.EventRecorder
	// Namespace is the operator's namespace, where SidecarSet revisions are stored; none are
	// when it is empty.
	Namespace string
	// Workers is how many SidecarSets are reconciled at once (one set is never reconciled
	// twice at once); 16 when zero.
	Workers int
	// BurstWorkers is how many of them run at once while pods change (a Pod or Namespace event
	// touched a set within the last BurstQuiet): a status written during a burst is soon out of
	// date, and each write competes with the burst for the API server. Once pods stop changing
	// every worker runs, and what the burst left pending is written at once. 4 when zero; at
	// least Workers, or negative: no limit.
	BurstWorkers int
	// BurstQuiet is how long without such an event ends a burst; 200ms when zero or less.
	BurstQuiet time.Duration
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

	// lastWrites is the status each set was last patched to, to tell our own writes apart.
	lastWrites lastStatusWrites
	// gate holds reconciles back to BurstWorkers during a burst.
	gate *burstGate
}

// +kubebuilder:rbac:groups=apps.sidecarset.io,resources=sidecarsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps.sidecarset.io,resources=sidecarsets/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconcile recomputes one SidecarSet's status and patches it when it changed. What fails to
// be read (the policy state, the revisions) keeps what the status said of it, and the set is
// reconciled again with backoff.
func (r *StatusReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	leave, err := r.gate.enter(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer leave()
	var set appsv1alpha1.SidecarSet
	if err := r.Client.Get(ctx, req.NamespacedName, &set); err != nil {
		if apierrors.IsNotFound(err) {
			r.Pods.Tally.Forget(req.Name)
			r.lastWrites.forgetSet(req.Name)
			unexport(r.Metrics, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	want, readErr := r.compute(ctx, &set)
	// status.recreating is the rollout's to write (see RolloutReconciler.storeRecreating): the
	// merge patch below never changes it.
	want.Recreating = set.Status.Recreating
	// status.images and imagesRefreshed are the image resolver's (ImageResolver).
	want.Images, want.ImagesRefreshed = set.Status.Images, set.Status.ImagesRefreshed
	// status.refusals: each replica's webhook writes its own entry (internal/refusals); the
	// entries older than the quiet period go, and Refusing says what the others hold.
	var recheck time.Duration
	want.Refusals, recheck = status.WithRefusals(&want.Conditions, set.Status.Conditions, set.Status.Refusals, set.Generation,
		r.now(), cmp.Or(r.RefusalQuiet, refusals.QuietPeriod))
	export(r.Metrics, set.Name, &want)
	if !r.lastWrites.mustWrite(&set, &set.Status, &want) {
		return ctrl.Result{RequeueAfter: recheck}, readErr
	}
	// Writing later writes what is current then: the counts go on changing in the meantime.
	if wait := r.lastWrites.waitBeforeWrite(set.Name, time.Now(), r.statusInterval()); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, readErr
	}
	// The cached object is shared (the cache does not deep-copy SidecarSets, and the webhook
	// reads it concurrently): patch a copy. The optimistic lock turns a write based on a stale
	// cache into a conflict and a retry instead of a lost update.
	updated := set.DeepCopy()
	updated.Status = want
	patch := client.MergeFromWithOptions(&set, client.MergeFromWithOptimisticLock{})
	if err := r.Client.Status().Patch(ctx, updated, patch); err != nil {
		return ctrl.Result{}, errors.Join(fmt.Errorf("patching status: %w", err), readErr)
	}
	r.lastWrites.recordWrite(updated, time.Now())
	r.recordStatusEvents(updated, &set.Status, &want)
	return ctrl.Result{RequeueAfter: recheck}, readErr
}

// compute returns the status the SidecarSet should have, and what went wrong on the way (the
// status is complete all the same: what could not be read keeps what the set's status said).
// A set that cannot be compiled (only possible when it was written while the validating
// webhook was down) gets the Invalid condition and no counts: it injects nothing until its
// spec is fixed.
func (r *StatusReconciler) compute(ctx context.Context, set *appsv1alpha1.SidecarSet) (appsv1alpha1.SidecarSetStatus, error) {
	now := metav1.NewTime(r.now())
	// A set whose pinned images wait to be resolved is counted against the revision it
	// injected last, which new pods get meanwhile.
	var lookupErr error
	compiled, waiting, err := revision.Compile(set, set, r.storedRevision(ctx, &lookupErr))
	if compiled == nil {
		if waiting != nil && lookupErr != nil {
			// The revision it injected last could not be read: keep what status says of it.
			return *set.Status.DeepCopy(), lookupErr
		}
		r.Pods.Tally.Forget(set.Name)
		exportFootprints(r.Metrics, set.Name, nil)
		if waiting != nil {
			// status.updateRevision still names the last revision, should it be stored again.
			st := appsv1alpha1.SidecarSetStatus{ObservedGeneration: set.Generation, UpdateRevision: set.Status.UpdateRevision}
			status.WithImages(&st.Conditions, set.Status.Conditions, set, waiting, "", now)
			return st, nil
		}
		return status.Invalid(set, err, now), nil
	}
	// The Store may not have seen this very version of the set yet; when its verdict changes
	// it says so (Subscribe), and the set is reconciled again.
	conflicts := r.Sets.Load().Conflicts[set.Name]
	counts := r.Pods.Tally.Sync(compiled)
	exportFootprints(r.Metrics, set.Name, r.Pods.Tally.Footprints(compiled))
	var (
		ro   *rollout.State
		errs []error
	)
	if rollingUpdate(set) {
		ro = r.Rollouts.For(compiled)
	}
	st := status.Compute(compiled, counts, conflicts, ro, set.Status.Conditions, now)
	lastRevision := ""
	if waiting != nil {
		lastRevision = revision.Name(set.Name, compiled.Hash)
	}
	status.WithImages(&st.Conditions, set.Status.Conditions, set, waiting, lastRevision, now)
	if r.PolicyMode {
		cond, err := r.policyCondition(ctx, set)
		if err == nil {
			cond.LastTransitionTime = now
			status.WithPolicy(&st.Conditions, set.Status.Conditions, cond)
		}
		errs = append(errs, err)
	} else {
		meta.RemoveStatusCondition(&st.Conditions, appsv1alpha1.ConditionPolicyCompiled)
	}
	st.UpdateRevision = set.Status.UpdateRevision
	if current, err := r.currentRevision(ctx, compiled); err == nil {
		st.UpdateRevision = current
	} else {
		errs = append(errs, err)
	}
	return st, errors.Join(errs...)
}

func (r *StatusReconciler) statusInterval() time.Duration {
	if r.StatusInterval == 0 {
		return 250 * time.Millisecond
	}
	return max(0, r.StatusInterval)
}

func (r *StatusReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// storedRevision finds a stored revision of the operator's namespace by name, nil when it is
// not there (or nothing is stored); a read that fails otherwise sets *failed.
func (r *StatusReconciler) storedRevision(ctx context.Context, failed *error) func(string) *appsv1.ControllerRevision {
	return func(name string) *appsv1.ControllerRevision {
		if r.Namespace == "" || name == "" {
			return nil
		}
		var rev appsv1.ControllerRevision
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: name}, &rev); err != nil {
			if !apierrors.IsNotFound(err) {
				*failed = fmt.Errorf("reading revision %s: %w", name, err)
			}
			return nil
		}
		return &rev
	}
}

// statusRetryMax is the longest a set whose status write failed waits for the next try.
const statusRetryMax = time.Second

// statusRetries is how the status controller retries a set whose status write failed: soon,
// however many writes failed before. A write fails on a conflict (the cache is behind the set,
// which others write too) or on an API server too busy to take it, both most likely during a
// burst of pod events; the status is due within StatusInterval of the last pod event, and
// controller-runtime's default per-set backoff (doubling from 5 ms up to 1,000 s) would, after a
// burst of failures, leave a set's status stale for minutes once the pod events stop. The
// overall bucket (10 retries a second, 100 at once), as the default's, keeps a failing API
// server from being asked more often.
func statusRetries() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, statusRetryMax),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)})
}

// statusControllerOptions are the status controller's: workers at once, retried by
// statusRetries.
func statusControllerOptions(workers int) controller.Options {
	return controller.Options{MaxConcurrentReconciles: workers, RateLimiter: statusRetries()}
}

// SetupWithManager registers the reconciler and its watches.
func (r *StatusReconciler) SetupWithManager(mgr ctrl.Manager) error {
	workers := cmp.Or(r.Workers, 16)
	if burst := cmp.Or(r.BurstWorkers, 4); burst > 0 && burst < workers {
		quiet := r.BurstQuiet
		if quiet <= 0 {
			quiet = 200 * time.Millisecond
		}
		r.gate = newBurstGate(burst, func() bool { return r.Pods.Changing(quiet) }, max(quiet/4, time.Millisecond))
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("sidecarset").
		WithOptions(statusControllerOptions(workers)).
		// Spec changes and others' status writes; our own status writes are recognised and
		// cause no reconcile (see lastStatusWrites).
		For(&appsv1alpha1.SidecarSet{}, builder.WithPredicates(predicate.Funcs{UpdateFunc: r.lastWrites.notOwnWrite})).
		// Pod and Namespace events go through the index; only the sets whose counts they
		// change (and sets rolling through the pod) are reconciled.
		WatchesRawSource(r.Pods.Source()).
		// A set's conflicts change when another set changes: the Store names both sides.
		WatchesRawSource(subscription(r.Sets.Subscribe)).
		// The RollingUpdate condition follows the rollout reconciler.
		WatchesRawSource(subscription(r.Rollouts.Subscribe))
	if r.Policies != nil {
		// PolicyCompiled follows what the policy reconciler saw the API server run.
		b = b.WatchesRawSource(subscription(r.Policies.Subscribe))
	}
	if r.Namespace != "" {
		// status.updateRevision names the current revision once it is stored, and in policy
		// mode PolicyCompiled says whether the revision a set pins is stored.
		b = b.Watches(&appsv1.ControllerRevision{}, handler.EnqueueRequestsFromMapFunc(revisionOwner))
	}
	return b.Complete(r)
}

// subscription is a source that enqueues the sets a subscribe call names.
func subscription(subscribe func(func(names []string))) source.Source {
	return source.Func(func(_ context.Context, q queue) error {
		subscribe(func(names []string) { enqueue(q, names) })
		return nil
	})
}

// revisionOwner maps a ControllerRevision to the set it stores.
func revisionOwner(_ context.Context, obj client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: obj.GetLabels()[appsv1alpha1.RevisionSetLabel]}}}
}

// currentRevision names the stored revision of the set's current spec; empty while it is not
// stored (or the operator stores none).
func (r *StatusReconciler) currentRevision(ctx context.Context, c *inject.CompiledSet) (string, error) {
	if r.Namespace == "" {
		return "", nil
	}
	name := revision.Name(c.Name(), c.Hash)
	var rev appsv1.ControllerRevision
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: name}, &rev); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("reading revision %s: %w", name, err)
	}
	return name, nil
}

// policyCondition is the set's PolicyCompiled condition in policy mode.
func (r *StatusReconciler) policyCondition(ctx context.Context, set *appsv1alpha1.SidecarSet) (metav1.Condition, error) {
	if r.Policies != nil {
		return r.Policies.Condition(set), nil
	}
	revs, err := r.pinnable(ctx, set)
	if err != nil {
		return metav1.Condition{}, err
	}
	return PolicyCondition(set, revs), nil
}
