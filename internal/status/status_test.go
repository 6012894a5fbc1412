package status

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sidecarset/sidecarset-operator/internal/rollout/podtest"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/diff"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/rollout"
	"github.com/sidecarset/sidecarset-operator/internal/snapshot"
)

func TestCount(t *testing.T) {
	plain := podtest.Set(t, "log-agent", nil)
	scoped := podtest.Set(t, "log-agent", map[string]string{"team": "shop"})
	if plain.Hash != scoped.Hash {
		t.Fatalf("the namespace selector changed the hash: %s != %s", plain.Hash, scoped.Hash)
	}
	current := map[string]string{"log-agent": plain.Hash}
	namespaces := map[string]map[string]string{"shop": {"team": "shop"}, "other": {"team": "other"},
		"opted-out":   {"team": "shop", appsv1alpha1.NamespaceInjectionLabel: appsv1alpha1.NamespaceInjectionDisabled},
		"kube-system": {"team": "shop"}}
	tests := []struct {
		name string
		set  *inject.CompiledSet
		pods []*corev1.Pod
		want Counts
	}{
		{name: "no pods", set: plain, want: Counts{}},
		{name: "injected with the current hash and Ready", set: plain,
			pods: []*corev1.Pod{podtest.Pod(podtest.InjectedWith(current), podtest.Ready(corev1.ConditionTrue))},
			want: Counts{Matched: 1, Updated: 1, Ready: 1, UpdatedReady: 1}},
		{name: "injected with the current hash, not Ready", set: plain,
			pods: []*corev1.Pod{podtest.Pod(podtest.InjectedWith(current), podtest.Ready(corev1.ConditionFalse))},
			want: Counts{Matched: 1, Updated: 1, Unavailable: 1, Restarting: 1}},
		{name: "injected with the current hash, pending without conditions", set: plain,
			pods: []*corev1.Pod{podtest.Pod(podtest.InjectedWith(current), podtest.Phase(corev1.PodPending))},
			want: Counts{Matched: 1, Updated: 1, Unavailable: 1, Restarting: 1}},
		{name: "injected with an old hash and Ready", set: plain,
			pods: []*corev1.Pod{podtest.Pod(podtest.InjectedWith(map[string]string{"log-agent": "0123456789abcdef"}), podtest.Ready(corev1.ConditionTrue))},
			want: Counts{Matched: 1, Ready: 1}},
		{name: "Ready but not injected", set: plain,
			pods: []*corev1.Pod{podtest.Pod(podtest.Ready(corev1.ConditionTrue))},
			want: Counts{Matched: 1, NotInjected: 1}},
		{name: "Ready and injected by another SidecarSet only", set: plain,
			pods: []*corev1.Pod{podtest.Pod(podtest.InjectedWith(map[string]string{"mesh-proxy": plain.Hash}), podtest.Ready(corev1.ConditionTrue))},
			want: Counts{Matched: 1, NotInjected: 1}},
		{name: "malformed status annotation", set: plain,
			pods: []*corev1.Pod{podtest.Pod(podtest.Ready(corev1.ConditionTrue), func(p *corev1.Pod) {
				podtest.SetAnnotation(p, appsv1alpha1.StatusAnnotation, `{"log-agent":`)
			})},
			want: Counts{Matched: 1, NotInjected: 1}},
		{name: "terminating", set: plain,
			pods: []*corev1.Pod{podtest.Pod(podtest.InjectedWith(current), podtest.Ready(corev1.ConditionTrue), func(p *corev1.Pod) {
				p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1700000000, 0)}
			})},
			want: Counts{}},
		{name: "succeeded", set: plain,
			pods: []*corev1.Pod{podtest.Pod(podtest.InjectedWith(current), podtest.Phase(corev1.PodSucceeded))},
			want: Counts{}},
		{name: "failed", set: plain,
			pods: []*corev1.Pod{podtest.Pod(podtest.InjectedWith(current), podtest.Phase(corev1.PodFailed))},
			want: Counts{}},
		{name: "not opted in", set: plain,
			pods: []*corev1.Pod{podtest.Pod(podtest.InjectedWith(current), podtest.Ready(corev1.ConditionTrue), func(p *corev1.Pod) {
				delete(p.Labels, appsv1alpha1.InjectLabel)
			})},
			want: Counts{}},
		{name: "opt-in label with another value", set: plain,
			pods: []*corev1.Pod{podtest.Pod(podtest.InjectedWith(current), podtest.Label(appsv1alpha1.InjectLabel, "True"))},
			want: Counts{}},
		{name: "selector mismatch", set: plain,
			pods: []*corev1.Pod{podtest.Pod(podtest.InjectedWith(current), podtest.Ready(corev1.ConditionTrue), podtest.Label("app", "other"))},
			want: Counts{}},
		{name: "namespace selector matches", set: scoped,
			pods: []*corev1.Pod{podtest.Pod(podtest.InjectedWith(current), podtest.Ready(corev1.ConditionTrue))},
			want: Counts{Matched: 1, Updated: 1, Ready: 1, UpdatedReady: 1}},
		{name: "namespace selector mismatch", set: scoped,
			pods: []*corev1.Pod{podtest.Pod(podtest.InjectedWith(current), podtest.Ready(corev1.ConditionTrue), podtest.InNamespace("other"))},
			want: Counts{}},
		{name: "namespace unknown to the cache", set: scoped,
			pods: []*corev1.Pod{podtest.Pod(podtest.InjectedWith(current), podtest.InNamespace("gone"))},
			want: Counts{}},
		{name: "kube-system is excluded", set: plain,
			pods: []*corev1.Pod{podtest.Pod(podtest.InjectedWith(current), podtest.Ready(corev1.ConditionTrue), podtest.InNamespace("kube-system"))},
			want: Counts{Excluded: 1}},
		{name: "the operator's namespace is excluded", set: scoped,
			pods: []*corev1.Pod{podtest.Pod(podtest.Ready(corev1.ConditionTrue), podtest.InNamespace("sidecarset-system"))},
			want: Counts{}},
		{name: "a namespace that opted out is excluded", set: scoped,
			pods: []*corev1.Pod{podtest.Pod(podtest.Ready(corev1.ConditionTrue), podtest.InNamespace("opted-out"))},
			want: Counts{Excluded: 1}},
		{name: "opted out, but the namespace selector does not match", set: podtest.Set(t, "log-agent", map[string]string{"team": "db"}),
			pods: []*corev1.Pod{podtest.Pod(podtest.Ready(corev1.ConditionTrue), podtest.InNamespace("opted-out"))},
			want: Counts{}},
		{name: "a mirror pod is excluded", set: plain,
			pods: []*corev1.Pod{podtest.Pod(podtest.Ready(corev1.ConditionTrue), func(p *corev1.Pod) { podtest.SetAnnotation(p, corev1.MirrorPodAnnotationKey, "3c9a1f2e") })},
			want: Counts{Excluded: 1}},
		{name: "a mirror pod is excluded even with a record of the set", set: plain,
			pods: []*corev1.Pod{podtest.Pod(podtest.InjectedWith(current), podtest.Ready(corev1.ConditionTrue), func(p *corev1.Pod) { podtest.SetAnnotation(p, corev1.MirrorPodAnnotationKey, "3c9a1f2e") })},
			want: Counts{Excluded: 1}},
		{name: "excluded but not selected", set: plain,
			pods: []*corev1.Pod{podtest.Pod(podtest.Ready(corev1.ConditionTrue), podtest.InNamespace("kube-system"), podtest.Label("app", "other"))},
			want: Counts{}},
		{name: "mixed", set: scoped, pods: []*corev1.Pod{
			podtest.Pod(podtest.InjectedWith(current), podtest.Ready(corev1.ConditionTrue)),                                              // all four
			podtest.Pod(podtest.InjectedWith(current), podtest.Ready(corev1.ConditionTrue), podtest.InNamespace("other")),                // namespace
			podtest.Pod(podtest.InjectedWith(current)),                                                                                   // matched, updated
			podtest.Pod(podtest.InjectedWith(map[string]string{"log-agent": "old"}), podtest.Ready(corev1.ConditionTrue)),                // matched, ready
			podtest.Pod(podtest.Ready(corev1.ConditionTrue)),                                                                             // matched
			podtest.Pod(podtest.InjectedWith(current), podtest.Ready(corev1.ConditionTrue), podtest.Phase(corev1.PodSucceeded)),          // finished
			podtest.Pod(podtest.InjectedWith(current), podtest.Ready(corev1.ConditionTrue), podtest.Label(appsv1alpha1.InjectLabel, "")), // not opted in
			podtest.Pod(podtest.InjectedWith(current), podtest.Ready(corev1.ConditionTrue), podtest.InNamespace("opted-out")),            // excluded
		}, want: Counts{Matched: 4, Excluded: 1, Updated: 2, Ready: 2, UpdatedReady: 1, Unavailable: 1, NotInjected: 1, Restarting: 1}},
		{name: "updated in place, the kubelet still runs the old image", set: plain,
			pods: []*corev1.Pod{podtest.Pod(podtest.InjectedWith(current), podtest.Ready(corev1.ConditionTrue), podtest.Spec("log-agent", plain.Set.Spec.Containers[0].Image), podtest.Running("log-agent", "registry.example/old:1"))},
			want: Counts{Matched: 1, Updated: 1, Ready: 1, Unavailable: 1, Restarting: 1, ReadyRestarting: 1}},
		{name: "updated in place, the old container still runs: stopping", set: plain,
			pods: []*corev1.Pod{podtest.Pod(podtest.InjectedWith(current), podtest.Ready(corev1.ConditionTrue), podtest.Spec("log-agent", plain.Set.Spec.Containers[0].Image), podtest.Stopping("log-agent", "registry.example/old:1"))},
			want: Counts{Matched: 1, Updated: 1, Ready: 1, Unavailable: 1, Restarting: 1, Stopping: 1, ReadyRestarting: 1}},
		{name: "patched for an older revision, the kubelet not there yet: unavailable", set: plain,
			pods: []*corev1.Pod{podtest.Pod(podtest.InjectedWith(map[string]string{"log-agent": "older"}), podtest.Ready(corev1.ConditionTrue), podtest.Spec("log-agent", "registry.example/older:2"), podtest.Running("log-agent", "registry.example/old:1"))},
			want: Counts{Matched: 1, Ready: 1, Unavailable: 1, Restarting: 1, ReadyRestarting: 1}},
		{name: "the kubelet has not observed the pod's generation", set: plain,
			pods: []*corev1.Pod{podtest.Pod(podtest.InjectedWith(current), podtest.Ready(corev1.ConditionTrue), podtest.Running("log-agent", plain.Set.Spec.Containers[0].Image), podtest.Generations(3, 2))},
			want: Counts{Matched: 1, Updated: 1, Ready: 1, Unavailable: 1, Restarting: 1, ReadyRestarting: 1}},
		{name: "the kubelet has observed the pod's generation", set: plain,
			pods: []*corev1.Pod{podtest.Pod(podtest.InjectedWith(current), podtest.Ready(corev1.ConditionTrue), podtest.Running("log-agent", plain.Set.Spec.Containers[0].Image), podtest.Generations(3, 3))},
			want: Counts{Matched: 1, Updated: 1, Ready: 1, UpdatedReady: 1}},
		{name: "terminating pods count nowhere", set: plain,
			pods: []*corev1.Pod{podtest.Pod(podtest.InjectedWith(current), podtest.Ready(corev1.ConditionTrue), func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} })},
			want: Counts{}},
		{name: "updated in place, the kubelet runs the new image", set: plain,
			pods: []*corev1.Pod{podtest.Pod(podtest.InjectedWith(current), podtest.Ready(corev1.ConditionTrue), podtest.Running("log-agent", plain.Set.Spec.Containers[0].Image))},
			want: Counts{Matched: 1, Updated: 1, Ready: 1, UpdatedReady: 1}},
		{name: "old hash, another image running: available", set: plain,
			pods: []*corev1.Pod{podtest.Pod(podtest.InjectedWith(map[string]string{"log-agent": "old"}), podtest.Ready(corev1.ConditionTrue), podtest.Running("log-agent", "registry.example/old:1"))},
			want: Counts{Matched: 1, Ready: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nsLabels := func(name string) map[string]string { return namespaces[name] }
			if got := Count(tt.set, tt.pods, nsLabels, podtest.Scope); got != tt.want {
				t.Errorf("Count = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// cond is a condition as Compute writes it, at generation 3.
func cond(typ string, status metav1.ConditionStatus, reason string, at metav1.Time) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, ObservedGeneration: 3, LastTransitionTime: at}
}

func TestComputeConditions(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC))
	paused := func(s *appsv1alpha1.SidecarSet) { s.Spec.InjectionStrategy.Paused = true }
	tests := []struct {
		name   string
		set    *inject.CompiledSet
		counts Counts
		want   []metav1.Condition // compared without their messages
		// messages maps condition types to substrings their message must hold.
		messages  map[string][]string
		conflicts []snapshot.Conflict
	}{{
		name: "all updated and Ready", set: podtest.Set(t, "log-agent", nil),
		counts: Counts{Matched: 4, Updated: 4, Ready: 4, UpdatedReady: 4},
		want: []metav1.Condition{
			cond(appsv1alpha1.ConditionPaused, metav1.ConditionFalse, "Injecting", now),
			cond(appsv1alpha1.ConditionPodsUpdated, metav1.ConditionTrue, "AllPodsUpdated", now),
			cond(appsv1alpha1.ConditionPodsReady, metav1.ConditionTrue, "AllPodsReady", now),
			cond(appsv1alpha1.ConditionReady, metav1.ConditionTrue, "Injecting", now),
			cond(appsv1alpha1.ConditionReconciling, metav1.ConditionFalse, "Injecting", now),
			cond(appsv1alpha1.ConditionStalled, metav1.ConditionFalse, "Injecting", now),
		},
		messages: map[string][]string{appsv1alpha1.ConditionPodsUpdated: {"All 4 matched pods"}},
	}, {
		name: "paused", set: podtest.Set(t, "log-agent", nil, paused),
		counts: Counts{Matched: 1, Updated: 1, Ready: 1, UpdatedReady: 1},
		want: []metav1.Condition{
			cond(appsv1alpha1.ConditionPaused, metav1.ConditionTrue, "PausedBySpec", now),
			cond(appsv1alpha1.ConditionPodsUpdated, metav1.ConditionTrue, "AllPodsUpdated", now),
			cond(appsv1alpha1.ConditionPodsReady, metav1.ConditionTrue, "AllPodsReady", now),
			cond(appsv1alpha1.ConditionReady, metav1.ConditionTrue, "InjectionPaused", now),
			cond(appsv1alpha1.ConditionReconciling, metav1.ConditionFalse, "InjectionPaused", now),
			cond(appsv1alpha1.ConditionStalled, metav1.ConditionFalse, "InjectionPaused", now),
		},
		messages: map[string][]string{appsv1alpha1.ConditionPaused: {"spec.injectionStrategy.paused"}},
	}, {
		name: "outdated and not Ready", set: podtest.Set(t, "log-agent", nil),
		counts: Counts{Matched: 5, Updated: 3, Ready: 1, UpdatedReady: 1},
		want: []metav1.Condition{
			cond(appsv1alpha1.ConditionPaused, metav1.ConditionFalse, "Injecting", now),
			cond(appsv1alpha1.ConditionPodsUpdated, metav1.ConditionFalse, "PodsOutdated", now),
			cond(appsv1alpha1.ConditionPodsReady, metav1.ConditionFalse, "PodsNotReady", now),
			cond(appsv1alpha1.ConditionReady, metav1.ConditionTrue, "Injecting", now),
			cond(appsv1alpha1.ConditionReconciling, metav1.ConditionFalse, "Injecting", now),
			cond(appsv1alpha1.ConditionStalled, metav1.ConditionFalse, "Injecting", now),
		},
		messages: map[string][]string{
			appsv1alpha1.ConditionPodsUpdated: {"2 of 5 matched pods", "rollout restart"},
			appsv1alpha1.ConditionPodsReady:   {"4 of 5 matched pods"},
		},
	}, {
		name: "no matched pods", set: podtest.Set(t, "log-agent", nil),
		want: []metav1.Condition{
			cond(appsv1alpha1.ConditionPaused, metav1.ConditionFalse, "Injecting", now),
			cond(appsv1alpha1.ConditionPodsUpdated, metav1.ConditionTrue, "NoMatchedPods", now),
			cond(appsv1alpha1.ConditionPodsReady, metav1.ConditionTrue, "NoMatchedPods", now),
			cond(appsv1alpha1.ConditionReady, metav1.ConditionTrue, "Injecting", now),
			cond(appsv1alpha1.ConditionReconciling, metav1.ConditionFalse, "Injecting", now),
			cond(appsv1alpha1.ConditionStalled, metav1.ConditionFalse, "Injecting", now),
		},
		messages: map[string][]string{
			appsv1alpha1.ConditionPodsUpdated: {"sidecarset.io/inject=true", "spec.selector (app=demo)"},
			appsv1alpha1.ConditionPodsReady:   {"sidecarset.io/inject=true", "spec.selector (app=demo)"},
		},
	}, {
		name: "no matched pods with a namespace selector", set: podtest.Set(t, "log-agent", map[string]string{"team": "shop"}),
		want: []metav1.Condition{
			cond(appsv1alpha1.ConditionPaused, metav1.ConditionFalse, "Injecting", now),
			cond(appsv1alpha1.ConditionPodsUpdated, metav1.ConditionTrue, "NoMatchedPods", now),
			cond(appsv1alpha1.ConditionPodsReady, metav1.ConditionTrue, "NoMatchedPods", now),
			cond(appsv1alpha1.ConditionReady, metav1.ConditionTrue, "Injecting", now),
			cond(appsv1alpha1.ConditionReconciling, metav1.ConditionFalse, "Injecting", now),
			cond(appsv1alpha1.ConditionStalled, metav1.ConditionFalse, "Injecting", now),
		},
		messages: map[string][]string{
			appsv1alpha1.ConditionPodsUpdated: {"sidecarset.io/inject=true", "spec.selector (app=demo)", "spec.namespaceSelector (team=shop)"},
		},
	}, {
		name: "no matched pods, some excluded", set: podtest.Set(t, "log-agent", nil),
		counts: Counts{Excluded: 2},
		want: []metav1.Condition{
			cond(appsv1alpha1.ConditionPaused, metav1.ConditionFalse, "Injecting", now),
			cond(appsv1alpha1.ConditionPodsUpdated, metav1.ConditionTrue, "NoMatchedPods", now),
			cond(appsv1alpha1.ConditionPodsReady, metav1.ConditionTrue, "NoMatchedPods", now),
			cond(appsv1alpha1.ConditionReady, metav1.ConditionTrue, "Injecting", now),
			cond(appsv1alpha1.ConditionReconciling, metav1.ConditionFalse, "Injecting", now),
			cond(appsv1alpha1.ConditionStalled, metav1.ConditionFalse, "Injecting", now),
		},
		messages: map[string][]string{
			appsv1alpha1.ConditionPodsUpdated: {"2 selected pods are in such excluded namespaces (status.excludedPods)", "sidecarset.io/injection=disabled"},
		},
	}, {
		name: "stopped by a conflict with an older set", set: podtest.Set(t, "log-agent", nil),
		counts:    Counts{Matched: 1},
		conflicts: []snapshot.Conflict{{With: "mesh", Stopped: true, Fields: []string{`spec.containers[0].name: Invalid value: "proxy": clash`}}},
		want: []metav1.Condition{
			cond(appsv1alpha1.ConditionPaused, metav1.ConditionFalse, "Injecting", now),
			cond(appsv1alpha1.ConditionPodsUpdated, metav1.ConditionFalse, "PodsOutdated", now),
			cond(appsv1alpha1.ConditionPodsReady, metav1.ConditionFalse, "PodsNotReady", now),
			cond(appsv1alpha1.ConditionConflict, metav1.ConditionTrue, "StoppedByConflict", now),
			cond(appsv1alpha1.ConditionReady, metav1.ConditionFalse, "StoppedByConflict", now),
			cond(appsv1alpha1.ConditionReconciling, metav1.ConditionFalse, "StoppedByConflict", now),
			cond(appsv1alpha1.ConditionStalled, metav1.ConditionTrue, "StoppedByConflict", now),
		},
		messages: map[string][]string{
			appsv1alpha1.ConditionConflict: {`injects nothing while it conflicts with the older SidecarSet "mesh"`, `spec.containers[0].name: Invalid value: "proxy": clash`},
		},
	}, {
		name: "the older set of two conflicts", set: podtest.Set(t, "log-agent", nil),
		counts: Counts{Matched: 1, Updated: 1, Ready: 1, UpdatedReady: 1},
		conflicts: []snapshot.Conflict{
			{With: "a-new", Fields: []string{"spec.volumes[0].name: x"}},
			{With: "b-new", Fields: []string{"spec.containers[0].ports[0].hostPort: y"}},
		},
		want: []metav1.Condition{
			cond(appsv1alpha1.ConditionPaused, metav1.ConditionFalse, "Injecting", now),
			cond(appsv1alpha1.ConditionPodsUpdated, metav1.ConditionTrue, "AllPodsUpdated", now),
			cond(appsv1alpha1.ConditionPodsReady, metav1.ConditionTrue, "AllPodsReady", now),
			cond(appsv1alpha1.ConditionConflict, metav1.ConditionTrue, "ConflictWithNewer", now),
			cond(appsv1alpha1.ConditionReady, metav1.ConditionTrue, "Injecting", now),
			cond(appsv1alpha1.ConditionReconciling, metav1.ConditionFalse, "Injecting", now),
			cond(appsv1alpha1.ConditionStalled, metav1.ConditionFalse, "Injecting", now),
		},
		messages: map[string][]string{
			appsv1alpha1.ConditionConflict: {`the newer SidecarSet "a-new" conflicts with this one and injects nothing until the conflict is resolved (spec.volumes[0].name: x); the newer SidecarSet "b-new"`},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := Compute(tt.set, tt.counts, tt.conflicts, nil, nil, now)
			assertConditions(t, st.Conditions, tt.want)
			for typ, subs := range tt.messages {
				c := meta.FindStatusCondition(st.Conditions, typ)
				for _, s := range subs {
					if c == nil || !strings.Contains(c.Message, s) {
						t.Errorf("%s message %q does not mention %q", typ, messageOf(c), s)
					}
				}
			}
			want := appsv1alpha1.SidecarSetStatus{ObservedGeneration: 3, MatchedPods: tt.counts.Matched, ExcludedPods: tt.counts.Excluded, UpdatedPods: tt.counts.Updated,
				ReadyPods: tt.counts.Ready, UpdatedReadyPods: tt.counts.UpdatedReady, Hash: tt.set.Hash, Conditions: st.Conditions,
				SidecarResources: SidecarResources(tt.counts.Matched-tt.counts.NotInjected, tt.counts.Footprint)}
			if !equality.Semantic.DeepEqual(st, want) {
				t.Errorf("status (-want +got):\n%s", diff.Diff(want, st))
			}
		})
	}
}

