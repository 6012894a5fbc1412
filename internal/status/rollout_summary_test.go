package status

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/rollout"
	"github.com/sidecarset/sidecarset-operator/internal/rollout/podtest"
)

// TestCompleteWaitsForTheKubelet: the RollingUpdate condition (whose reason the Rollout
// column of `kubectl get sidecarsets` shows), PodsReady and Ready agree with updatedReadyPods:
// Complete, PodsReady=True and Ready=True only once the kubelet runs the new sidecar, Ready, in
// every updated pod; before, Progressing says how many pods restart and what they wait for. It
// is so whether the rollout has planned this spec (the operator's steady state) or not yet (a
// status computed before its first pass, as after a restart).
func TestCompleteWaitsForTheKubelet(t *testing.T) {
	set, image := podtest.RollingSet(t)
	current := map[string]string{"log-agent": set.Hash}
	done := podtest.Pod(podtest.Named("done"), podtest.InjectedWith(current), podtest.Ready(corev1.ConditionTrue), podtest.Spec("log-agent", image), podtest.Running("log-agent", image))
	tests := []struct {
		name string
		last *corev1.Pod // the other pod: the one the rollout patched last
		// wantReason is RollingUpdate's; wantText are parts of its message.
		wantReason string
		wantText   []string
		podsReady  metav1.ConditionStatus
		readyText  string // part of PodsReady's message
	}{{
		name:       "patched, its old container terminating (the kubelet reports it Running and Ready)",
		last:       podtest.Pod(podtest.Named("last"), podtest.InjectedWith(current), podtest.Ready(corev1.ConditionTrue), podtest.Spec("log-agent", image), podtest.Stopping("log-agent", "registry.example/log-agent:0")),
		wantReason: "Progressing",
		wantText: []string{"2 of 2 matched pods carry hash", "nothing left to start; 1 restarting: waiting for the kubelet",
			"1 pods wait for an old sidecar container to stop (shop: 1; grace period 30s: 1)", "does not exit on SIGTERM costs the whole grace period"},
		podsReady: metav1.ConditionFalse, readyText: "1 of 2 matched pods are not both injected and Ready (1 of them report Ready while the kubelet does not yet run",
	}, {
		name: "patched, a grace period of its own",
		last: podtest.Pod(podtest.Named("last"), podtest.InjectedWith(current), podtest.Ready(corev1.ConditionTrue), podtest.Spec("log-agent", image), podtest.Stopping("log-agent", "registry.example/log-agent:0"),
			func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](120) }),
		wantReason: "Progressing", wantText: []string{"(shop: 1; grace period 2m0s: 1)"},
		podsReady: metav1.ConditionFalse,
	}, {
		name:       "patched, the new image waiting to be pulled",
		last:       podtest.Pod(podtest.Named("last"), podtest.InjectedWith(current), podtest.Ready(corev1.ConditionFalse), podtest.Spec("log-agent", image), podtest.WaitingSidecar("log-agent", "registry.example/log-agent:0", "ImagePullBackOff")),
		wantReason: "Progressing", wantText: []string{"nothing left to start; 1 restarting"},
		podsReady: metav1.ConditionFalse, readyText: "1 of 2 matched pods are not both injected and Ready",
	}, {
		name:       "the new image running, not ready yet",
		last:       podtest.Pod(podtest.Named("last"), podtest.InjectedWith(current), podtest.Ready(corev1.ConditionFalse), podtest.Spec("log-agent", image), podtest.NotReadySidecar("log-agent", image)),
		wantReason: "Progressing", wantText: []string{"nothing left to start; 1 restarting: waiting for the kubelet to run the new sidecars and report the pods Ready"},
		podsReady: metav1.ConditionFalse, readyText: "1 of 2 matched pods are not both injected and Ready",
	}, {
		name:       "all running the new image, Ready",
		last:       podtest.Pod(podtest.Named("last"), podtest.InjectedWith(current), podtest.Ready(corev1.ConditionTrue), podtest.Spec("log-agent", image), podtest.Running("log-agent", image)),
		wantReason: "Complete", wantText: []string{"2 of 2 matched pods carry hash", "nothing left to update, and the kubelet runs the new sidecars Ready in every updated pod"},
		podsReady: metav1.ConditionTrue, readyText: "All 2 matched pods are injected and Ready",
	}}
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for _, tt := range tests {
		for _, planned := range []bool{true, false} {
			name := tt.name
			if !planned {
				name += ", not planned yet"
			}
			t.Run(name, func(t *testing.T) {
				pods := []*corev1.Pod{done, tt.last}
				in := rollout.Inputs(set, pods, func(string) map[string]string { return nil }, podtest.Scope,
					func(*corev1.Pod) bool { return true }, rollout.NewMemory(), now)
				var ro *rollout.State
				if planned {
					ro = &rollout.State{Blocked: in.Blocked, Stopping: in.Stopping}
					if _, err := rollout.Step(set, in, ro, rollout.NewMemory(), func(pod *corev1.Pod, _ bool) (rollout.Attempt, error) {
						t.Fatalf("pod %s tried: nothing is left to update", pod.Name)
						return rollout.Attempt{}, nil
					}); err != nil {
						t.Fatal(err)
					}
				}
				st := Compute(set, Tally(in.States), nil, ro, nil, metav1.NewTime(now))
				rolling := meta.FindStatusCondition(st.Conditions, appsv1alpha1.ConditionRollingUpdate)
				if rolling == nil || rolling.Reason != tt.wantReason {
					t.Fatalf("RollingUpdate %+v, want reason %s", rolling, tt.wantReason)
				}
				text := tt.wantText
				if !planned && tt.wantReason == "Progressing" {
					// Without the rollout's pass, the grace periods are not known: the count is.
					text = []string{"nothing left to start; 1 restarting"}
					if Tally(in.States).Stopping > 0 {
						text = append(text, "1 pods wait for an old sidecar container to stop: ")
					}
				}
				for _, s := range text {
					if !strings.Contains(rolling.Message, s) {
						t.Errorf("RollingUpdate message %q lacks %q", rolling.Message, s)
					}
				}
				complete := rolling.Reason == "Complete"
				if agree := st.UpdatedReadyPods == st.UpdatedPods && st.UpdatedPods == st.MatchedPods; complete != agree {
					t.Errorf("RollingUpdate %s while updatedReadyPods %d of %d updated, %d matched", rolling.Reason, st.UpdatedReadyPods, st.UpdatedPods, st.MatchedPods)
				}
				podsReady := meta.FindStatusCondition(st.Conditions, appsv1alpha1.ConditionPodsReady)
				if podsReady == nil || podsReady.Status != tt.podsReady || !strings.Contains(podsReady.Message, tt.readyText) {
					t.Errorf("PodsReady %+v, want %s with %q", podsReady, tt.podsReady, tt.readyText)
				}
				ready := meta.FindStatusCondition(st.Conditions, appsv1alpha1.ConditionReady)
				wantReady := map[bool]string{true: "Injecting", false: "RollingUpdateProgressing"}[complete]
				if ready == nil || ready.Reason != wantReady {
					t.Errorf("Ready %+v, want reason %s", ready, wantReady)
				}
				// The upgrade gate holds while the condition is not Complete.
				if ro != nil && InProgress(ro, Tally(in.States)) == complete {
					t.Errorf("upgrade gate in progress %v while RollingUpdate is %s (%s)", InProgress(ro, Tally(in.States)), rolling.Reason, Progress(ro, Tally(in.States)))
				}
			})
		}
	}
}

