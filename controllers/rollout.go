package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/revision"
	"github.com/sidecarset/sidecarset-operator/internal/rollout"
	"github.com/sidecarset/sidecarset-operator/internal/status"
)

// errStale means a Pod changed between reading and patching it (the patch's resourceVersion
// test failed): the SidecarSet is reconciled again.
var errStale = errors.New("a pod changed while it was being updated; retrying")

// rolloutMemory is what the rollout keeps between reconciles. It is only a cache: after a
// restart or a leader change it is rebuilt from the Pods (their records say what was updated).
type rolloutMemory struct {
	mu sync.Mutex
	// patched: set -> pod key -> the hash the Pod was patched to. The cache may not show the
	// patch yet; until it does, the Pod counts as updated and unavailable, so the budget is
	// never spent twice.
	patched map[string]map[string]string
	// blocked: set -> pod key -> why the Pod cannot take the set's hash in place. The verdict
	// holds for that hash and that version of the Pod: when either changes (someone reverts an
	// edit, a refused resize may now fit) the Pod is looked at again.
	blocked map[string]map[string]blockedPod
	// podEvents: set -> how many SidecarUpdated events went to pods for which hash.
	podEvents map[string]podEventCount
}

type podEventCount struct {
	hash string
	sent int
}

// podEvent reports whether a pod updated to hash by set gets its own event (the first limit
// per set and hash do), and whether this is the first pod past the limit.
func (m *rolloutMemory) podEvent(set, hash string, limit int) (send, capped bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.podEvents == nil {
		m.podEvents = map[string]podEventCount{}
	}
	c := m.podEvents[set]
	if c.hash != hash {
		c = podEventCount{hash: hash}
	}
	c.sent++
	m.podEvents[set] = c
	return c.sent <= limit, c.sent == limit+1
}

type blockedPod struct{ hash, resourceVersion, why string }

// roll plans the next step of a RollingUpdate and patches the Pods it picks. It returns where
// the rollout stands and the status counts, which it takes while it classifies the Pods. A Pod
// the API server refuses to patch is reported and skipped; the others go on.
func (r *SidecarSetReconciler) roll(ctx context.Context, c *inject.CompiledSet, pods []*corev1.Pod,
	namespaceLabels func(string) map[string]string) (*status.Rollout, status.Counts, error) {
	set := c.Set
	strategy := set.Spec.UpdateStrategy
	canary := labels.Everything()
	if strategy.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(strategy.Selector)
		if err != nil {
			return &status.Rollout{}, status.Count(c, pods, namespaceLabels, r.Scope), fmt.Errorf("spec.updateStrategy.selector: %w", err)
		}
		canary = sel
	}
	injecting := slices.ContainsFunc(r.Sets.Load().Sets, func(s *inject.CompiledSet) bool { return s.Name() == c.Name() })

	// The maps of one set are only used by its own reconcile, which never runs twice at once.
	patched, blocked := r.memory.forSet(set.Name)
	var (
		plan    []rollout.Pod
		targets []*corev1.Pod
		ro      status.Rollout
		counts  status.Counts
	)
	seen := map[string]bool{}
	for _, pod := range pods {
		s, selected := status.Classify(c, pod, namespaceLabels, r.Scope)
		if selected {
			counts.Add(s)
		}
		if !selected || s.Excluded {
			continue
		}
		key := pod.Namespace + "/" + pod.Name
		seen[key] = true
		p := rolloutPod(key, s)
		if patched[key] == c.Hash {
			if s.Updated {
				delete(patched, key) // the cache caught up
			} else {
				p.Updated, p.Available, p.Restarting = true, false, true
			}
		}
		b, isBlocked := blocked[key]
		isBlocked = isBlocked && b.hash == c.Hash && b.resourceVersion == pod.ResourceVersion
		if !p.Updated && !p.Terminating {
			switch {
			case !s.Injected:
				ro.Blocked = append(ro.Blocked, status.BlockedPod{Namespace: pod.Namespace, Name: pod.Name, Why: notInjected, NeverInjected: true})
			case isBlocked:
				ro.Blocked = append(ro.Blocked, status.BlockedPod{Namespace: pod.Namespace, Name: pod.Name, Why: b.why})
			}
		}
		p.Eligible = injecting && !isBlocked && canary.Matches(labels.Set(pod.Labels))
		plan = append(plan, p)
		targets = append(targets, pod)
	}
	forget(patched, seen)
	forget(blocked, seen)

	// Plan, update, and plan again while planned pods turn out not updatable: the budget they
	// would have used is free, and the condition must not report updates that did not happen.
	var (
		stale   bool
		started []int
	)
	nodes := kubeletVersions{reader: r.APIReader}
	for {
		p, err := rollout.Compute(plan, rollout.Strategy{Partition: strategy.Partition, MaxUnavailable: strategy.MaxUnavailable, Paused: strategy.Paused})
		if err != nil {
			return &ro, counts, err
		}
		ro.Plan = p
		replan := false
		for _, i := range p.Update {
			hash, why, err := r.updatePod(ctx, c, targets[i], namespaceLabels, &nodes)
			switch {
			case errors.Is(err, errStale):
				stale = true
				plan[i].Eligible = false // tried again on the requeue
			case err != nil:
				ro.Plan.Update = started
				return &ro, counts, err
			case why != "":
				blocked[plan[i].Key] = blockedPod{hash: c.Hash, resourceVersion: targets[i].ResourceVersion, why: why}
				ro.Blocked = append(ro.Blocked, status.BlockedPod{Namespace: targets[i].Namespace, Name: targets[i].Name, Why: why})
				plan[i].Eligible, replan = false, true
			case hash != "":
				patched[plan[i].Key] = hash
				plan[i].Updated, plan[i].Available, plan[i].Restarting = true, false, true
				started = append(started, i)
			}
		}
		if !replan {
			break
		}
	}
	ro.Plan.Update = started // what this pass started, across the plans
	if stale {
		return &ro, counts, errStale
	}
	return &ro, counts, nil
}

