package rollout

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecarset/sidecarset-operator/internal/rollout/podtest"
)

func TestFinishedAndPodReady(t *testing.T) {
	tests := []struct {
		name        string
		pod         *corev1.Pod
		live, ready bool // live: not finished
	}{
		{name: "running and Ready", pod: podtest.Pod(podtest.Ready(corev1.ConditionTrue)), live: true, ready: true},
		{name: "Ready unknown", pod: podtest.Pod(podtest.Ready(corev1.ConditionUnknown)), live: true},
		{name: "no phase yet", pod: podtest.Pod(podtest.Phase("")), live: true},
		{name: "unknown phase", pod: podtest.Pod(podtest.Phase(corev1.PodUnknown)), live: true},
		{name: "succeeded", pod: podtest.Pod(podtest.Phase(corev1.PodSucceeded))},
		{name: "failed but still Ready", pod: podtest.Pod(podtest.Phase(corev1.PodFailed), podtest.Ready(corev1.ConditionTrue)), ready: true},
		{name: "terminating", pod: podtest.Pod(func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }), live: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := !finished(tt.pod); got != tt.live {
				t.Errorf("!finished = %v, want %v", got, tt.live)
			}
			if got := PodReady(tt.pod); got != tt.ready {
				t.Errorf("PodReady = %v, want %v", got, tt.ready)
			}
		})
	}
}

// TestClassifyForTheRollout: what the rollout reads of a pod beyond the counts.
func TestClassifyForTheRollout(t *testing.T) {
	set := podtest.Set(t, "log-agent", nil)
	image := set.Set.Spec.Containers[0].Image
	current := map[string]string{"log-agent": set.Hash}
	waiting := func(reason string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: "app",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}})
		}
	}
	scheduled := func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue})
	}
	notReadySidecar := func(p *corev1.Pod) {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: "log-agent", Image: image})
	}
	tests := []struct {
		name                                     string
		pod                                      *corev1.Pod
		terminating, starting, restarting, avail bool
		refused                                  string // part of ResizeRefused; "" when it must be empty
	}{
		{name: "settled and ready", pod: podtest.Pod(podtest.InjectedWith(current), podtest.Ready(corev1.ConditionTrue), podtest.Spec("log-agent", image), podtest.Running("log-agent", image)), avail: true},
		{name: "terminating", pod: podtest.Pod(podtest.InjectedWith(current), podtest.Ready(corev1.ConditionTrue), func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }), terminating: true},
		{name: "scheduled, no container yet: the revision's", pod: podtest.Pod(podtest.InjectedWith(current), scheduled), starting: true, restarting: true},
		{name: "not scheduled: the revision's", pod: podtest.Pod(podtest.InjectedWith(current)), restarting: true},
		{name: "old, not scheduled: its own", pod: podtest.Pod(podtest.InjectedWith(map[string]string{"log-agent": "old"}))},
		{name: "a container being created", pod: podtest.Pod(podtest.InjectedWith(current), scheduled, waiting("ContainerCreating")), starting: true, restarting: true},
		{name: "init containers running", pod: podtest.Pod(podtest.InjectedWith(current), scheduled, waiting("PodInitializing")), starting: true, restarting: true},
		{name: "crash-looping: not starting, the revision's", pod: podtest.Pod(podtest.InjectedWith(current), scheduled, waiting("CrashLoopBackOff")), restarting: true},
		{name: "old, crash-looping: its own", pod: podtest.Pod(podtest.InjectedWith(map[string]string{"log-agent": "old"}), scheduled, waiting("CrashLoopBackOff"))},
		{name: "image not yet running: restarting", pod: podtest.Pod(podtest.InjectedWith(current), podtest.Ready(corev1.ConditionTrue), podtest.Spec("log-agent", image), podtest.Running("log-agent", "old:1")), restarting: true},
		{name: "updated, sidecar not ready: restarting", pod: podtest.Pod(podtest.InjectedWith(current), podtest.Spec("log-agent", image), notReadySidecar), restarting: true},
		{name: "old, sidecar not ready: its own", pod: podtest.Pod(podtest.InjectedWith(map[string]string{"log-agent": "old"}), podtest.Spec("log-agent", image), notReadySidecar)},
		{name: "updated, app not ready: the revision's (a new proxy may break the app)", pod: podtest.Pod(podtest.InjectedWith(current), podtest.Ready(corev1.ConditionFalse), podtest.Spec("log-agent", image), podtest.Running("log-agent", image)), restarting: true},
		{name: "old, app not ready: its own", pod: podtest.Pod(podtest.InjectedWith(map[string]string{"log-agent": "old"}), podtest.Ready(corev1.ConditionFalse), podtest.Spec("log-agent", image), podtest.Running("log-agent", image))},
		{name: "never injected, not ready: its own", pod: podtest.Pod(podtest.Spec("log-agent", "x"), podtest.Running("log-agent", "y"))},
		{name: "resize in progress: restarting", pod: podtest.Pod(podtest.InjectedWith(current), podtest.Ready(corev1.ConditionTrue), podtest.Spec("log-agent", image), podtest.Running("log-agent", image),
			podtest.Resize(corev1.PodResizeInProgress, "")), restarting: true},
		{name: "resize deferred: available", pod: podtest.Pod(podtest.InjectedWith(current), podtest.Ready(corev1.ConditionTrue), podtest.Spec("log-agent", image), podtest.Running("log-agent", image),
			podtest.Resize(corev1.PodResizePending, corev1.PodReasonDeferred)), avail: true},
		{name: "resize infeasible: available, refused", pod: podtest.Pod(podtest.InjectedWith(current), podtest.Ready(corev1.ConditionTrue), podtest.Spec("log-agent", image), podtest.Running("log-agent", image),
			podtest.Resize(corev1.PodResizePending, corev1.PodReasonInfeasible)), avail: true, refused: "PodResizePending, Infeasible: Node didn't have enough capacity"},
		{name: "resize failed: available, refused", pod: podtest.Pod(podtest.InjectedWith(current), podtest.Ready(corev1.ConditionTrue), podtest.Spec("log-agent", image), podtest.Running("log-agent", image),
			podtest.Resize(corev1.PodResizeInProgress, corev1.PodReasonError)), avail: true, refused: "PodResizeInProgress, Error: Node didn't have enough capacity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, selected := Classify(set, tt.pod, func(string) map[string]string { return nil }, podtest.Scope)
			if !selected {
				t.Fatal("not selected")
			}
			if (tt.refused == "") != (s.ResizeRefused == "") || !strings.Contains(s.ResizeRefused, tt.refused) {
				t.Errorf("ResizeRefused %q, want it to hold %q", s.ResizeRefused, tt.refused)
			}
			if s.Terminating != tt.terminating || s.Starting != tt.starting || s.Restarting() != tt.restarting || s.Available() != tt.avail {
				t.Errorf("terminating %v starting %v restarting %v available %v; want %v %v %v %v",
					s.Terminating, s.Starting, s.Restarting(), s.Available(), tt.terminating, tt.starting, tt.restarting, tt.avail)
			}
		})
	}
}