// TestComputeTransitions checks that a condition keeps its lastTransitionTime while its status
// holds, even as its reason, message and observedGeneration change, and gets now when its status
// flips; conditions of other types are kept.
func TestComputeTransitions(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC))
	now := metav1.NewTime(then.Add(time.Hour))
	set := podtest.Set(t, "log-agent", nil)
	old := []metav1.Condition{
		{Type: appsv1alpha1.ConditionPaused, Status: metav1.ConditionFalse, Reason: "Injecting", Message: "m", ObservedGeneration: 1, LastTransitionTime: then},
		{Type: appsv1alpha1.ConditionPodsUpdated, Status: metav1.ConditionTrue, Reason: "NoMatchedPods", Message: "m", ObservedGeneration: 1, LastTransitionTime: then},
		{Type: "Custom", Status: metav1.ConditionTrue, Reason: "Mine", Message: "kept", ObservedGeneration: 1, LastTransitionTime: then},
		// PodsReady is absent: it is new.
	}
	oldCopy := make([]metav1.Condition, len(old))
	for i := range old {
		oldCopy[i] = *old[i].DeepCopy()
	}

	st := Compute(set, Counts{Matched: 2, Updated: 1, Ready: 2, UpdatedReady: 1}, nil, nil, old, now)

	assertConditions(t, st.Conditions, []metav1.Condition{
		cond(appsv1alpha1.ConditionPaused, metav1.ConditionFalse, "Injecting", then),        // same status
		cond(appsv1alpha1.ConditionPodsUpdated, metav1.ConditionFalse, "PodsOutdated", now), // True -> False
		{Type: "Custom", Status: metav1.ConditionTrue, Reason: "Mine", ObservedGeneration: 1, // not ours
			LastTransitionTime: then},
		cond(appsv1alpha1.ConditionPodsReady, metav1.ConditionTrue, "AllPodsReady", now), // new
		cond(appsv1alpha1.ConditionReady, metav1.ConditionTrue, "Injecting", now),        // new
		cond(appsv1alpha1.ConditionReconciling, metav1.ConditionFalse, "Injecting", now),
		cond(appsv1alpha1.ConditionStalled, metav1.ConditionFalse, "Injecting", now),
	})
	if c := meta.FindStatusCondition(st.Conditions, appsv1alpha1.ConditionPaused); c == nil || c.Message == "m" {
		t.Errorf("Paused message not refreshed: %q", messageOf(c))
	}
	if !equality.Semantic.DeepEqual(old, oldCopy) {
		t.Errorf("Compute modified the old conditions:\n%s", diff.Diff(oldCopy, old))
	}

	// A second pass with the same counts changes nothing, however late.
	again := Compute(set, Counts{Matched: 2, Updated: 1, Ready: 2, UpdatedReady: 1}, nil, nil, st.Conditions, metav1.NewTime(now.Add(time.Hour)))
	if !equality.Semantic.DeepEqual(again, st) {
		t.Errorf("recomputing with the same counts changed the status:\n%s", diff.Diff(st, again))
	}
}

