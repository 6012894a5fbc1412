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
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/rollout"
)

// rollingSet is the log-agent set with updateStrategy RollingUpdate and its sidecar's image.
func rollingSet(t *testing.T) (*inject.CompiledSet, string) {
	t.Helper()
	set := compiledSet(t, "log-agent", nil, func(s *appsv1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy = appsv1alpha1.UpdateStrategy{Type: appsv1alpha1.RollingUpdate}
	})
	return set, set.Set.Spec.Containers[0].Image
}

// named gives the test Pod a name.
func named(name string) podOpt { return func(p *corev1.Pod) { p.Name = name } }

// notReadySidecar reports the container running image, not ready.
func notReadySidecar(name, image string) podOpt {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: name, Image: image,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}})
	}
}

// TestCompleteWaitsForTheKubelet: the RollingUpdate condition (whose reason the Rollout
// column of `kubectl get sidecarsets` shows), PodsReady and Ready agree with updatedReadyPods:
// Complete, PodsReady=True and Ready=True only once the kubelet runs the new sidecar, Ready, in
// every updated pod; before, Progressing says how many pods restart and what they wait for. It
// is so whether the rollout has planned this spec (the operator's steady state) or not yet (a
// status computed before its first pass, as after a restart).
func TestCompleteWaitsForTheKubelet(t *testing.T) {
	set, image := rollingSet(t)
	current := map[string]string{"log-agent": set.Hash}
	done := testPod(named("done"), injectedWith(current), ready(corev1.ConditionTrue), spec("log-agent", image), running("log-agent", image))
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
		last:       testPod(named("last"), injectedWith(current), ready(corev1.ConditionTrue), spec("log-agent", image), stopping("log-agent", "registry.example/log-agent:0")),
		wantReason: "Progressing",
		wantText: []string{"2 of 2 matched pods carry hash", "nothing left to start; 1 restarting: waiting for the kubelet",
			"1 pods wait for an old sidecar container to stop (shop: 1; grace period 30s: 1)", "does not exit on SIGTERM costs the whole grace period"},
		podsReady: metav1.ConditionFalse, readyText: "1 of 2 matched pods are not both injected and Ready (1 of them report Ready while the kubelet does not yet run",
	}, {
		name: "patched, a grace period of its own",
		last: testPod(named("last"), injectedWith(current), ready(corev1.ConditionTrue), spec("log-agent", image), stopping("log-agent", "registry.example/log-agent:0"),
			func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](120) }),
		wantReason: "Progressing", wantText: []string{"(shop: 1; grace period 2m0s: 1)"},
		podsReady: metav1.ConditionFalse,
	}, {
		name:       "patched, the new image waiting to be pulled",
		last:       testPod(named("last"), injectedWith(current), ready(corev1.ConditionFalse), spec("log-agent", image), waitingSidecar("log-agent", "registry.example/log-agent:0", "ImagePullBackOff")),
		wantReason: "Progressing", wantText: []string{"nothing left to start; 1 restarting"},
		podsReady: metav1.ConditionFalse, readyText: "1 of 2 matched pods are not both injected and Ready",
	}, {
		name:       "the new image running, not ready yet",
		last:       testPod(named("last"), injectedWith(current), ready(corev1.ConditionFalse), spec("log-agent", image), notReadySidecar("log-agent", image)),
		wantReason: "Progressing", wantText: []string{"nothing left to start; 1 restarting: waiting for the kubelet to run the new sidecars and report the pods Ready"},
		podsReady: metav1.ConditionFalse, readyText: "1 of 2 matched pods are not both injected and Ready",
	}, {
		name:       "all running the new image, Ready",
		last:       testPod(named("last"), injectedWith(current), ready(corev1.ConditionTrue), spec("log-agent", image), running("log-agent", image)),
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
				in := RolloutInputs(set, pods, func(string) map[string]string { return nil }, testScope,
					func(*corev1.Pod) bool { return true }, NewRolloutMemory(), now)
				var ro *Rollout
				if planned {
					ro = &Rollout{Blocked: in.Blocked, Stopping: in.Stopping}
					if _, err := Step(set, in, ro, NewRolloutMemory(), func(pod *corev1.Pod, _ bool) (Attempt, error) {
						t.Fatalf("pod %s tried: nothing is left to update", pod.Name)
						return Attempt{}, nil
					}); err != nil {
						t.Fatal(err)
					}
				}
				st := Compute(set, in.Counts, nil, ro, nil, metav1.NewTime(now))
				rolling := meta.FindStatusCondition(st.Conditions, appsv1alpha1.ConditionRollingUpdate)
				if rolling == nil || rolling.Reason != tt.wantReason {
					t.Fatalf("RollingUpdate %+v, want reason %s", rolling, tt.wantReason)
				}
				text := tt.wantText
				if !planned && tt.wantReason == "Progressing" {
					// Without the rollout's pass, the grace periods are not known: the count is.
					text = []string{"nothing left to start; 1 restarting"}
					if in.Counts.Stopping > 0 {
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
				if ro != nil && ro.InProgress(in.Counts) == complete {
					t.Errorf("upgrade gate in progress %v while RollingUpdate is %s (%s)", ro.InProgress(in.Counts), rolling.Reason, ro.Progress(in.Counts))
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
// image (as while it backs off pulling the new one).
func waitingSidecar(name, image, reason string) podOpt {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: name, Image: image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}})
	}
}

