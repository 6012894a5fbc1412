package rollout

import (
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sidecarset/sidecarset-operator/internal/rollout/podtest"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// TestInputs: what the planner is told of each Pod, from the Pod and from what the
// rollout remembers of it.
func TestInputs(t *testing.T) {
	set := podtest.Set(t, "log-agent", nil)
	image := set.Set.Spec.Containers[0].Image
	named := func(name, rv string) podtest.Opt {
		return func(p *corev1.Pod) { p.Name, p.ResourceVersion = name, rv }
	}
	old := podtest.InjectedWith(map[string]string{"log-agent": "old"})
	settledOld := []podtest.Opt{old, podtest.Ready(corev1.ConditionTrue), podtest.Spec("log-agent", "registry.example/log-agent:0"), podtest.Running("log-agent", "registry.example/log-agent:0")}
	settledNew := []podtest.Opt{podtest.InjectedWith(map[string]string{"log-agent": set.Hash}), podtest.Ready(corev1.ConditionTrue), podtest.Spec("log-agent", image), podtest.Running("log-agent", image)}
	with := func(base []podtest.Opt, more ...podtest.Opt) *corev1.Pod {
		return podtest.Pod(append(slices.Clone(base), more...)...)
	}
	everyPod := func(*corev1.Pod) bool { return true }
	evicting := podtest.Set(t, "log-agent", nil, func(s *appsv1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy.Recreate, s.Spec.UpdateStrategy.Remediate = appsv1alpha1.RecreateEvict, appsv1alpha1.RecreateEvict
	})
	ownedBy := func(kind, uid string) podtest.Opt {
		return func(p *corev1.Pod) {
			apiVersion := "apps/v1"
			if kind == "ReplicationController" {
				apiVersion = "v1"
			}
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "web", UID: types.UID(uid), Controller: ptr.To(true)}}
		}
	}
	envChanged := Verdict{Hash: set.Hash, ResourceVersion: "1", Why: "spec.containers[log-agent].env: changed", Recreatable: true}
	edited := Verdict{Hash: set.Hash, ResourceVersion: "1", Why: "spec.containers[log-agent].image: changed since injection", Recreatable: false}
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

	tests := []struct {
		name string
		// evict: the set recreates and remediates by eviction.
		evict    bool
		pods     []*corev1.Pod
		eligible func(*corev1.Pod) bool
		memory   Memory
		want     []Pod
		blocked  []BlockedPod
		report   []BlockedPod
		stalled  []BlockedPod
		// wantInFlight: recreations no pod shows.
		wantInFlight int
		// wantMemory is the memory afterwards.
		wantMemory Memory
		// wantUpdated and wantReady, when wantState is set, are how the one Pod stands for status.
		wantState, wantUpdated, wantReady bool
	}{{
		name: "an outdated available pod is eligible",
		pods: []*corev1.Pod{with(settledOld, named("a", "1"))},
		want: []Pod{{Key: "shop/a", Namespace: "shop", Injected: true, Available: true, Eligible: true}},
	}, {
		name:       "a patch the cache does not show yet: updated and restarting",
		pods:       []*corev1.Pod{with(settledOld, named("a", "1"))},
		memory:     Memory{Patched: map[string]string{"shop/a": set.Hash}},
		want:       []Pod{{Key: "shop/a", Namespace: "shop", Injected: true, Updated: true, Restarting: true, Eligible: true}},
		wantMemory: Memory{Patched: map[string]string{"shop/a": set.Hash}},
	}, {
		name:   "a patch the cache shows is forgotten",
		pods:   []*corev1.Pod{with(settledNew, named("a", "2"))},
		memory: Memory{Patched: map[string]string{"shop/a": set.Hash}},
		want:   []Pod{{Key: "shop/a", Namespace: "shop", Injected: true, Updated: true, Available: true, Eligible: true}},
	}, {
		name:       "a patch to an older hash does not count",
		pods:       []*corev1.Pod{with(settledOld, named("a", "1"))},
		memory:     Memory{Patched: map[string]string{"shop/a": "older"}},
		want:       []Pod{{Key: "shop/a", Namespace: "shop", Injected: true, Available: true, Eligible: true}},
		wantMemory: Memory{Patched: map[string]string{"shop/a": "older"}},
	}, {
		name:       "a verdict on this version of the pod holds",
		pods:       []*corev1.Pod{with(settledOld, named("a", "1"))},
		memory:     Memory{NotUpdatable: map[string]Verdict{"shop/a": {Hash: set.Hash, ResourceVersion: "1", Why: "edited"}}},
		want:       []Pod{{Key: "shop/a", Namespace: "shop", Injected: true, Available: true}},
		blocked:    []BlockedPod{{Namespace: "shop", Name: "a", Why: "edited"}},
		wantMemory: Memory{NotUpdatable: map[string]Verdict{"shop/a": {Hash: set.Hash, ResourceVersion: "1", Why: "edited"}}},
	}, {
		name:       "a verdict on an older version of the pod is looked at again",
		pods:       []*corev1.Pod{with(settledOld, named("a", "2"))},
		memory:     Memory{NotUpdatable: map[string]Verdict{"shop/a": {Hash: set.Hash, ResourceVersion: "1", Why: "edited"}}},
		want:       []Pod{{Key: "shop/a", Namespace: "shop", Injected: true, Available: true, Eligible: true}},
		wantMemory: Memory{NotUpdatable: map[string]Verdict{"shop/a": {Hash: set.Hash, ResourceVersion: "1", Why: "edited"}}},
	}, {
		name:       "a verdict on an older hash is looked at again",
		pods:       []*corev1.Pod{with(settledOld, named("a", "1"))},
		memory:     Memory{NotUpdatable: map[string]Verdict{"shop/a": {Hash: "older", ResourceVersion: "1", Why: "edited"}}},
		want:       []Pod{{Key: "shop/a", Namespace: "shop", Injected: true, Available: true, Eligible: true}},
		wantMemory: Memory{NotUpdatable: map[string]Verdict{"shop/a": {Hash: "older", ResourceVersion: "1", Why: "edited"}}},
	}, {
		name:    "a pod never injected is blocked, and the planner knows it is not injected",
		pods:    []*corev1.Pod{podtest.Pod(named("a", "1"), podtest.Ready(corev1.ConditionTrue), podtest.Running("app", "app:1"))},
		want:    []Pod{{Key: "shop/a", Namespace: "shop", Available: true, Eligible: true}},
		blocked: []BlockedPod{{Namespace: "shop", Name: "a", Why: NotInjected, NeverInjected: true}},
	}, {
		name: "a pod that brought its own copy of the sidecar: nothing to update, reported, not counted updated",
		pods: []*corev1.Pod{podtest.Pod(named("a", "1"), podtest.Ready(corev1.ConditionTrue), podtest.Spec("log-agent", image), podtest.Running("log-agent", image),
			func(p *corev1.Pod) {
				podtest.SetAnnotation(p, appsv1alpha1.StatusAnnotation, inject.Records{"log-agent": {Hash: set.Hash}}.Encode())
			})},
		want:      []Pod{{Key: "shop/a", Namespace: "shop", Injected: true, Updated: true, Available: true}},
		blocked:   []BlockedPod{{Namespace: "shop", Name: "a", Why: OwnCopies("log-agent")}},
		report:    []BlockedPod{{Namespace: "shop", Name: "a", Why: OwnCopies("log-agent")}},
		wantState: true, wantReady: true,
		wantMemory: Memory{NotUpdatable: map[string]Verdict{"shop/a": {Hash: set.Hash, ResourceVersion: "1", Why: OwnCopies("log-agent")}}},
	}, {
		name: "a pod that brought its own copy hears it once",
		pods: []*corev1.Pod{podtest.Pod(named("a", "1"), podtest.Ready(corev1.ConditionTrue), podtest.Spec("log-agent", image), podtest.Running("log-agent", image),
			func(p *corev1.Pod) {
				podtest.SetAnnotation(p, appsv1alpha1.StatusAnnotation, inject.Records{"log-agent": {Hash: set.Hash}}.Encode())
			})},
		memory:     Memory{NotUpdatable: map[string]Verdict{"shop/a": {Hash: set.Hash, ResourceVersion: "1", Why: OwnCopies("log-agent")}}},
		want:       []Pod{{Key: "shop/a", Namespace: "shop", Injected: true, Updated: true, Available: true}},
		blocked:    []BlockedPod{{Namespace: "shop", Name: "a", Why: OwnCopies("log-agent")}},
		wantMemory: Memory{NotUpdatable: map[string]Verdict{"shop/a": {Hash: set.Hash, ResourceVersion: "1", Why: OwnCopies("log-agent")}}},
	}, {
		name: "a resize the kubelet refused: nothing to update, reported",
		pods: []*corev1.Pod{with(settledNew, named("a", "1"), podtest.Resize(corev1.PodResizePending, corev1.PodReasonInfeasible))},
		want: []Pod{{Key: "shop/a", Namespace: "shop", Injected: true, Updated: true, Available: true}},
		blocked: []BlockedPod{{Namespace: "shop", Name: "a", Why: "the kubelet refused the in-place resize (PodResizePending, Infeasible: Node didn't have enough capacity); " +
			"the sidecars keep their old resources until the pod is recreated"}},
		report: []BlockedPod{{Namespace: "shop", Name: "a", Why: "the kubelet refused the in-place resize (PodResizePending, Infeasible: Node didn't have enough capacity); " +
			"the sidecars keep their old resources until the pod is recreated"}},
		wantState: true, wantUpdated: true, wantReady: true,
		wantMemory: Memory{NotUpdatable: map[string]Verdict{"shop/a": {Hash: set.Hash, ResourceVersion: "1",
			Why: "the kubelet refused the in-place resize (PodResizePending, Infeasible: Node didn't have enough capacity); the sidecars keep their old resources until the pod is recreated"}}},
	}, {
		name:       "Evict: an outdated pod that cannot change in place is recreated",
		evict:      true,
		pods:       []*corev1.Pod{with(settledOld, named("a", "1"), ownedBy("ReplicaSet", "rs-1"))},
		memory:     Memory{NotUpdatable: map[string]Verdict{"shop/a": envChanged}},
		want:       []Pod{{Key: "shop/a", Namespace: "shop", Injected: true, Available: true, Eligible: true, Recreate: true, Workload: "rs-1"}},
		wantMemory: Memory{NotUpdatable: map[string]Verdict{"shop/a": envChanged}},
	}, {
		name:       "Evict: a bare pod is reported, not recreated",
		evict:      true,
		pods:       []*corev1.Pod{with(settledOld, named("a", "1"))},
		memory:     Memory{NotUpdatable: map[string]Verdict{"shop/a": envChanged}},
		want:       []Pod{{Key: "shop/a", Namespace: "shop", Injected: true, Available: true}},
		blocked:    []BlockedPod{{Namespace: "shop", Name: "a", Why: envChanged.Why + "; not recreated: it has no controller to recreate it (a bare pod): delete and create it yourself"}},
		wantMemory: Memory{NotUpdatable: map[string]Verdict{"shop/a": envChanged}},
	}, {
		name:       "Evict: a Job's pod is reported, not recreated",
		evict:      true,
		pods:       []*corev1.Pod{with(settledOld, named("a", "1"), func(p *corev1.Pod) { ownedBy("Job", "job-1")(p); p.OwnerReferences[0].APIVersion = "batch/v1" })},
		memory:     Memory{NotUpdatable: map[string]Verdict{"shop/a": envChanged}},
		want:       []Pod{{Key: "shop/a", Namespace: "shop", Injected: true, Available: true}},
		blocked:    []BlockedPod{{Namespace: "shop", Name: "a", Why: envChanged.Why + "; not recreated: its controller, Job web, does not recreate an evicted pod as it was"}},
		wantMemory: Memory{NotUpdatable: map[string]Verdict{"shop/a": envChanged}},
	}, {
		name:       "Evict: a pod whose sidecar was edited is never recreated",
		evict:      true,
		pods:       []*corev1.Pod{with(settledOld, named("a", "1"), ownedBy("ReplicaSet", "rs-1"))},
		memory:     Memory{NotUpdatable: map[string]Verdict{"shop/a": edited}},
		want:       []Pod{{Key: "shop/a", Namespace: "shop", Injected: true, Available: true, Workload: "rs-1"}},
		blocked:    []BlockedPod{{Namespace: "shop", Name: "a", Why: edited.Why}},
		wantMemory: Memory{NotUpdatable: map[string]Verdict{"shop/a": edited}},
	}, {
		name:  "Evict: a pod never injected is remediated",
		evict: true,
		pods:  []*corev1.Pod{podtest.Pod(named("a", "1"), podtest.Ready(corev1.ConditionTrue), podtest.Running("app", "app:1"), ownedBy("StatefulSet", "sts-1"))},
		want:  []Pod{{Key: "shop/a", Namespace: "shop", Available: true, Eligible: true, Recreate: true, Workload: "sts-1"}},
	}, {
		name:  "Evict: while a workload recreates a pod, its unavailable pods are the rollout's and the others wait",
		evict: true,
		pods: []*corev1.Pod{
			podtest.Pod(named("a", "1"), ownedBy("ReplicaSet", "rs-1"), func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }),
			with(settledOld, named("b", "1"), ownedBy("ReplicaSet", "rs-1")),
		},
		memory: Memory{NotUpdatable: map[string]Verdict{"shop/b": envChanged}, Recreating: map[string]time.Time{"rs-1": now.Add(-time.Minute)}},
		want: []Pod{
			{Key: "shop/a", Namespace: "shop", Terminating: true, Restarting: true, Eligible: true, Workload: "rs-1"},
			{Key: "shop/b", Namespace: "shop", Injected: true, Available: true, Eligible: true, Recreate: true, Workload: "rs-1", WorkloadBusy: true},
		},
		wantMemory: Memory{NotUpdatable: map[string]Verdict{"shop/b": envChanged}, Recreating: map[string]time.Time{"rs-1": now.Add(-time.Minute)}},
	}, {
		name:       "Evict: a workload whose pods are all available again is done recreating",
		evict:      true,
		pods:       []*corev1.Pod{with(settledOld, named("b", "1"), ownedBy("ReplicaSet", "rs-1"))},
		memory:     Memory{NotUpdatable: map[string]Verdict{"shop/b": envChanged}, Recreating: map[string]time.Time{"rs-1": now.Add(-time.Minute)}},
		want:       []Pod{{Key: "shop/b", Namespace: "shop", Injected: true, Available: true, Eligible: true, Recreate: true, Workload: "rs-1"}},
		wantMemory: Memory{NotUpdatable: map[string]Verdict{"shop/b": envChanged}},
	}, {
		name:         "Evict: a workload that evicted a pod moments ago still waits for the replacement",
		evict:        true,
		pods:         []*corev1.Pod{with(settledOld, named("b", "1"), ownedBy("ReplicaSet", "rs-1"))},
		memory:       Memory{NotUpdatable: map[string]Verdict{"shop/b": envChanged}, Recreating: map[string]time.Time{"rs-1": now.Add(-time.Second)}},
		want:         []Pod{{Key: "shop/b", Namespace: "shop", Injected: true, Available: true, Eligible: true, Recreate: true, Workload: "rs-1", WorkloadBusy: true}},
		wantMemory:   Memory{NotUpdatable: map[string]Verdict{"shop/b": envChanged}, Recreating: map[string]time.Time{"rs-1": now.Add(-time.Second)}},
		wantInFlight: 1,
	}, {
		name:  "Evict: a workload's pod still not available past the progress deadline stalls the rollout",
		evict: true,
		pods: []*corev1.Pod{podtest.Pod(named("a2", "1"), ownedBy("ReplicaSet", "rs-1"), podtest.InjectedWith(map[string]string{"log-agent": set.Hash}),
			func(p *corev1.Pod) {
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{
					Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}
			})},
		memory:     Memory{Recreating: map[string]time.Time{"rs-1": now.Add(-11 * time.Minute)}},
		want:       []Pod{{Key: "shop/a2", Namespace: "shop", Injected: true, Updated: true, Restarting: true, Eligible: true, Workload: "rs-1"}},
		stalled:    []BlockedPod{{Namespace: "shop", Name: "a2", Why: "app: ImagePullBackOff"}},
		wantMemory: Memory{Recreating: map[string]time.Time{"rs-1": now.Add(-11 * time.Minute)}},
	}, {
		name:  "Evict: within the progress deadline nothing stalls",
		evict: true,
		pods: []*corev1.Pod{podtest.Pod(named("a2", "1"), ownedBy("ReplicaSet", "rs-1"), podtest.InjectedWith(map[string]string{"log-agent": set.Hash}),
			func(p *corev1.Pod) {
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{
					Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}
			})},
		memory:     Memory{Recreating: map[string]time.Time{"rs-1": now.Add(-9 * time.Minute)}},
		want:       []Pod{{Key: "shop/a2", Namespace: "shop", Injected: true, Updated: true, Restarting: true, Eligible: true, Workload: "rs-1"}},
		wantMemory: Memory{Recreating: map[string]time.Time{"rs-1": now.Add(-9 * time.Minute)}},
	}, {
		name: "a terminating pod is never reported blocked",
		pods: []*corev1.Pod{podtest.Pod(named("a", "1"), func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} })},
		want: []Pod{{Key: "shop/a", Namespace: "shop", Terminating: true, Eligible: true}},
	}, {
		name:     "outside the canary: not eligible",
		pods:     []*corev1.Pod{with(settledOld, named("a", "1"))},
		eligible: func(*corev1.Pod) bool { return false },
		want:     []Pod{{Key: "shop/a", Namespace: "shop", Injected: true, Available: true}},
	}, {
		name: "excluded namespaces and pods not selected are left out; their memory goes",
		pods: []*corev1.Pod{with(settledOld, named("a", "1"), podtest.InNamespace("kube-system")), with(settledOld, named("b", "1"), podtest.Label("app", "other"))},
		memory: Memory{Patched: map[string]string{"kube-system/a": set.Hash, "shop/gone": set.Hash},
			NotUpdatable: map[string]Verdict{"shop/b": {Hash: set.Hash, ResourceVersion: "1"}}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			memory := NewMemory()
			for k, v := range tt.memory.Patched {
				memory.Patched[k] = v
			}
			for k, v := range tt.memory.NotUpdatable {
				memory.NotUpdatable[k] = v
			}
			for k, v := range tt.memory.Recreating {
				memory.Recreating[k] = v
			}
			set := set
			if tt.evict {
				set = evicting
			}
			eligible := tt.eligible
			if eligible == nil {
				eligible = everyPod
			}
			in := Inputs(set, tt.pods, func(string) map[string]string { return nil }, podtest.Scope, eligible, memory, now)
			if len(in.Targets) != len(in.Plan) {
				t.Fatalf("%d targets for %d planned pods", len(in.Targets), len(in.Plan))
			}
			plan := slices.Clone(in.Plan)
			for i := range in.Targets {
				if PodKey(in.Targets[i]) != plan[i].Key {
					t.Errorf("target %d is %s, planned %s", i, PodKey(in.Targets[i]), plan[i].Key)
				}
				// The planner orders the Pods by their labels.
				if !maps.Equal(plan[i].Labels, in.Targets[i].Labels) || len(plan[i].Labels) == 0 {
					t.Errorf("planned %s with labels %v, the pod has %v", plan[i].Key, plan[i].Labels, in.Targets[i].Labels)
				}
				plan[i].Labels = nil
			}
			if !slices.EqualFunc(plan, tt.want, func(a, b Pod) bool { return reflect.DeepEqual(a, b) }) {
				t.Errorf("plan\n got %+v\nwant %+v", plan, tt.want)
			}
			if tt.wantState && (len(in.States) != 1 || in.States[0].Updated != tt.wantUpdated || in.States[0].Ready != tt.wantReady) {
				t.Errorf("states %+v, want one pod updated %v, ready %v", in.States, tt.wantUpdated, tt.wantReady)
			}
			if in.InFlight != tt.wantInFlight {
				t.Errorf("in flight %d, want %d", in.InFlight, tt.wantInFlight)
			}
			if !slices.Equal(in.Stalled, tt.stalled) {
				t.Errorf("stalled %+v, want %+v", in.Stalled, tt.stalled)
			}
			if !slices.Equal(in.Report, tt.report) {
				t.Errorf("report %+v, want %+v", in.Report, tt.report)
			}
			if !slices.Equal(in.Blocked, tt.blocked) {
				t.Errorf("blocked %+v, want %+v", in.Blocked, tt.blocked)
			}
			if len(memory.Patched) != len(tt.wantMemory.Patched) || len(memory.NotUpdatable) != len(tt.wantMemory.NotUpdatable) ||
				len(memory.Recreating) != len(tt.wantMemory.Recreating) {
				t.Errorf("memory afterwards %+v, want %+v", memory, tt.wantMemory)
			}
			for k, v := range tt.wantMemory.Patched {
				if memory.Patched[k] != v {
					t.Errorf("patched[%s] = %q, want %q", k, memory.Patched[k], v)
				}
			}
			for k, v := range tt.wantMemory.NotUpdatable {
				if memory.NotUpdatable[k] != v {
					t.Errorf("notUpdatable[%s] = %+v, want %+v", k, memory.NotUpdatable[k], v)
				}
			}
		})
	}
}