// assertConditions compares conditions in order, ignoring messages.
func assertConditions(t *testing.T, got, want []metav1.Condition) {
	t.Helper()
	strip := func(in []metav1.Condition) []metav1.Condition {
		out := make([]metav1.Condition, len(in))
		for i, c := range in {
			c.Message = ""
			out[i] = c
		}
		return out
	}
	if g, w := strip(got), strip(want); !equality.Semantic.DeepEqual(g, w) {
		t.Errorf("conditions (-want +got):\n%s", diff.Diff(w, g))
	}
	for _, c := range got {
		if c.Message == "" {
			t.Errorf("condition %s has no message", c.Type)
		}
	}
}

func messageOf(c *metav1.Condition) string {
	if c == nil {
		return "<no condition>"
	}
	return c.Message
}

// BenchmarkCount classifies 10,000 opted-in Pods across 100 namespaces against one
// SidecarSet: half of them match its selector, a third carry its current hash and nine in ten
// are Ready.
func BenchmarkCount(b *testing.B) {
	for _, bc := range []struct {
		name     string
		nsLabels map[string]string
	}{{name: "selector"}, {name: "selector+namespaceSelector", nsLabels: map[string]string{"team": "shop"}}} {
		set := podtest.Set(b, "log-agent", bc.nsLabels)
		pods, namespaces := benchPods(set.Hash)
		nsLabels := func(name string) map[string]string { return namespaces[name] }
		b.Run(bc.name, func(b *testing.B) {
			if c := Count(set, pods, nsLabels, podtest.Scope); c.Matched == 0 || c.Updated == 0 || c.Ready == 0 {
				b.Fatalf("benchmark pods count as %+v", c)
			}
			b.ReportAllocs()
			for b.Loop() {
				Count(set, pods, nsLabels, podtest.Scope)
			}
		})
	}
}

