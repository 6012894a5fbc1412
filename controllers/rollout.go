package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/eventcatalog"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/opmetrics"
	"github.com/sidecarset/sidecarset-operator/internal/rollout"
	"github.com/sidecarset/sidecarset-operator/internal/snapshot"
	"github.com/sidecarset/sidecarset-operator/internal/status"
)

// errStale means a Pod changed between reading and patching it (the patch's resourceVersion
// test failed): the set is reconciled again soon.
var errStale = errors.New("a pod changed while it was being updated; retrying")

// RolloutReconciler moves the running Pods of RollingUpdate SidecarSets to the sets' current
// spec, in place, within each set's budget. It is the operator's only writer of Pods. Where
// each rollout stands goes to States (the status reconciler writes it into the set's
// conditions) and to the OLM upgrade gate.
type RolloutReconciler struct {
	// Client reads SidecarSets and ControllerRevisions from the manager's cache and patches Pods.
	Client client.Client
	// APIReader reads Pods whole (the cache keeps no Pod spec), Nodes, and a revision the cache
	// does not hold, from the API server.
	APIReader client.Reader
	// Sets is the compiled view of the SidecarSets: which sets inject, and the candidates an
	// update is checked against.
	Sets *snapshot.Store
	// Pods is the operator's view of the opted-in Pods.
	Pods *PodIndex
	// Scope is where the pod webhook injects; pods elsewhere are never updated.
	Scope status.Scope
	// Recorder records events on Pods (and on a set whose pod events are capped); none when nil.
	Recorder events.EventRecorder
	// Namespace is the operator's namespace, where the revisions pods were injected with are
	// read from; without one, no injected content is known and no pod is updated.
	Namespace string
	// States receives where each set's rollout stands.
	States *RolloutStates
	// Upgrade gates operator upgrades on rollouts in progress (OLM); nil: no gate.
	Upgrade *UpgradeGate
	// Resize: the API server serves pods/resize (Kubernetes 1.33+). Without it a change of a
	// sidecar's resources cannot reach running pods in place, and they are reported so.
	Resize bool
	// AllowedAnnotations are the annotation keys sets may patch onto pods, the pod webhook's
	// (--patch-pod-metadata-allowed-keys): an update re-applies only those.
	AllowedAnnotations *inject.KeyAllowList
	// Metrics are the operator's metrics: evictions are counted there.
	Metrics *opmetrics.Metrics
	// Workers is how many SidecarSets roll at once (one set never twice at once); 4 when zero.
	Workers int
	// PodEventsPerRevision caps the SidecarUpdated events on pods per set and revision, so a
	// rollout over 10,000 pods does not write 10,000 events: past the cap one event on the set
	// says the rest update quietly (status counts them). 100 when zero.
	PodEventsPerRevision int

	mu sync.Mutex
	// memory: set -> what its rollout remembers of its Pods. The maps of one set are only used
	// by its own reconcile, which never runs twice at once.
	memory map[string]rollout.Memory
	// podEvents: set -> how many SidecarUpdated events went to pods for which hash.
	podEvents map[string]podEventCount
}

// RolloutState is where one set's rollout stands, for the status reconciler.
type RolloutState struct {
	// UID, Generation and Hash identify the spec the rollout planned for.
	UID        types.UID
	Generation int64
	Hash       string
	Rollout    rollout.State
}

// RolloutStates holds every rolling set's RolloutState, written by the rollout reconciler and
// read by the status reconciler. Safe for concurrent use.
type RolloutStates struct{ *published[RolloutState] }

// NewRolloutStates returns an empty RolloutStates.
func NewRolloutStates() *RolloutStates {
	return &RolloutStates{newPublished(func(a, b RolloutState) bool { return reflect.DeepEqual(a, b) })}
}

// For returns the rollout state of this very spec of set: nil when the rollout has not planned
// it yet.
func (s *RolloutStates) For(c *inject.CompiledSet) *rollout.State {
	if s == nil {
		return nil
	}
	st, ok := s.Get(c.Name())
	if !ok || st.UID != c.Set.UID || st.Generation != c.Set.Generation || st.Hash != c.Hash {
		return nil
	}
	return &st.Rollout
}