// notInjected is why a Pod the set selects but never injected keeps no sidecars of it.
const notInjected = "not injected by this SidecarSet (created before it, or while it was paused); recreate it to inject"

// rolloutPod is what the planner needs of a Pod the set selects.
func rolloutPod(key string, s status.PodState) rollout.Pod {
	return rollout.Pod{Key: key, Namespace: s.Pod.Namespace, Injected: s.Injected, Updated: s.Updated,
		Available: s.Available(), Restarting: s.Restarting(), Terminating: s.Terminating, Starting: s.Starting}
}

// updatePod reads the Pod afresh (the cache holds no spec) and patches the set's new images
// into it, with a test of its resourceVersion. It returns the hash the Pod was patched to, or
// why it cannot be updated in place.
func (r *SidecarSetReconciler) updatePod(ctx context.Context, c *inject.CompiledSet, cached *corev1.Pod,
	namespaceLabels func(string) map[string]string, nodes *kubeletVersions) (hash, why string, err error) {
	var pod corev1.Pod
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: cached.Namespace, Name: cached.Name}, &pod); err != nil {
		if apierrors.IsNotFound(err) {
			return "", "", nil
		}
		return "", "", fmt.Errorf("reading pod %s/%s: %w", cached.Namespace, cached.Name, err)
	}
	if pod.DeletionTimestamp != nil {
		return "", "", nil
	}
	u, why, err := r.planPodUpdate(ctx, c, &pod, namespaceLabels, nodes)
	switch {
	case err != nil:
		return "", "", err
	case why != "":
		r.event(&pod, corev1.EventTypeWarning, "PodNotUpdatable", "Update", "SidecarSet %s cannot update the sidecars in place: %s", c.Name(), why)
		return "", why, nil
	case u.Current():
		return u.To, "", nil
	}
	// Resources first, through the resize subresource (in-place resize; the kubelet applies
	// each container's resizePolicy); the patch updates pod, so the images' patch then tests
	// the resourceVersion the resize left.
	if ops := u.ResizePatch(); ops != nil {
		if why, err := r.patchOrRefusal(&pod, ops, "in-place resize", func(p client.Patch) error { return r.Client.SubResource("resize").Patch(ctx, &pod, p) }); why != "" || err != nil {
			r.notUpdatable(&pod, c, why)
			return "", why, err
		}
	}
	if why, err := r.patchOrRefusal(&pod, u.Patch(), "image update", func(p client.Patch) error { return r.Client.Patch(ctx, &pod, p) }); why != "" || err != nil {
		r.notUpdatable(&pod, c, why)
		return "", why, err
	}
	r.updated(ctx, c, &pod, u)
	return u.To, "", nil
}