func benchPods(hash string) ([]*corev1.Pod, map[string]map[string]string) {
	const n, nNamespaces = 10_000, 100
	namespaces := map[string]map[string]string{}
	for i := range nNamespaces {
		team := "shop"
		if i%4 == 0 {
			team = "other" // a quarter of the namespaces fail the namespace selector
		}
		namespaces[fmt.Sprintf("ns-%03d", i)] = map[string]string{"kubernetes.io/metadata.name": fmt.Sprintf("ns-%03d", i), "team": team}
	}
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		app := "demo"
		if i%2 == 1 {
			app = fmt.Sprintf("svc-%d", i%50)
		}
		opts := []podtest.Opt{podtest.InNamespace(fmt.Sprintf("ns-%03d", i%nNamespaces)), podtest.Label("app", app),
			podtest.Label("app.kubernetes.io/part-of", "shop"), podtest.Label("pod-template-hash", "6f9c8d7b5")}
		switch i % 3 {
		case 0:
			opts = append(opts, podtest.InjectedWith(map[string]string{"log-agent": hash, "mesh-proxy": "1111111111111111"}))
		case 1:
			opts = append(opts, podtest.InjectedWith(map[string]string{"log-agent": "0000000000000000"}))
		}
		if i%10 != 0 {
			opts = append(opts, podtest.Ready(corev1.ConditionTrue))
		}
		pods[i] = podtest.Pod(opts...)
	}
	return pods, namespaces
}

