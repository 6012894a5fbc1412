package rollout

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/rollout/podtest"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// TestStep: the step tries the Pods the plan picks, and plans again while they turn out not
// updatable; a Pod that only recreation updates is picked again for eviction under
// recreate: Evict when its controller recreates it, and left otherwise.
func TestStep(t *testing.T) {
	evictedAt := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	updated := func(hash string) Attempt { return Attempt{Hash: hash} }
	envChanged := Attempt{Why: "spec.containers[log-agent].env: changed", Recreatable: true}
	edited := Attempt{Why: "spec.containers[log-agent].image: changed since injection"}
	evicted := Attempt{EvictedAt: evictedAt}
	ownedBy := func(uid string) podtest.Opt {
		return func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-" + uid, UID: types.UID(uid), Controller: ptr.To(true)}}
		}
	}
	tests := []struct {
		name string
		// evict: recreate: Evict; budget: maxUnavailable.
		evict  bool
		budget int32
		paused bool
		// pods: name -> options, in namespace/name order.
		pods []*corev1.Pod
		// inPlace and eviction are what trying each Pod gives.
		inPlace, eviction map[string]Attempt
		// tries are the Pods tried, in order ("a" in place, "a!" by eviction).
		tries    []string
		started  []string
		blocked  []BlockedPod
		budgetOf []string
		report   []BlockedPod
		stale    bool
		waits    []string
		err      bool
	}{{
		name:    "one in place within the budget, the others wait for it",
		pods:    []*corev1.Pod{outdated("a"), outdated("b"), outdated("c")},
		inPlace: map[string]Attempt{"a": updated("new")},
		tries:   []string{"a"}, started: []string{"a"}, waits: []string{"b budget", "c budget"},
	}, {
		name:    "a pod not updatable in place frees the budget for the next",
		pods:    []*corev1.Pod{outdated("a"), outdated("b"), outdated("c")},
		inPlace: map[string]Attempt{"a": edited, "b": updated("new")},
		tries:   []string{"a", "b"}, started: []string{"b"}, waits: []string{"c budget"},
		blocked: []BlockedPod{{Namespace: "shop", Name: "a", Why: edited.Why}},
	}, {
		name:  "recreatable with a ReplicaSet under recreate: Evict: picked again, for eviction",
		evict: true, pods: []*corev1.Pod{outdated("a", ownedBy("rs1")), outdated("b")},
		inPlace: map[string]Attempt{"a": envChanged}, eviction: map[string]Attempt{"a": evicted},
		tries: []string{"a", "a!"}, started: []string{"a"}, waits: []string{"b budget"},
	}, {
		name:    "recreatable under recreate: Never: left",
		pods:    []*corev1.Pod{outdated("a", ownedBy("rs1")), outdated("b")},
		inPlace: map[string]Attempt{"a": envChanged, "b": updated("new")},
		tries:   []string{"a", "b"}, started: []string{"b"},
		blocked: []BlockedPod{{Namespace: "shop", Name: "a", Why: envChanged.Why}},
	}, {
		name:  "recreatable but a bare pod: left, and why it is not recreated",
		evict: true, pods: []*corev1.Pod{outdated("a"), outdated("b")},
		inPlace: map[string]Attempt{"a": envChanged, "b": updated("new")},
		tries:   []string{"a", "b"}, started: []string{"b"},
		blocked: []BlockedPod{{Namespace: "shop", Name: "a", Why: envChanged.Why + "; not recreated: it has no controller to recreate it (a bare pod): delete and create it yourself"}},
	}, {
		name:  "an edited pod is never evicted",
		evict: true, pods: []*corev1.Pod{outdated("a", ownedBy("rs1")), outdated("b")},
		inPlace: map[string]Attempt{"a": edited, "b": updated("new")},
		tries:   []string{"a", "b"}, started: []string{"b"},
		blocked: []BlockedPod{{Namespace: "shop", Name: "a", Why: edited.Why}},
	}, {
		name:  "one eviction per workload: its other pod waits, the budget goes on",
		evict: true, budget: 3, pods: []*corev1.Pod{outdated("a", ownedBy("rs1")), outdated("b", ownedBy("rs1")), outdated("c")},
		inPlace:  map[string]Attempt{"a": envChanged, "b": envChanged, "c": updated("new")},
		eviction: map[string]Attempt{"a": evicted},
		tries:    []string{"a", "b", "c", "a!"}, started: []string{"c", "a"}, waits: []string{"b workload busy"},
	}, {
		name:  "a refused eviction is reported and frees the budget",
		evict: true, pods: []*corev1.Pod{outdated("a", ownedBy("rs1")), outdated("b")},
		inPlace: map[string]Attempt{"a": envChanged, "b": updated("new")}, eviction: map[string]Attempt{"a": {Why: "its ReplicaSet is being deleted"}},
		tries: []string{"a", "a!", "b"}, started: []string{"b"},
		blocked: []BlockedPod{{Namespace: "shop", Name: "a", Why: "not recreated: its ReplicaSet is being deleted"}},
		report:  []BlockedPod{{Namespace: "shop", Name: "a", Why: "not recreated: its ReplicaSet is being deleted"}},
	}, {
		name:  "an eviction its PodDisruptionBudget holds waits, and frees the budget",
		evict: true, pods: []*corev1.Pod{outdated("a", ownedBy("rs1")), outdated("b")},
		inPlace: map[string]Attempt{"a": envChanged, "b": updated("new")}, eviction: map[string]Attempt{"a": {WaitsForBudget: "no disruption allowed"}},
		tries: []string{"a", "a!", "b"}, started: []string{"b"}, budgetOf: []string{"a"},
	}, {
		name:    "a pod that changed meanwhile: tried again on the next pass, no replan",
		pods:    []*corev1.Pod{outdated("a"), outdated("b")},
		inPlace: map[string]Attempt{"a": {Stale: true}},
		tries:   []string{"a"}, stale: true, waits: []string{"b budget"},
	}, {
		name:   "paused: nothing is tried",
		paused: true,
		pods:   []*corev1.Pod{outdated("a"), outdated("b")},
		waits:  []string{"a paused", "b paused"},
	}, {
		name:    "an error ends the step with the pods started so far",
		budget:  2,
		pods:    []*corev1.Pod{outdated("a"), outdated("b")},
		inPlace: map[string]Attempt{"a": updated("new")},
		tries:   []string{"a", "b"}, started: []string{"a"}, err: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := podtest.Set(t, "log-agent", nil, func(s *appsv1alpha1.SidecarSet) {
				s.Spec.UpdateStrategy = appsv1alpha1.UpdateStrategy{Type: appsv1alpha1.RollingUpdate, Paused: tt.paused}
				if tt.evict {
					s.Spec.UpdateStrategy.Recreate = appsv1alpha1.RecreateEvict
				}
				if tt.budget > 0 {
					s.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromInt32(tt.budget))
				}
			})
			memory := NewMemory()
			in := Inputs(set, tt.pods, func(string) map[string]string { return nil }, inject.Scope{}, func(*corev1.Pod) bool { return true }, memory, evictedAt)
			ro := State{Blocked: in.Blocked}
			var tries []string
			res, err := Step(set, in, &ro, memory, func(pod *corev1.Pod, recreate bool) (Attempt, error) {
				if recreate {
					tries = append(tries, pod.Name+"!")
					return tt.eviction[pod.Name], nil
				}
				tries = append(tries, pod.Name)
				if a, ok := tt.inPlace[pod.Name]; ok {
					return a, nil
				}
				return Attempt{}, errors.New("boom")
			})
			if (err != nil) != tt.err {
				t.Fatalf("error %v, want one: %v", err, tt.err)
			}
			names := func(idx []int) []string {
				var out []string
				for _, i := range idx {
					out = append(out, in.Targets[i].Name)
				}
				return out
			}
			var waits []string
			for _, w := range res.Waits {
				waits = append(waits, in.Targets[w.Pod].Name+" "+string(w.Reason))
			}
			var budgetOf []string
			for _, b := range ro.WaitingForBudget {
				budgetOf = append(budgetOf, b.Name)
			}
			for _, c := range []struct {
				what      string
				got, want any
			}{
				{"tries", tries, tt.tries}, {"started", names(ro.Plan.Update), tt.started}, {"blocked", ro.Blocked, tt.blocked},
				{"waiting for their budget", budgetOf, tt.budgetOf}, {"report", res.Report, tt.report}, {"stale", res.Stale, tt.stale},
			} {
				if diff := cmp.Diff(c.want, c.got); diff != "" {
					t.Errorf("%s (-want +got):\n%s", c.what, diff)
				}
			}
			if !tt.err && !slices.Equal(waits, tt.waits) {
				t.Errorf("waits %v, want %v", waits, tt.waits)
			}
			for _, name := range tt.started {
				key := "shop/" + name
				if tt.eviction[name] == evicted {
					if _, ok := memory.Recreating["rs1"]; !ok {
						t.Errorf("memory does not know workload rs1 is recreating %s", key)
					}
				} else if memory.Patched[key] != "new" {
					t.Errorf("memory does not know %s was patched: %v", key, memory.Patched)
				}
			}
			for _, b := range tt.blocked {
				if v := memory.NotUpdatable["shop/"+b.Name]; !strings.HasPrefix(b.Why, v.Why) || v.Hash != set.Hash {
					t.Errorf("memory's verdict on %s: %+v", b.Name, v)
				}
			}
		})
	}
}