// +kubebuilder:rbac:groups=apps.sidecarset.io,resources=sidecarsets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=pods/resize,verbs=patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconcile takes the next step of one set's rollout, publishes where it stands, and tells the
// upgrade gate. A Pod the API server refuses to patch is reported and skipped; the others go on.
func (r *RolloutReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var set appsv1alpha1.SidecarSet
	if err := r.Client.Get(ctx, req.NamespacedName, &set); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, r.stop(ctx, req.Name)
		}
		return ctrl.Result{}, err
	}
	c, err := inject.Compile(&set)
	if err != nil || !rollingUpdate(&set) {
		// An invalid set injects nothing and updates nothing; its status says why.
		return ctrl.Result{}, r.stop(ctx, set.Name)
	}
	pods, namespaceLabels := r.Pods.Tally.Selected(c)
	ro, counts, rollErr := r.rollOneStep(ctx, c, &set, pods, namespaceLabels, rollout.HaltedBefore(&set))
	r.States.set(set.Name, RolloutState{UID: set.UID, Generation: set.Generation, Hash: c.Hash, Rollout: *ro})
	// Pods that only their own namespace's unavailable pods hold back (a tenant's broken pod)
	// may wait forever: they do not hold operator upgrades back with them. Pods restarting do
	// until the kubelet runs their new sidecars, Ready.
	gateErr := r.Upgrade.NoteRollout(ctx, set.Name, ro, counts)
	if errors.Is(rollErr, errStale) {
		// A pod that changed while it was being updated is tried again soon, not with backoff.
		return ctrl.Result{RequeueAfter: time.Second}, gateErr
	}
	memory := r.memoryOf(&set)
	storeErr := r.storeRecreating(ctx, &set, memory.Recreating)
	return ctrl.Result{RequeueAfter: retryAfter(ro, memory)}, errors.Join(rollErr, gateErr, storeErr)
}

// stop forgets the rollout of a set that was deleted, became invalid or no longer rolls.
func (r *RolloutReconciler) stop(ctx context.Context, set string) error {
	r.mu.Lock()
	delete(r.memory, set)
	delete(r.podEvents, set)
	r.mu.Unlock()
	r.States.remove(set)
	return r.Upgrade.Note(ctx, set, false, "")
}

// SetupWithManager registers the reconciler and its watches.
func (r *RolloutReconciler) SetupWithManager(mgr ctrl.Manager) error {
	workers := r.Workers
	if workers == 0 {
		workers = 4
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("sidecarset-rollout").
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		// Spec changes, and new digests of a set pinning them: other status writes change no rollout.
		For(&appsv1alpha1.SidecarSet{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, pinnedDigestsChanged))).
		// Pods that change state (ready, updated, gone) free or spend the budget.
		WatchesRawSource(r.Pods.Source()).
		// A set stopped by a conflict, or free again, stops or resumes updating.
		WatchesRawSource(subscription(r.Sets.Subscribe)).
		Complete(r)
}

// memoryOf is what the set's rollout remembers of its Pods. The first time this process rolls
// the set, the workloads being recreated come from the set's status (status.recreating), where
// the rollout that evicted their Pods (this process before a restart, or another leader)
// stored them.
func (r *RolloutReconciler) memoryOf(set *appsv1alpha1.SidecarSet) rollout.Memory {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.memory == nil {
		r.memory = map[string]rollout.Memory{}
	}
	m, ok := r.memory[set.Name]
	if !ok {
		m = rollout.NewMemory()
		m.Recreating = rollout.RecreatingFromStatus(set.Status.Recreating)
		r.memory[set.Name] = m
	}
	return m
}

// storeRecreating writes the workloads being recreated into the set's status when they differ
// from what it holds. The rollout is the only writer of status.recreating (the status
// reconciler carries it over), so a merge patch of that field alone loses no one's write.
func (r *RolloutReconciler) storeRecreating(ctx context.Context, set *appsv1alpha1.SidecarSet, recreating map[string]time.Time) error {
	want := rollout.RecreatingStatus(recreating)
	if equality.Semantic.DeepEqual(want, set.Status.Recreating) {
		return nil
	}
	raw, err := json.Marshal(map[string]any{"status": map[string]any{"recreating": want}})
	if err != nil {
		return fmt.Errorf("encoding status.recreating: %w", err)
	}
	if err := r.Client.Status().Patch(ctx, set.DeepCopy(), client.RawPatch(types.MergePatchType, raw)); err != nil {
		return fmt.Errorf("storing the workloads being recreated in the status of SidecarSet %s: %w", set.Name, err)
	}
	set.Status.Recreating = want
	return nil
}

type podEventCount struct {
	hash string
	sent int
}