// TestInvalid: a SidecarSet that cannot be compiled gets no counts and the Invalid condition
// with the reason; once it is valid again, Compute drops that condition.
func TestInvalid(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC))
	c := podtest.Set(t, "agent", nil)
	set := c.Set.DeepCopy()
	set.Generation = 4
	set.Status.MatchedPods = 3
	st := Invalid(set, fmt.Errorf("spec.selector: bad operator"), now)
	if st.MatchedPods != 0 || st.ObservedGeneration != 4 || len(st.Conditions) != 4 {
		t.Fatalf("status = %+v", st)
	}
	if s := meta.FindStatusCondition(st.Conditions, appsv1alpha1.ConditionStalled); s == nil || s.Status != metav1.ConditionTrue || s.Reason != "Invalid" {
		t.Errorf("Stalled = %+v, want True (Invalid)", s)
	}
	got := st.Conditions[0]
	if got.Type != appsv1alpha1.ConditionInvalid || got.Status != metav1.ConditionTrue || got.ObservedGeneration != 4 ||
		!strings.Contains(got.Message, "bad operator") || !got.LastTransitionTime.Equal(&now) {
		t.Errorf("condition = %+v", got)
	}
	if r := meta.FindStatusCondition(st.Conditions, appsv1alpha1.ConditionReady); r == nil || r.Status != metav1.ConditionFalse || r.Reason != "Invalid" || r.ObservedGeneration != 4 {
		t.Errorf("Ready = %+v, want False (Invalid) at generation 4", r)
	}
	valid := Compute(c, Counts{}, nil, nil, st.Conditions, now)
	if r := meta.FindStatusCondition(valid.Conditions, appsv1alpha1.ConditionReady); r == nil || r.Status != metav1.ConditionTrue || !r.LastTransitionTime.Equal(&now) {
		t.Errorf("Ready once valid again = %+v, want True", r)
	}
	if meta.FindStatusCondition(valid.Conditions, appsv1alpha1.ConditionInvalid) != nil {
		t.Errorf("Compute kept the Invalid condition: %+v", valid.Conditions)
	}
}

