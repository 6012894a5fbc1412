package rollout

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// Memory is what a set's rollout remembers of its Pods between passes. It is only a
// cache: after a restart or a leader change it is rebuilt from the Pods, whose records say
// what was updated.
type Memory struct {
	// Patched: pod key -> the hash the Pod was patched to. The cache may not show the patch
	// yet; until it does, the Pod counts as updated and restarting, so the budget is never
	// spent twice.
	Patched map[string]string
	// NotUpdatable: pod key -> why the Pod cannot take a hash in place. The verdict holds for
	// that hash and that version of the Pod: when either changes (someone reverts an edit, a
	// refused resize may now fit) the Pod is looked at again.
	NotUpdatable map[string]Verdict
	// Recreating: workload (controller UID) -> when the rollout last evicted a Pod of it. The
	// workload's unavailable Pods count as the rollout's restarts, and no other Pod of it is
	// evicted, until its Pods are available again (and RecreateSettle has passed).
	Recreating map[string]time.Time
}

// Verdict is why one version of a Pod cannot take one hash in place, and whether a Pod created
// now would have it (so recreating the Pod applies the change).
type Verdict struct {
	Hash, ResourceVersion, Why string
	Recreatable                bool
}

// NewMemory returns an empty memory.
func NewMemory() Memory {
	return Memory{Patched: map[string]string{}, NotUpdatable: map[string]Verdict{}, Recreating: map[string]time.Time{}}
}

// Input is what the planner is told of the Pods a set selects, and what the set's
// status counts of them.
type Input struct {
	// Plan[i] is the planner's view of Targets[i], the Pods the set selects outside excluded
	// namespaces.
	Plan    []Pod
	Targets []*corev1.Pod
	// Blocked are the outdated Pods known not to take the set's hash in place.
	Blocked []BlockedPod
	// Report are the Blocked Pods found so in this pass, whose Pod should hear why (an event);
	// memory keeps the verdict, so each version of a Pod hears it once.
	Report []BlockedPod
	// Stalled are the Pods of workloads still unavailable longer than the progress deadline
	// after the rollout evicted one of their Pods, with why: the rollout halts.
	Stalled []BlockedPod
	// Stopping are the restarting Pods whose kubelet still runs an old sidecar container, with
	// their grace period (State.Stopping).
	Stopping []BlockedPod
	// InFlight counts the workloads recreating a Pod of which no unavailable Pod is seen: the
	// evicted Pod is gone and the replacement not yet created. Each holds one restart of the
	// budget (Strategy.InFlight).
	InFlight int
	// States are how the selected Pods stand, excluded ones included: what the set's status counts
	// (status.Tally).
	States []PodState
}

// Target is the selected Pod a BlockedPod of this input names (Report and Stalled are rare:
// a walk is enough).
func (in Input) Target(b BlockedPod) *corev1.Pod {
	for _, t := range in.Targets {
		if t.Namespace == b.Namespace && t.Name == b.Name {
			return t
		}
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: b.Name}}
}

// PodKey is how a rollout names a Pod: namespace/name.
func PodKey(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }

// Inputs classifies the Pods set selects for its  eligible says whether the
// rollout may pick a Pod (the set injects, and the canary selector matches it). It updates
// memory: a patch the cache now shows is forgotten, and so is every Pod no longer selected,
// and every workload done recreating a Pod at now.
func Inputs(set *inject.CompiledSet, pods []*corev1.Pod, namespaceLabels func(string) map[string]string,
	scope inject.Scope, eligible func(*corev1.Pod) bool, memory Memory, now time.Time) Input {
	var in Input
	strategy := set.Set.Spec.UpdateStrategy
	seen, unavailable := map[string]bool{}, map[string]bool{}
	for _, pod := range pods {
		s, selected := Classify(set, pod, namespaceLabels, scope)
		if selected {
			in.States = append(in.States, s)
		}
		if !selected || s.Excluded {
			continue
		}
		key := PodKey(pod)
		seen[key] = true
		p := Pod{Key: key, Namespace: pod.Namespace, Injected: s.Injected, Updated: s.Updated,
			Available: s.Available(), Restarting: s.Restarting() && !s.Terminating, Terminating: s.Terminating, Starting: s.Starting,
			Labels: pod.Labels}
		if p.Restarting && s.Stopping {
			in.Stopping = append(in.Stopping, BlockedPod{Namespace: pod.Namespace, Name: pod.Name, Why: StoppingWhy(pod)})
		}
		// Its hash is current, but an app container was resized in place and a sidecar's
		// resourcesPolicy now computes other resources: the update resizes it.
		p.Resize = p.Updated && inject.NeedsPolicyResize(set, pod)
		if why := stuckUpdate(s); why != "" {
			// Nothing the rollout can do: the Pod carries the current hash, and what it asked
			// of the Pod did not (and will not) happen.
			p.Updated = true
			b := BlockedPod{Namespace: pod.Namespace, Name: pod.Name, Why: why}
			in.Blocked = append(in.Blocked, b)
			if v := (Verdict{Hash: set.Hash, ResourceVersion: pod.ResourceVersion, Why: why}); memory.NotUpdatable[key] != v {
				memory.NotUpdatable[key] = v
				in.Report = append(in.Report, b)
			}
		}
		if memory.Patched[key] == set.Hash {
			if s.Updated {
				delete(memory.Patched, key) // the cache caught up
			} else {
				p.Updated, p.Available, p.Restarting = true, false, true
			}
		}
		v, known := memory.NotUpdatable[key]
		known = known && v.Hash == set.Hash && v.ResourceVersion == pod.ResourceVersion
		p.Eligible = !known && eligible(pod)
		if controller, _ := RecreatingController(pod); controller != nil {
			p.Workload = string(controller.UID)
			if _, ok := memory.Recreating[p.Workload]; ok && !p.Available {
				// Evicted, or its replacement not yet available: the rollout's doing.
				p.Restarting, unavailable[p.Workload] = true, true
			}
		}
		if !p.Updated && !p.Terminating && (!s.Injected || known) {
			why := NotInjected
			if s.Injected {
				why = v.Why
			}
			if r := Recreate(strategy, pod, s.Injected, why, v.Recreatable); r.Workload != "" {
				p.Recreate, p.Eligible = true, eligible(pod)
			} else {
				in.Blocked = append(in.Blocked, BlockedPod{Namespace: pod.Namespace, Name: pod.Name, Why: r.Left, NeverInjected: !s.Injected})
			}
		}
		in.Plan = append(in.Plan, p)
		in.Targets = append(in.Targets, pod)
	}
	forgetUnseen(memory.Patched, seen)
	forgetUnseen(memory.NotUpdatable, seen)
	for w, at := range memory.Recreating {
		switch {
		case !workloadRecreating(at, now, unavailable[w]):
			delete(memory.Recreating, w)
		case !unavailable[w]:
			in.InFlight++
		}
	}
	deadline := time.Duration(ptr.Deref(strategy.ProgressDeadlineSeconds, DefaultProgressDeadlineSeconds)) * time.Second
	for i, p := range in.Plan {
		if at, ok := memory.Recreating[p.Workload]; ok && p.Workload != "" && !p.Available && !p.Terminating && now.Sub(at) > deadline {
			pod := in.Targets[i]
			in.Stalled = append(in.Stalled, BlockedPod{Namespace: pod.Namespace, Name: pod.Name, Why: notReadyReason(pod)})
		}
	}
	for i := range in.Plan {
		if p := &in.Plan[i]; p.Recreate {
			_, p.WorkloadBusy = memory.Recreating[p.Workload]
		}
	}
	return in
}

// DefaultProgressDeadlineSeconds is updateStrategy.progressDeadlineSeconds when it is unset.
const DefaultProgressDeadlineSeconds = 600

// notReadyReason is why the kubelet reports a Pod not ready: the first waiting container's
// reason (ErrImagePull, ImagePullBackOff, CrashLoopBackOff...), else "not ready".
func notReadyReason(pod *corev1.Pod) string {
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, c := range list {
			if w := c.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
				return c.Name + ": " + w.Reason
			}
		}
	}
	if starting(pod) {
		return "still starting"
	}
	return "not ready"
}

// withoutController is why a Pod is left, with why it is not recreated when it would be but
// for its controller.
func withoutController(why string, recreate bool, noController string) string {
	if !recreate {
		return why
	}
	return why + "; not recreated: " + noController
}

// stuckUpdate is why a Pod that records the set's current hash does not run it and never will:
// it declared its own copies of the sidecars, or its kubelet refused the resize.
func stuckUpdate(s PodState) string {
	switch {
	case s.OwnCopies != "":
		return OwnCopies(s.OwnCopies)
	case s.Updated && s.ResizeRefused != "":
		return s.ResizeRefused + "; the sidecars keep their old resources until the pod is recreated"
	}
	return ""
}

// OwnCopies is why a Pod that declared its own containers under the set's sidecar names is
// not counted as running the set's sidecars.
func OwnCopies(names string) string {
	return fmt.Sprintf("the pod declares its own containers named %s, which injection took as the sidecars (they hold every field the SidecarSet declares; their other fields, such as command and args, are the pod author's); status does not count them as the SidecarSet's: recreate the pod without them", names)
}

// NotInjected is why a Pod the set selects but never injected keeps no sidecars of it.
const NotInjected = "not injected by this SidecarSet (created before it, or while it was paused); recreate it to inject"

// forgetUnseen drops the entries of Pods no longer selected.
func forgetUnseen[V any](m map[string]V, seen map[string]bool) {
	for k := range m {
		if !seen[k] {
			delete(m, k)
		}
	}
}
