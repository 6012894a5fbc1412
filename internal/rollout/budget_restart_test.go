package rollout

import (
	"testing"
	"time"

	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/rollout/podtest"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// rt4Step runs one rollout step of set over pods with memory and returns the names of the Pods
// it started (in place or by eviction); every try succeeds (in place: the new hash; eviction:
// evicted now).
func rt4Step(t *testing.T, pods []*corev1.Pod, memory Memory, now time.Time, evict bool) []string {
	t.Helper()
	set := podtest.Set(t, "log-agent", nil, func(s *appsv1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy = appsv1alpha1.UpdateStrategy{Type: appsv1alpha1.RollingUpdate, MaxUnavailable: ptr.To(intstr.FromInt32(1))}
		if evict {
			s.Spec.UpdateStrategy.Recreate = appsv1alpha1.RecreateEvict
			s.Spec.UpdateStrategy.Remediate = appsv1alpha1.RecreateEvict
		}
	})
	for _, p := range pods {
		if p.Annotations[appsv1alpha1.StatusAnnotation] == "CURRENT" {
			podtest.InjectedWith(map[string]string{"log-agent": set.Hash})(p)
		}
	}
	in := Inputs(set, pods, func(string) map[string]string { return nil }, inject.Scope{}, func(*corev1.Pod) bool { return true }, memory, now)
	ro := State{Blocked: in.Blocked}
	_, err := Step(set, in, &ro, memory, func(pod *corev1.Pod, recreate bool) (Attempt, error) {
		if recreate {
			return Attempt{EvictedAt: now}, nil
		}
		return Attempt{Hash: set.Hash}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, i := range ro.Plan.Update {
		out = append(out, in.Targets[i].Namespace+"/"+in.Targets[i].Name)
	}
	return out
}

func rt4Owned(uid string) podtest.Opt {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs-" + uid, UID: types.UID(uid), Controller: ptr.To(true)}}
	}
}

// updatedAppNotReady is a Pod of namespace ns that the rollout just moved to the current hash:
// its sidecar runs the new image and is ready, but the Pod is not Ready (its app's readiness
// depends on the sidecar, e.g. a proxy; or the new sidecar breaks the app).
func updatedAppNotReady(ns, name string, opts ...podtest.Opt) *corev1.Pod {
	base := []podtest.Opt{podtest.InNamespace(ns), func(p *corev1.Pod) {
		p.Name, p.ResourceVersion = name, "2"
		podtest.SetAnnotation(p, appsv1alpha1.StatusAnnotation, "CURRENT")
	}, podtest.Ready(corev1.ConditionFalse), podtest.Spec("log-agent", "registry.example/log-agent:1"), podtest.Running("log-agent", "registry.example/log-agent:1"),
		func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "app", Image: "app:1"})
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: "app", Image: "app:1", Ready: false, Started: ptr.To(true)})
		}}
	return podtest.Pod(append(base, opts...)...)
}

// TestUpdateThatBreaksTheAppHoldsTheBudget: maxUnavailable 1, three namespaces. The
// rollout updated shop-a/web in place; its sidecar restarted and is ready, but the Pod is not
// Ready since (its app depends on the sidecar, or the new sidecar broke it). Counted as the
// Pod's own unavailability, it would hold back only namespace shop-a, and the next step would
// update shop-b/web (2 Pods down with maxUnavailable 1), and so on: one Pod per namespace, a
// rollout that never stops on a sidecar that breaks its apps. It is the rollout's. README/docs/guarantees.md: "A rolling update never takes down more than
// maxUnavailable pods".
func TestUpdateThatBreaksTheAppHoldsTheBudget(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	pods := []*corev1.Pod{
		updatedAppNotReady("shop-a", "web"),
		outdated("web", podtest.InNamespace("shop-b")),
		outdated("web", podtest.InNamespace("shop-c")),
	}
	started := rt4Step(t, pods, NewMemory(), now, false)
	if len(started) > 0 {
		t.Fatalf("shop-a/web, updated by this rollout, is not Ready since (its sidecar is); maxUnavailable 1, yet the step also started %v", started)
	}
}