// TestStepOrder: the step takes the Pods in the order the set's priority and scatter
// strategies give their labels, and says so (StepResult.Order); a selector the API would
// refuse stops the step with the field's path.
func TestStepOrder(t *testing.T) {
	zone := func(z string) podtest.Opt { return podtest.Label("zone", z) }
	tier := func(v string) podtest.Opt { return podtest.Label("tier", v) }
	weights := &appsv1alpha1.UpdatePriorityStrategy{WeightPriority: []appsv1alpha1.UpdatePriorityWeightTerm{
		{Weight: 60, MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": "canary"}}},
		{Weight: 30, MatchSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "zone", Operator: metav1.LabelSelectorOpIn, Values: []string{"b"}}}}},
	}}
	tests := []struct {
		name     string
		priority *appsv1alpha1.UpdatePriorityStrategy
		scatter  []appsv1alpha1.UpdateScatterTerm
		pods     []*corev1.Pod
		budget   int32
		tries    []string
		order    []string
		err      string
	}{{
		name:     "weights: the sum of the matching terms, highest first; the budget goes to the first",
		priority: weights, budget: 2,
		pods:  []*corev1.Pod{outdated("a", zone("a")), outdated("b", zone("b")), outdated("c", zone("b"), tier("canary")), outdated("d", zone("a"), tier("canary"))},
		tries: []string{"c", "d"}, order: []string{"c", "d", "b", "a"},
	}, {
		name:     "order keys: by the number the value ends with, highest first, pods without the key last",
		priority: &appsv1alpha1.UpdatePriorityStrategy{OrderPriority: []appsv1alpha1.UpdatePriorityOrderTerm{{OrderedKey: "ordinal"}}}, budget: 1,
		pods:  []*corev1.Pod{outdated("a"), outdated("b", podtest.Label("ordinal", "web-2")), outdated("c", podtest.Label("ordinal", "web-10")), outdated("d", podtest.Label("ordinal", "web-1"))},
		tries: []string{"c"}, order: []string{"c", "b", "d", "a"},
	}, {
		name:    "scatter: zone a spread over the others instead of first by name",
		scatter: []appsv1alpha1.UpdateScatterTerm{{Key: "zone", Value: "a"}}, budget: 1,
		pods:  []*corev1.Pod{outdated("a", zone("a")), outdated("b", zone("a")), outdated("c", zone("b")), outdated("d", zone("c"))},
		tries: []string{"a"}, order: []string{"a", "c", "d", "b"},
	}, {
		name:     "a selector the API refuses",
		priority: &appsv1alpha1.UpdatePriorityStrategy{WeightPriority: []appsv1alpha1.UpdatePriorityWeightTerm{{Weight: 1, MatchSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "zone", Operator: "Like"}}}}}},
		pods:     []*corev1.Pod{outdated("a")},
		err:      "spec.updateStrategy.priorityStrategy.weightPriority[0].matchSelector",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := podtest.Set(t, "log-agent", nil, func(s *appsv1alpha1.SidecarSet) {
				s.Spec.UpdateStrategy = appsv1alpha1.UpdateStrategy{Type: appsv1alpha1.RollingUpdate, MaxUnavailable: ptr.To(intstr.FromInt32(max(tt.budget, 1))),
					PriorityStrategy: tt.priority, ScatterStrategy: tt.scatter}
			})
			memory := NewMemory()
			in := Inputs(set, tt.pods, func(string) map[string]string { return nil }, inject.Scope{}, func(*corev1.Pod) bool { return true }, memory, time.Now())
			var tries []string
			res, err := Step(set, in, &State{}, memory, func(pod *corev1.Pod, _ bool) (Attempt, error) {
				tries = append(tries, pod.Name)
				return Attempt{Hash: set.Hash}, nil
			})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || len(tries) > 0 {
					t.Fatalf("error %v after trying %v; want one naming %s, before trying any pod", err, tries, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var order []string
			for _, i := range res.Order {
				order = append(order, in.Targets[i].Name)
			}
			if !slices.Equal(tries, tt.tries) || !slices.Equal(order, tt.order) {
				t.Errorf("tried %v in order %v; want %v in order %v", tries, order, tt.tries, tt.order)
			}
		})
	}
}