// podEvent reports whether a pod updated to hash by set gets its own event (the first limit
// per set and hash do), and whether this is the first pod past the limit.
func (r *RolloutReconciler) podEvent(set, hash string, limit int) (send, capped bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.podEvents == nil {
		r.podEvents = map[string]podEventCount{}
	}
	count := r.podEvents[set]
	if count.hash != hash {
		count = podEventCount{hash: hash}
	}
	count.sent++
	r.podEvents[set] = count
	return count.sent <= limit, count.sent == limit+1
}

// rollOneStep plans the next step of a RollingUpdate and patches the Pods it picks. It returns where
// the rollout stands and the counts it took while it classified the Pods.
func (r *RolloutReconciler) rollOneStep(ctx context.Context, c *inject.CompiledSet, set *appsv1alpha1.SidecarSet, pods []*corev1.Pod,
	namespaceLabels func(string) map[string]string, halted string) (*rollout.State, status.Counts, error) {
	strategy := c.Set.Spec.UpdateStrategy
	injecting := slices.ContainsFunc(r.Sets.Load().Sets, func(s *inject.CompiledSet) bool { return s.Name() == c.Name() })
	eligible, err := rollout.Eligible(c, injecting)
	if err != nil {
		return &rollout.State{}, status.Count(c, pods, namespaceLabels, r.Scope), err
	}
	memory := r.memoryOf(set)
	in := rollout.Inputs(c, pods, namespaceLabels, r.Scope, eligible, memory, time.Now())
	ro := rollout.State{Blocked: in.Blocked, Halted: halted, Stopping: in.Stopping}
	if halted == "" && len(in.Stalled) > 0 {
		// Recreated pods that do not come back: the rollout stops here, and says where.
		deadline := ptr.Deref(strategy.ProgressDeadlineSeconds, rollout.DefaultProgressDeadlineSeconds)
		ro.Halted = status.HaltSummary(in.Stalled, deadline)
		for _, b := range in.Stalled {
			eventcatalog.Recorder{To: r.Recorder}.Record(in.Target(b), eventcatalog.RolloutHalted, "Evict",
				"SidecarSet %s halted its rollout: this pod of a workload it recreated is not available %ds after the eviction (%s)", c.Name(), deadline, b.Why)
		}
	}
	for _, b := range in.Report {
		r.notUpdatable(in.Target(b), c, b.Why)
	}

	nodes := kubeletVersions{reader: r.APIReader}
	step, err := rollout.Step(c, in, &ro, memory, func(target *corev1.Pod, recreate bool) (rollout.Attempt, error) {
		if recreate {
			return r.tryEviction(ctx, c, set, memory, target)
		}
		return r.tryUpdate(ctx, c, target, namespaceLabels, &nodes)
	})
	for _, b := range step.Report {
		r.notUpdatable(in.Target(b), c, b.Why)
	}
	counts := status.Tally(in.States)
	switch {
	case err != nil:
		return &ro, counts, err
	case step.Stale:
		return &ro, counts, errStale
	}
	return &ro, counts, nil
}

// tryEviction evicts a Pod to recreate, for rollout.Step. Its workload goes into the set's
// status before the eviction: an operator that stops right after evicting still counts the
// replacement against the budget, and still halts when it does not come back.
func (r *RolloutReconciler) tryEviction(ctx context.Context, c *inject.CompiledSet, set *appsv1alpha1.SidecarSet,
	memory rollout.Memory, pod *corev1.Pod) (rollout.Attempt, error) {
	if owner, _ := rollout.RecreatingController(pod); owner != nil {
		ahead := maps.Clone(memory.Recreating)
		ahead[string(owner.UID)] = time.Now()
		if err := r.storeRecreating(ctx, set, ahead); err != nil {
			return rollout.Attempt{}, err
		}
	}
	why, err := r.evict(ctx, c, pod)
	switch {
	case errors.Is(err, errStale):
		return rollout.Attempt{Stale: true}, nil
	case errors.Is(err, errDisruptionBudget):
		return rollout.Attempt{WaitsForBudget: err.Error()}, nil
	case err != nil:
		return rollout.Attempt{}, err
	case why != "":
		return rollout.Attempt{Why: why}, nil
	}
	return rollout.Attempt{EvictedAt: time.Now()}, nil
}

// tryUpdate updates a Pod in place, for rollout.Step.
func (r *RolloutReconciler) tryUpdate(ctx context.Context, c *inject.CompiledSet, pod *corev1.Pod,
	namespaceLabels func(string) map[string]string, nodes *kubeletVersions) (rollout.Attempt, error) {
	hash, no, err := r.updatePod(ctx, c, pod, namespaceLabels, nodes)
	if errors.Is(err, errStale) {
		return rollout.Attempt{Stale: true}, nil // tried again on the requeue
	}
	return rollout.Attempt{Hash: hash, Why: no.Why, Recreatable: no.Recreatable}, err
}