// TestInputsPolicyResize: a pod with the set's current hash whose app container was
// resized in place, so that the sidecar's resourcesPolicy computes other resources, is an
// updated pod to resize for the planner (within its budget), and updated for status.
func TestInputsPolicyResize(t *testing.T) {
	set := podtest.Set(t, "mesh", nil, func(s *appsv1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy.Type = appsv1alpha1.RollingUpdate
		s.Spec.Containers[0].ResourcesPolicy = &appsv1alpha1.ResourcesPolicy{ResourcesExpr: appsv1alpha1.ResourcesExpr{
			Requests: map[corev1.ResourceName]appsv1alpha1.ResourceExpression{corev1.ResourceCPU: "cpu * 0.5"}}}
	})
	image := set.Set.Spec.Containers[0].Image
	withResources := func(app, sidecar string) podtest.Opt {
		return func(p *corev1.Pod) {
			p.Spec.Containers = []corev1.Container{
				{Name: "app", Image: "app:1", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(app)}}},
				{Name: "mesh", Image: image, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(sidecar)}}},
			}
		}
	}
	for _, tc := range []struct {
		name       string
		app, mesh  string
		wantResize bool
	}{
		{"the sidecar holds what the policy computes", "400m", "200m", false},
		{"the app container was resized", "1", "200m", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := podtest.Pod(podtest.InjectedWith(map[string]string{"mesh": set.Hash}), podtest.Ready(corev1.ConditionTrue), withResources(tc.app, tc.mesh), podtest.Running("mesh", image))
			in := Inputs(set, []*corev1.Pod{pod}, func(string) map[string]string { return nil }, inject.Scope{},
				func(*corev1.Pod) bool { return true }, NewMemory(), time.Now())
			if len(in.Plan) != 1 || !in.Plan[0].Updated || in.Plan[0].Resize != tc.wantResize {
				t.Fatalf("Plan = %+v, want one updated pod with Resize %v", in.Plan, tc.wantResize)
			}
			if len(in.States) != 1 || !in.States[0].Updated {
				t.Errorf("states %+v, want one updated pod (its hash is current)", in.States)
			}
		})
	}
}