// planPodUpdate works out the Pod's update, or why it cannot be updated in place.
func (r *SidecarSetReconciler) planPodUpdate(ctx context.Context, c *inject.CompiledSet, pod *corev1.Pod,
	namespaceLabels func(string) map[string]string, nodes *kubeletVersions) (*inject.InPlace, string, error) {
	snap := r.Sets.Load()
	injected, err := r.injectedRevision(ctx, c, pod)
	if err != nil {
		return nil, "", err
	}
	// The rollout moves pods to the set's current spec, even when new pods get a pinned revision.
	candidates := inject.Candidates(snap.Sets, pod.Labels)
	for i := range candidates {
		if candidates[i].Name() == c.Name() {
			candidates[i] = c
		}
	}
	lookup := func(name string) (*inject.CompiledSet, bool) {
		if name == c.Name() {
			return c, true
		}
		return snap.Get(name)
	}
	u, err := inject.UpdateInPlace(inject.Input{Pod: pod, Sets: candidates, NamespaceLabels: namespaceLabels(pod.Namespace), Known: lookup}, c.Name(), injected)
	switch {
	case err != nil:
		return nil, err.Error(), nil //nolint:nilerr // the engine's refusal is why the pod is not updatable, not a reconcile error
	case u.Current():
		return u, "", nil
	case len(u.Blocked) > 0:
		return nil, strings.Join(u.Blocked, "; "), nil
	case injected == nil:
		// Without the content the Pod was injected with, a sidecar someone edited since (a
		// hotfix with kubectl set image) cannot be told from ours: never overwrite it.
		return nil, r.unknownInjection(pod, c), nil
	}
	if why := u.ResizeRefusal(); why != "" {
		return nil, why, nil
	}
	if why, err := nodes.refusesNativeSidecarImages(ctx, pod, u); why != "" || err != nil {
		return nil, why, err
	}
	return u, "", nil
}

// unknownInjection says why a Pod whose injected content is not known is left alone.
func (r *SidecarSetReconciler) unknownInjection(pod *corev1.Pod, c *inject.CompiledSet) string {
	if r.Namespace == "" {
		return "the operator stores no revisions (it runs without POD_NAMESPACE), so a sidecar edited since injection cannot be told apart; recreate the pod to update it"
	}
	hash, _ := inject.InjectedHash(pod.Annotations, c.Name())
	return fmt.Sprintf("the revision it was injected with (%s) is not stored, so a sidecar edited since injection cannot be told apart; recreate the pod to update it", revision.Name(c.Name(), hash))
}

// patchOrRefusal applies a patch; a refusal by the API server (an admission policy, an
// infeasible resize) is returned as why the Pod is not updatable, naming what was refused.
func (r *SidecarSetReconciler) patchOrRefusal(pod *corev1.Pod, ops []jsonpatch.Operation, what string, apply func(client.Patch) error) (string, error) {
	err := patchPod(pod, ops, apply)
	if refused := (*refusedError)(nil); errors.As(err, &refused) {
		return fmt.Sprintf("the API server refused the %s: %s", what, refused.msg), nil
	}
	return "", err
}

// notUpdatable records on the Pod why the set cannot update it (nothing when why is empty).
func (r *SidecarSetReconciler) notUpdatable(pod *corev1.Pod, c *inject.CompiledSet, why string) {
	if why != "" {
		r.event(pod, corev1.EventTypeWarning, "PodNotUpdatable", "Update", "SidecarSet %s cannot update the sidecars in place: %s", c.Name(), why)
	}
}

// updated logs and records a Pod's in-place update.
func (r *SidecarSetReconciler) updated(ctx context.Context, c *inject.CompiledSet, pod *corev1.Pod, u *inject.InPlace) {
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
	switch send, capped := r.memory.podEvent(c.Name(), u.To, limit); {
	case send:
		r.event(pod, corev1.EventTypeNormal, "SidecarUpdated", "Update", "SidecarSet %s updated sidecars in place (%s)", c.Name(), strings.Join(changes, ", "))
	case capped:
		r.event(c.Set, corev1.EventTypeNormal, "PodEventsCapped", "Update",
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

func (r *SidecarSetReconciler) event(obj client.Object, kind, reason, action, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(obj, nil, kind, reason, action, format, args...)
	}
}

func (m *rolloutMemory) forSet(set string) (map[string]string, map[string]blockedPod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.patched == nil {
		m.patched, m.blocked = map[string]map[string]string{}, map[string]map[string]blockedPod{}
	}
	if m.patched[set] == nil {
		m.patched[set], m.blocked[set] = map[string]string{}, map[string]blockedPod{}
	}
	return m.patched[set], m.blocked[set]
}

// forget drops the entries of pods no longer matched.
func forget[V any](m map[string]V, seen map[string]bool) {
	for k := range m {
		if !seen[k] {
			delete(m, k)
		}
	}
}

// rollingUpdate reports whether the set updates running pods.
func rollingUpdate(set *appsv1alpha1.SidecarSet) bool {
	return set.Spec.UpdateStrategy.Type == appsv1alpha1.RollingUpdate
}

// drop forgets a set that was deleted or no longer rolls.
func (m *rolloutMemory) drop(set string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.patched, set)
	delete(m.blocked, set)
	delete(m.podEvents, set)
}