// TestInvalidMessageIsStable: a selector with several invalid labels used to give whichever
// error the map walk met first, so every reconcile rewrote the condition. The message lists
// every error, sorted, and is the same on every call.
func TestInvalidMessageIsStable(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC))
	set := podtest.Set(t, "agent", nil).Set.DeepCopy()
	set.Spec.Selector.MatchLabels = map[string]string{"a/b/c": "x", "-bad": "y", "ok": "not valid!", "z z": "w"}
	_, err := inject.Compile(set)
	if err == nil {
		t.Fatal("the set compiles; the test needs one that does not")
	}
	first := Invalid(set, err, now)
	msg := first.Conditions[0].Message
	for _, want := range []string{`"a/b/c"`, `"-bad"`, `"not valid!"`, `"z z"`, "spec.selector.matchLabels"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not mention %s", msg, want)
		}
	}
	for range 50 {
		_, err := inject.Compile(set)
		if again := Invalid(set, err, now); !equality.Semantic.DeepEqual(again, first) {
			t.Fatalf("Invalid changed between calls:\n%s", diff.Diff(first, again))
		}
	}
}

// TestConflictConditionGoesAway: once the conflict is resolved the condition is removed, and
// the status is otherwise what it was before the conflict.
func TestConflictConditionGoesAway(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC))
	set := podtest.Set(t, "agent", nil)
	counts := Counts{Matched: 1, Updated: 1, Ready: 1, UpdatedReady: 1}
	before := Compute(set, counts, nil, nil, nil, now)
	during := Compute(set, counts, []snapshot.Conflict{{With: "x", Fields: []string{"f"}}}, nil, before.Conditions, now)
	if meta.FindStatusCondition(during.Conditions, appsv1alpha1.ConditionConflict) == nil {
		t.Fatalf("no Conflict condition: %+v", during.Conditions)
	}
	after := Compute(set, counts, nil, nil, during.Conditions, now)
	if !equality.Semantic.DeepEqual(after, before) {
		t.Errorf("status after the conflict (-before +after):\n%s", diff.Diff(before, after))
	}
}