// TestEvictionBudgetHoldsAcrossOperatorRestart: recreate: Evict, maxUnavailable 1. The rollout
// evicted a Pod of ReplicaSet rs-a (namespace shop-a); the replacement runs the current hash,
// its sidecar is ready, its app still warming up (not Ready). With the rollout's memory (same
// process) that replacement holds the set-wide budget (memory.Recreating) and nothing else
// starts. After an operator restart or a leader change (empty memory, which the Memory
// doc says is "only a cache ... rebuilt from the Pods") the replacement counts as shop-a's own
// unavailability, and the step would evict shop-b's Pod (2 down, maxUnavailable 1; shop-c's next). docs/guarantees.md:
// the budget "holds across operator restarts"; docs/md: "An evicted Pod counts
// against the set-wide budget until its workload's Pods are all available again". Also, the
// progressDeadlineSeconds halt (memory.Recreating) can no longer fire for rs-a.
func TestEvictionBudgetHoldsAcrossOperatorRestart(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	envChanged := func(p *corev1.Pod) {} // outdated: the change needs recreation (verdict below)
	pods := func() []*corev1.Pod {
		return []*corev1.Pod{
			updatedAppNotReady("shop-a", "web-new", rt4Owned("rs-a")),
			outdated("web", podtest.InNamespace("shop-b"), rt4Owned("rs-b"), envChanged),
			outdated("web", podtest.InNamespace("shop-c"), rt4Owned("rs-c"), envChanged),
		}
	}
	verdicts := func(m Memory, ps []*corev1.Pod, hash string) {
		for _, p := range ps[1:] {
			m.NotUpdatable[PodKey(p)] = Verdict{Hash: hash, ResourceVersion: p.ResourceVersion, Why: "spec.containers[log-agent].env: changed", Recreatable: true}
		}
	}
	hash := podtest.Set(t, "log-agent", nil).Hash

	// Control: the same process, which evicted rs-a's Pod 30 s ago.
	same := NewMemory()
	same.Recreating["rs-a"] = now.Add(-30 * time.Second)
	ps := pods()
	verdicts(same, ps, hash)
	if got := rt4Step(t, ps, same, now, true); len(got) > 0 {
		t.Fatalf("control: with the rollout's memory the step started %v; want nothing (rs-a recreating holds the budget)", got)
	}

	// After a restart: the memory is what the set's status stored; the in-place verdicts are
	// rebuilt on the first pass. Even with nothing stored, the replacement (at the current
	// hash, not available) holds the budget.
	restarted := NewMemory()
	restarted.Recreating = RecreatingFromStatus(RecreatingStatus(same.Recreating))
	ps = pods()
	verdicts(restarted, ps, hash)
	if got := rt4Step(t, ps, restarted, now, true); len(got) > 0 {
		t.Fatalf("after an operator restart the step evicted %v while rs-a's replacement (evicted by the rollout 30 s earlier) is still not available: %d Pods down, maxUnavailable 1", got, len(got)+1)
	}
	restarted = NewMemory()
	ps = pods()
	verdicts(restarted, ps, hash)
	if got := rt4Step(t, ps, restarted, now, true); len(got) > 0 {
		t.Fatalf("after an operator restart the step evicted %v while rs-a's replacement (evicted by the rollout 30 s earlier) is still not available: %d Pods down, maxUnavailable 1", got, len(got)+1)
	}
}

// TestProgressDeadlineHaltsAfterRestart: the rollout evicted a Pod of rs-a 11 minutes ago
// (progressDeadlineSeconds defaults to 600) and its replacement crash-loops. An operator that
// restarts, or a new leader, reads the eviction from the set's status and still halts; without
// it (an empty memory) nothing would.
func TestProgressDeadlineHaltsAfterRestart(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	set := podtest.Set(t, "log-agent", nil, func(s *appsv1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy = appsv1alpha1.UpdateStrategy{Type: appsv1alpha1.RollingUpdate, MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Recreate: appsv1alpha1.RecreateEvict}
	})
	replacement := updatedAppNotReady("shop-a", "web-new", rt4Owned("rs-a"))
	podtest.InjectedWith(map[string]string{"log-agent": set.Hash})(replacement)
	before := NewMemory()
	before.Recreating["rs-a"] = now.Add(-11 * time.Minute)
	stored := RecreatingStatus(before.Recreating)
	if len(stored) != 1 || stored[0].UID != "rs-a" {
		t.Fatalf("status.recreating = %+v; want rs-a", stored)
	}
	for _, tc := range []struct {
		name   string
		memory Memory
		halts  bool
	}{
		{"restarted, from the status", func() Memory { m := NewMemory(); m.Recreating = RecreatingFromStatus(stored); return m }(), true},
		{"nothing stored", NewMemory(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Inputs(set, []*corev1.Pod{replacement}, func(string) map[string]string { return nil }, inject.Scope{},
				func(*corev1.Pod) bool { return true }, tc.memory, now)
			if halts := len(in.Stalled) > 0; halts != tc.halts {
				t.Fatalf("stalled %+v; want a halt: %v", in.Stalled, tc.halts)
			}
		})
	}
}