// retryAfter is when a rollout that nothing else wakes should look again: pods its
// PodDisruptionBudget held back, or workloads still settling after an eviction (their
// replacement Pod may not exist yet). Zero: the Pod events wake it.
func retryAfter(ro *rollout.State, memory rollout.Memory) time.Duration {
	switch {
	case len(ro.WaitingForBudget) > 0:
		return recreateRetry
	case len(memory.Recreating) > 0:
		return rollout.RecreateSettle
	}
	return 0
}

// updatePod reads the Pod afresh (the cache holds no spec) and patches the set's new images
// into it, with a test of its resourceVersion. It returns the hash the Pod was patched to, or
// why it cannot be updated in place.
func (r *RolloutReconciler) updatePod(ctx context.Context, c *inject.CompiledSet, cached *corev1.Pod,
	namespaceLabels func(string) map[string]string, nodes *kubeletVersions) (string, rollout.Refusal, error) {
	var pod corev1.Pod
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: cached.Namespace, Name: cached.Name}, &pod); err != nil {
		if apierrors.IsNotFound(err) {
			return "", rollout.Refusal{}, nil
		}
		return "", rollout.Refusal{}, fmt.Errorf("reading pod %s/%s: %w", cached.Namespace, cached.Name, err)
	}
	if pod.DeletionTimestamp != nil {
		return "", rollout.Refusal{}, nil
	}
	u, no, err := r.planPodUpdate(ctx, c, &pod, namespaceLabels, nodes)
	switch {
	case err != nil:
		return "", rollout.Refusal{}, err
	case no.Why != "":
		eventcatalog.Recorder{To: r.Recorder}.Record(&pod, eventcatalog.PodNotUpdatable, "Update", "SidecarSet %s cannot update the sidecars in place: %s", c.Name(), no.Why)
		return "", no, nil
	case u.Current() && len(u.Resources) == 0:
		return u.To, rollout.Refusal{}, nil
	}
	// Resources first, through the resize subresource (in-place resize; the kubelet applies
	// each container's resizePolicy); the patch updates pod, so the images' patch then tests
	// the resourceVersion the resize left.
	if ops := u.ResizePatch(); ops != nil {
		if why, err := r.patchOrRefusal(ctx, &pod, ops, "in-place resize", func(p client.Patch) error { return r.Client.SubResource("resize").Patch(ctx, &pod, p) }); why != "" || err != nil {
			if why != "" && u.PodResources != nil {
				why += "; the pod's pod-level resources were padded for its sidecars (podResources: Pad) and change with them, which needs " +
					"Kubernetes 1.36 or later with the feature gate InPlacePodLevelResourcesVerticalScaling: recreate the pod (updateStrategy.recreate: Evict does)"
			}
			r.notUpdatable(&pod, c, why)
			return "", rollout.Refusal{Why: why}, err
		}
	}
	// A pod with the current hash whose resourcesPolicy sidecars followed an app container's
	// resize has nothing more to patch.
	if ops := u.Patch(); ops != nil {
		if why, err := r.patchOrRefusal(ctx, &pod, ops, "image update", func(p client.Patch) error { return r.Client.Patch(ctx, &pod, p) }); why != "" || err != nil {
			r.notUpdatable(&pod, c, why)
			return "", rollout.Refusal{Why: why}, err
		}
	}
	r.reportPodUpdated(ctx, c, &pod, u)
	return u.To, rollout.Refusal{}, nil
}

// planPodUpdate works out the Pod's update, or why it cannot be updated in place.
func (r *RolloutReconciler) planPodUpdate(ctx context.Context, c *inject.CompiledSet, pod *corev1.Pod,
	namespaceLabels func(string) map[string]string, nodes *kubeletVersions) (*inject.InPlace, rollout.Refusal, error) {
	snap := r.Sets.Load()
	injected, err := r.injectedRevision(ctx, c, pod)
	if err != nil {
		return nil, rollout.Refusal{}, err
	}
	return rollout.PlanInPlace(snap, c, pod, namespaceLabels(pod.Namespace), injected, rollout.InPlaceEnv{
		Revisions: r.Namespace != "", Resize: r.Resize,
		KubeletVersion:     func(node string) (*version.Version, error) { return nodes.of(ctx, node) },
		AllowedAnnotations: r.AllowedAnnotations,
	})
}