// TestRollingUpdateCondition: the condition is there only for RollingUpdate sets, says where
// the rollout stands, and keeps its transition time while its status stays.
func TestRollingUpdateCondition(t *testing.T) {
	rolling := func(paused bool) func(*appsv1alpha1.SidecarSet) {
		return func(s *appsv1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy = appsv1alpha1.UpdateStrategy{Type: appsv1alpha1.RollingUpdate, Paused: paused}
		}
	}
	counts := Counts{Matched: 4, Updated: 2, Ready: 4, UpdatedReady: 1, Unavailable: 1}
	var blocked []rollout.BlockedPod
	for i, ns := range []string{"shop", "shop", "a", "b", "c", "d", "e"} {
		blocked = append(blocked, rollout.BlockedPod{Namespace: ns, Name: fmt.Sprintf("secret-pod-name-%d", i), Why: "spec.containers[log-agent].env: changed", NeverInjected: i == 0})
	}
	tests := []struct {
		name                 string
		set                  *inject.CompiledSet
		ro                   *rollout.State
		wantStatus           metav1.ConditionStatus // "" when the condition must be absent
		wantReason, wantText string
		wantReady            string // the Ready condition's reason
	}{
		{"NotUpdate has no condition", podtest.Set(t, "log-agent", nil), &rollout.State{}, "", "", "", "Injecting"},
		{"progressing", podtest.Set(t, "log-agent", nil, rolling(false)), &rollout.State{Plan: rollout.Plan{Update: []int{1}, Waiting: 1, MaxUnavailable: 1}},
			metav1.ConditionTrue, "Progressing", "2 of 4 matched pods carry hash", "RollingUpdateProgressing"},
		{"waiting for the budget", podtest.Set(t, "log-agent", nil, rolling(false)), &rollout.State{Plan: rollout.Plan{Waiting: 2, MaxUnavailable: 1, Keep: 1}},
			metav1.ConditionTrue, "Progressing", "(partition keeps 1); 0 restarting of at most 1 unavailable", "RollingUpdateProgressing"},
		{"paused", podtest.Set(t, "log-agent", nil, rolling(true)), &rollout.State{Plan: rollout.Plan{Waiting: 2}},
			metav1.ConditionTrue, "Paused", "2 pods wait", "RollingUpdatePaused"},
		{"blocked pods", podtest.Set(t, "log-agent", nil, rolling(false)), &rollout.State{Blocked: blocked},
			metav1.ConditionFalse, "PodsNotUpdatable", "7 pods cannot be updated in place and keep their sidecars until recreated (a: 1, b: 1, c: 1, d: 1, e: 1 and 1 more; 1 of them were never injected by this SidecarSet); a PodNotUpdatable event", "PodsNotUpdatable"},
		{"pods waiting for their disruption budget", podtest.Set(t, "log-agent", nil, rolling(false)), &rollout.State{WaitingForBudget: blocked[:3]},
			metav1.ConditionTrue, "Progressing", "3 pods to recreate wait for their PodDisruptionBudget to allow an eviction (a: 1, shop: 2)", "RollingUpdateProgressing"},
		{"halted", podtest.Set(t, "log-agent", nil, rolling(false)),
			&rollout.State{Halted: HaltSummary([]rollout.BlockedPod{{Namespace: "shop", Name: "secret-pod-name-x", Why: "app: ImagePullBackOff"}}, 600)},
			metav1.ConditionFalse, rollout.HaltedReason, "; 1 recreated pods were not available 600s after the eviction (shop: 1; app: ImagePullBackOff: 1); the rollout starts no update or eviction until the spec changes", "RollingUpdateHalted"},
		{"complete", podtest.Set(t, "log-agent", nil, rolling(false)), &rollout.State{},
			metav1.ConditionFalse, "Complete", "nothing left to update", "Injecting"},
		{"not planned yet", podtest.Set(t, "log-agent", nil, rolling(false)), nil,
			metav1.ConditionTrue, "Progressing", "2 of 4 matched pods carry hash e3cb593402a9634b; the rollout has not planned this spec yet", "RollingUpdateProgressing"},
	}
	now := metav1.NewTime(time.Date(2026, 11, 25, 1, 0, 0, 0, time.UTC))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := Compute(tt.set, counts, nil, tt.ro, nil, now)
			if st.UnavailablePods != 1 {
				t.Errorf("unavailablePods = %d, want 1", st.UnavailablePods)
			}
			ready := meta.FindStatusCondition(st.Conditions, appsv1alpha1.ConditionReady)
			if wantTrue := tt.wantReady == "Injecting"; ready == nil || ready.Reason != tt.wantReady || (ready.Status == metav1.ConditionTrue) != wantTrue {
				t.Errorf("Ready %+v, want reason %s", ready, tt.wantReady)
			}
			c := meta.FindStatusCondition(st.Conditions, appsv1alpha1.ConditionRollingUpdate)
			if tt.wantStatus == "" {
				if c != nil {
					t.Fatalf("condition %+v, want none", c)
				}
				return
			}
			if c == nil || c.Status != tt.wantStatus || c.Reason != tt.wantReason || !strings.Contains(c.Message, tt.wantText) {
				t.Fatalf("condition %+v, want %s/%s with %q", c, tt.wantStatus, tt.wantReason, tt.wantText)
			}
			// Anyone who may read SidecarSets reads the condition: it never names a pod.
			for _, c := range st.Conditions {
				if strings.Contains(c.Message, "secret-pod-name") {
					t.Errorf("condition %s names a pod: %s", c.Type, c.Message)
				}
			}
			again := Compute(tt.set, counts, nil, tt.ro, st.Conditions, metav1.NewTime(now.Add(time.Minute)))
			if !equality.Semantic.DeepEqual(st, again) {
				t.Errorf("status changed with nothing new:\n%+v\n%+v", st, again)
			}
		})
	}
}