// outdated is a settled, ready Pod the set injected at an older hash.
func outdated(name string, opts ...podtest.Opt) *corev1.Pod {
	base := []podtest.Opt{func(p *corev1.Pod) { p.Name, p.ResourceVersion = name, "1" }, podtest.InjectedWith(map[string]string{"log-agent": "old"}),
		podtest.Ready(corev1.ConditionTrue), podtest.Spec("log-agent", "registry.example/log-agent:0"), podtest.Running("log-agent", "registry.example/log-agent:0")}
	return podtest.Pod(append(base, opts...)...)
}

// TestRecreate: what the rollout does with an outdated Pod it cannot update in place.
func TestRecreate(t *testing.T) {
	owned := func(apiVersion, kind string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", OwnerReferences: []metav1.OwnerReference{
			{APIVersion: apiVersion, Kind: kind, Name: "w", UID: "uid", Controller: ptr.To(true)}}}}
	}
	rs, job, bare := owned("apps/v1", "ReplicaSet"), owned("batch/v1", "Job"), &corev1.Pod{}
	evict := appsv1alpha1.UpdateStrategy{Recreate: appsv1alpha1.RecreateEvict, Remediate: appsv1alpha1.RecreateEvict}
	recreateOnly := appsv1alpha1.UpdateStrategy{Recreate: appsv1alpha1.RecreateEvict}
	never := appsv1alpha1.UpdateStrategy{}
	for _, tt := range []struct {
		name        string
		strategy    appsv1alpha1.UpdateStrategy
		pod         *corev1.Pod
		injected    bool
		recreatable bool
		want        Recreation
	}{
		{"recreatable, ReplicaSet, Evict: evicted", evict, rs, true, true, Recreation{Workload: "uid"}},
		{"recreatable, Never: left", never, rs, true, true, Recreation{Left: "why"}},
		{"not recreatable: left", evict, rs, true, false, Recreation{Left: "why"}},
		{"a bare pod: left, and why", evict, bare, true, true, Recreation{Left: "why; not recreated: it has no controller to recreate it (a bare pod): delete and create it yourself"}},
		{"a Job's pod: left, and why", evict, job, true, true, Recreation{Left: "why; not recreated: its controller, Job w, does not recreate an evicted pod as it was"}},
		{"never injected, remediate: Evict: evicted", evict, rs, false, false, Recreation{Workload: "uid"}},
		{"never injected, only recreate: Evict: left", recreateOnly, rs, false, true, Recreation{Left: "why"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Recreate(tt.strategy, tt.pod, tt.injected, "why", tt.recreatable); got != tt.want {
				t.Errorf("Recreate = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestHaltedBefore: the halt is read back from this generation's RollingUpdate condition only.
func TestHaltedBefore(t *testing.T) {
	set := func(generation int64, c metav1.Condition) *appsv1alpha1.SidecarSet {
		c.Type, c.Status = appsv1alpha1.ConditionRollingUpdate, metav1.ConditionFalse
		return &appsv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Generation: generation},
			Status: appsv1alpha1.SidecarSetStatus{Conditions: []metav1.Condition{c}}}
	}
	for _, tt := range []struct {
		name string
		set  *appsv1alpha1.SidecarSet
		want string
	}{
		{"halted at this generation", set(2, metav1.Condition{Reason: HaltedReason, ObservedGeneration: 2, Message: "1 of 3 updated; 2 pods not available"}), "2 pods not available"},
		{"halted at an older generation", set(3, metav1.Condition{Reason: HaltedReason, ObservedGeneration: 2, Message: "1 of 3 updated; why"}), ""},
		{"progressing", set(2, metav1.Condition{Reason: "Progressing", ObservedGeneration: 2, Message: "1 of 3 updated; why"}), ""},
		{"no condition", &appsv1alpha1.SidecarSet{}, ""},
	} {
		if got := HaltedBefore(tt.set); got != tt.want {
			t.Errorf("%s: HaltedBefore = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestEligible: the set must inject, and the canary selector match.
func TestEligible(t *testing.T) {
	canary := podtest.Set(t, "log-agent", nil, func(s *appsv1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"track": "canary"}}
	})
	pod, canaryPod := podtest.Pod(), podtest.Pod(podtest.Label("track", "canary"))
	for _, tt := range []struct {
		name      string
		injecting bool
		pod       *corev1.Pod
		want      bool
	}{
		{"canary pod", true, canaryPod, true},
		{"other pod", true, pod, false},
		{"the set does not inject", false, canaryPod, false},
	} {
		eligible, err := Eligible(canary, tt.injecting)
		if err != nil {
			t.Fatal(err)
		}
		if got := eligible(tt.pod); got != tt.want {
			t.Errorf("%s: eligible = %v, want %v", tt.name, got, tt.want)
		}
	}
	bad := podtest.Set(t, "log-agent", nil)
	bad.Set.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}}
	if _, err := Eligible(bad, true); err == nil || !strings.Contains(err.Error(), "spec.updateStrategy.selector") {
		t.Errorf("a bad canary selector: %v", err)
	}
}