// TestRolloutInProgress: the upgrade gate holds while the rollout has Pods to start or Pods
// restarting, and not for Pods that only their own namespace's unavailable Pods hold back.
func TestRolloutInProgress(t *testing.T) {
	tests := []struct {
		name   string
		ro     Rollout
		counts Counts
		want   bool
		text   string
	}{
		{"nothing to do", Rollout{}, Counts{Matched: 3, Updated: 3}, false, "3 of 3 matched pods updated"},
		{"an update started", Rollout{Plan: planOf(1, 0, 0, 0)}, Counts{Matched: 3, Updated: 1}, true, "1 of 3 matched pods updated"},
		{"pods wait for the budget", Rollout{Plan: planOf(0, 0, 2, 0)}, Counts{Matched: 3, Updated: 1}, true, ""},
		{"only held back by their namespace", Rollout{Plan: planOf(0, 0, 2, 2)}, Counts{Matched: 3, Updated: 1}, false, ""},
		{"evictions wait for their PodDisruptionBudget", Rollout{WaitingForBudget: []BlockedPod{{Namespace: "shop", Name: "a"}}}, Counts{Matched: 3, Updated: 2}, true, ""},
		{"the last pod restarting, as the plan saw it", Rollout{Plan: planOf(0, 1, 0, 0), Stopping: []BlockedPod{{Namespace: "shop", Name: "a", Why: "grace period 30s"}}},
			Counts{Matched: 3, Updated: 3, Restarting: 1, Stopping: 1}, true, "3 of 3 matched pods updated, 1 restarting (1 of them waiting for an old sidecar container to stop)"},
		{"the last pod restarting, as the counts see it (the plan's pass came first)", Rollout{}, Counts{Matched: 3, Updated: 3, Restarting: 1}, true, "3 of 3 matched pods updated, 1 restarting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.ro.InProgress(tt.counts); got != tt.want {
				t.Errorf("InProgress = %v, want %v", got, tt.want)
			}
			if got := tt.ro.Progress(tt.counts); !strings.Contains(got, tt.text) {
				t.Errorf("Progress = %q, want it to hold %q", got, tt.text)
			}
		})
	}
}