// planOf is a plan with that many Pods started, restarting, waiting and held back.
func planOf(update, restarting, waiting, heldBack int) rollout.Plan {
	return rollout.Plan{Update: make([]int, update), Restarting: restarting, Waiting: waiting, HeldBackPods: heldBack, MaxUnavailable: 1}
}

// waitingSidecar reports the container waiting for reason, the kubelet still naming the old

// TestRolloutInProgress: the upgrade gate holds while the rollout has Pods to start or Pods
// restarting, and not for Pods that only their own namespace's unavailable Pods hold back.
func TestRolloutInProgress(t *testing.T) {
	tests := []struct {
		name   string
		ro     rollout.State
		counts Counts
		want   bool
		text   string
	}{
		{"nothing to do", rollout.State{}, Counts{Matched: 3, Updated: 3}, false, "3 of 3 matched pods updated"},
		{"an update started", rollout.State{Plan: planOf(1, 0, 0, 0)}, Counts{Matched: 3, Updated: 1}, true, "1 of 3 matched pods updated"},
		{"pods wait for the budget", rollout.State{Plan: planOf(0, 0, 2, 0)}, Counts{Matched: 3, Updated: 1}, true, ""},
		{"only held back by their namespace", rollout.State{Plan: planOf(0, 0, 2, 2)}, Counts{Matched: 3, Updated: 1}, false, ""},
		{"evictions wait for their PodDisruptionBudget", rollout.State{WaitingForBudget: []rollout.BlockedPod{{Namespace: "shop", Name: "a"}}}, Counts{Matched: 3, Updated: 2}, true, ""},
		{"the last pod restarting, as the plan saw it", rollout.State{Plan: planOf(0, 1, 0, 0), Stopping: []rollout.BlockedPod{{Namespace: "shop", Name: "a", Why: "grace period 30s"}}},
			Counts{Matched: 3, Updated: 3, Restarting: 1, Stopping: 1}, true, "3 of 3 matched pods updated, 1 restarting (1 of them waiting for an old sidecar container to stop)"},
		{"the last pod restarting, as the counts see it (the plan's pass came first)", rollout.State{}, Counts{Matched: 3, Updated: 3, Restarting: 1}, true, "3 of 3 matched pods updated, 1 restarting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := InProgress(&tt.ro, tt.counts); got != tt.want {
				t.Errorf("InProgress = %v, want %v", got, tt.want)
			}
			if got := Progress(&tt.ro, tt.counts); !strings.Contains(got, tt.text) {
				t.Errorf("Progress = %q, want it to hold %q", got, tt.text)
			}
		})
	}
}