// patchOrRefusal applies a patch; a refusal by the API server (an admission policy, an
// infeasible resize) is returned as why the Pod is not updatable, naming what was refused.
func (r *RolloutReconciler) patchOrRefusal(ctx context.Context, pod *corev1.Pod, ops []jsonpatch.Operation, what string, apply func(client.Patch) error) (string, error) {
	tested := pod.ResourceVersion
	err := patchPod(pod, ops, apply)
	if refused := (*refusedError)(nil); errors.As(err, &refused) {
		// A failed resourceVersion test comes back as Invalid with no word of the test (seen
		// on 1.37): the Pod changed since it was read (its kubelet wrote its status) when its
		// resourceVersion moved.
		var live corev1.Pod
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(pod), &live); err != nil {
			return "", client.IgnoreNotFound(err)
		}
		if live.ResourceVersion != tested {
			return "", errStale
		}
		return fmt.Sprintf("the API server refused the %s: %s", what, refused.msg), nil
	}
	return "", err
}

// notUpdatable records on the Pod why the set cannot update it (nothing when why is empty).
func (r *RolloutReconciler) notUpdatable(pod *corev1.Pod, c *inject.CompiledSet, why string) {
	if why != "" {
		eventcatalog.Recorder{To: r.Recorder}.Record(pod, eventcatalog.PodNotUpdatable, "Update", "SidecarSet %s cannot update the sidecars in place: %s", c.Name(), why)
	}
}

// reportPodUpdated logs and records a Pod's in-place update.
func (r *RolloutReconciler) reportPodUpdated(ctx context.Context, c *inject.CompiledSet, pod *corev1.Pod, u *inject.InPlace) {
	var changes []string
	for _, img := range u.Images {
		changes = append(changes, fmt.Sprintf("%s: %s -> %s", img.Name, img.From, img.To))
	}
	for _, res := range u.Resources {
		changes = append(changes, fmt.Sprintf("%s: resources %s", res.Name, describeResources(res.To)))
	}
	logf.FromContext(ctx).Info("Updated pod in place", "pod", klog.KObj(pod), "images", changes)
	limit := r.PodEventsPerRevision
	if limit == 0 {
		limit = 100
	}
	switch send, capped := r.podEvent(c.Name(), u.To, limit); {
	case send:
		eventcatalog.Recorder{To: r.Recorder}.Record(pod, eventcatalog.SidecarUpdated, "Update", "SidecarSet %s updated sidecars in place (%s)", c.Name(), strings.Join(changes, ", "))
	case capped:
		eventcatalog.Recorder{To: r.Recorder}.Record(c.Set, eventcatalog.PodEventsCapped, "Update",
			"%d pods got a SidecarUpdated event for hash %s; further pods are updated without one (status.updatedPods counts them)", limit, u.To)
	}
}

// refusedError is the API server's refusal of a patch for what it contains (not for a stale
// resourceVersion).
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

// patchPod applies JSON patch operations that start with a resourceVersion test. A Pod gone
// is no error; a failed test or a conflict is errStale; a refusal is a *refusedError.
func patchPod(pod *corev1.Pod, ops []jsonpatch.Operation, apply func(client.Patch) error) error {
	raw, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	err = apply(client.RawPatch(types.JSONPatchType, raw))
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err), strings.Contains(err.Error(), "testing value /metadata/resourceVersion failed"):
		return errStale
	case apierrors.IsInvalid(err), apierrors.IsForbidden(err), apierrors.IsBadRequest(err):
		return &refusedError{msg: err.Error()}
	}
	return fmt.Errorf("patching pod %s/%s: %w", pod.Namespace, pod.Name, err)
}

// describeResources is "requests cpu=50m memory=64Mi, limits memory=128Mi".
func describeResources(r corev1.ResourceRequirements) string {
	var parts []string
	for _, l := range []struct {
		name string
		list corev1.ResourceList
	}{{"requests", r.Requests}, {"limits", r.Limits}} {
		if len(l.list) == 0 {
			continue
		}
		var kv []string
		for _, name := range slices.Sorted(maps.Keys(l.list)) {
			q := l.list[name]
			kv = append(kv, string(name)+"="+q.String())
		}
		parts = append(parts, l.name+" "+strings.Join(kv, " "))
	}
	return strings.Join(parts, ", ")
}

// rollingUpdate reports whether the set updates running pods.
func rollingUpdate(set *appsv1alpha1.SidecarSet) bool {
	return set.Spec.UpdateStrategy.Type == appsv1alpha1.RollingUpdate
}