// TestRestartOf: what a Pod whose kubelet does not yet run its spec waits for, as explain and
// the rollout plan say it.
func TestRestartOf(t *testing.T) {
	set, image := rollingSet(t)
	current := map[string]string{"log-agent": set.Hash}
	patchedAt := time.Date(2026, 11, 25, 11, 59, 48, 0, time.UTC)
	now := patchedAt.Add(12 * time.Second)
	// managed records who last wrote the sidecar's image, and when (managedFields).
	managed := func(fields string, at time.Time, subresource string) podOpt {
		return func(p *corev1.Pod) {
			p.ManagedFields = append(p.ManagedFields, metav1.ManagedFieldsEntry{Manager: "m", Operation: metav1.ManagedFieldsOperationUpdate,
				Subresource: subresource, Time: &metav1.Time{Time: at}, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)})
		}
	}
	const ownsImage = `{"f:spec":{"f:containers":{"k:{\"name\":\"log-agent\"}":{"f:image":{}}}}}`
	const ownsOther = `{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{"f:image":{}}}}}`
	tests := []struct {
		name    string
		pod     *corev1.Pod
		ok      bool
		want    string // Describe(now) in full, or a part of it
		partial bool
	}{
		{name: "settled", pod: testPod(injectedWith(current), spec("log-agent", image), running("log-agent", image))},
		{name: "old container stopping, the patch time known",
			pod: testPod(injectedWith(current), spec("log-agent", image), stopping("log-agent", "registry.example/log-agent:0"),
				managed(`{"f:metadata":{}}`, patchedAt.Add(-time.Hour), ""), managed(ownsImage, patchedAt, ""), managed(ownsOther, now, ""), managed(ownsImage, now, "status")),
			ok: true,
			want: "restarting, waiting for the old container to stop (grace period 30s, waited 12s): sidecar log-agent still runs registry.example/log-agent:0, " +
				"the pod's spec names registry.example/log-agent:1 (hash " + set.Hash + "); a sidecar that does not exit on SIGTERM is stopped only when the grace period ends"},
		{name: "old container stopping past its grace period",
			pod: testPod(injectedWith(current), spec("log-agent", image), stopping("log-agent", "registry.example/log-agent:0"),
				managed(ownsImage, patchedAt.Add(-45*time.Second), ""), func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](10) }),
			ok: true, want: "(grace period 10s, waited 57s)", partial: true},
		{name: "old container stopping, the patch time unknown (no managedFields)",
			pod: testPod(injectedWith(current), spec("log-agent", image), stopping("log-agent", "registry.example/log-agent:0")),
			ok:  true, want: "restarting, waiting for the old container to stop (grace period 30s): ", partial: true},
		{name: "the new image waiting to be pulled",
			pod: testPod(injectedWith(current), spec("log-agent", image), waitingSidecar("log-agent", "registry.example/log-agent:0", "ImagePullBackOff")),
			ok:  true, want: "restarting, the new container waits (ImagePullBackOff): sidecar log-agent, the kubelet reports registry.example/log-agent:0", partial: true},
		{name: "the old container gone, the new one not started",
			pod: testPod(injectedWith(current), spec("log-agent", image), running("log-agent", "registry.example/log-agent:0")),
			ok:  true, want: "restarting, waiting for the kubelet to start the new image: sidecar log-agent reports registry.example/log-agent:0", partial: true},
		{name: "the kubelet has not observed the latest spec",
			pod: testPod(injectedWith(current), spec("log-agent", image), running("log-agent", image), generations(4, 3)),
			ok:  true, want: "restarting, waiting for the kubelet to observe the pod's latest spec (generation 4, observed 3; hash " + set.Hash + ")"},
		{name: "resizing",
			pod: testPod(injectedWith(current), spec("log-agent", image), running("log-agent", image), resize(corev1.PodResizeInProgress, "")),
			ok:  true, want: "resizing in place", partial: true},
		{name: "another container's image differs: not the set's business",
			pod: testPod(injectedWith(current), spec("log-agent", image), running("log-agent", image), spec("app", "app:2"), running("app", "app:1"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, ok := RestartOf(set, tt.pod)
			if ok != tt.ok {
				t.Fatalf("RestartOf ok %v, want %v (%+v)", ok, tt.ok, r)
			}
			if !ok {
				return
			}
			got := r.Describe(now)
			if tt.partial && !strings.Contains(got, tt.want) || !tt.partial && got != tt.want {
				t.Errorf("Describe:\n got %q\nwant %q", got, tt.want)
			}
			if s, selected := Classify(set, tt.pod, func(string) map[string]string { return nil }, testScope); !selected || s.Settled || s.Stopping != r.Stopping {
				t.Errorf("Classify settled %v stopping %v, RestartOf %+v: they disagree", s.Settled, s.Stopping, r)
			}
		})
	}
}
