package rollout

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// PodState is how one Pod the SidecarSet selects stands; see SidecarSetStatus for the terms.
type PodState struct {
	Pod                                *corev1.Pod
	Excluded, Injected, Updated, Ready bool
	// Terminating is true for a Pod being deleted. It is in no status count, but the rollout
	// counts it unavailable until it is gone.
	Terminating bool
	// RunsDeclaredImages is false when the kubelet reports a sidecar of this set running
	// another image than the set declares (true for a Pod the set has not injected).
	RunsDeclaredImages bool
	// Settled is true when the kubelet runs what the Pod's own spec asks of this set's
	// sidecars: each reports the image the spec names, and the kubelet has observed the
	// Pod's latest generation (where it reports one). False while an in-place update is in
	// flight, whatever the set's spec says now: a Pod patched for an older revision is not
	// available until its kubelet catches up.
	Settled bool
	// SidecarsReady is true when the kubelet reports each of this set's sidecars ready.
	SidecarsReady bool
	// Stopping is true while the kubelet still runs the old container of a sidecar of this
	// set whose image the Pod's spec changed: it waits for it to exit, for the Pod's
	// terminationGracePeriodSeconds at most, before it starts the new image (RestartOf).
	Stopping bool
	// Starting is true while the kubelet is still creating the Pod's containers.
	Starting bool
	// OwnCopies names (comma-separated) the set's sidecars that the Pod declared itself, under
	// the set's current hash (inject.InjectionOf): the Pod is not counted updated, and the
	// rollout has nothing to give it.
	OwnCopies string
	// ResizeRefused is why the kubelet will not apply the Pod's last resize (its
	// PodResizePending condition with reason Infeasible, or PodResizeInProgress with reason
	// Error); empty otherwise.
	ResizeRefused string
	// Footprint is what the set's sidecars in the Pod request and limit (footprintOf); zero for a
	// Pod the set has not injected, or one it excludes.
	Footprint Footprint
}

// Available reports whether the Pod counts as available: Ready, not being deleted, and
// running the images its spec names.
func (s PodState) Available() bool { return s.Ready && s.Settled && !s.Terminating }

// Restarting reports whether the Pod's unavailability counts as the rollout's: the kubelet
// does not yet run the images the set's sidecars name, or the Pod carries the revision being
// rolled out and is not available, whatever made it so (its sidecars still starting, or the
// new sidecars ready and the app not, as when a new proxy breaks the app's readiness, or the
// replacement of an evicted Pod still warming up). Such a Pod counts against the set-wide
// budget, so a revision that breaks its Pods stops the  Judged from the Pod alone, it
// holds across operator restarts. Any other unavailability is the Pod's own.
func (s PodState) Restarting() bool {
	return s.Injected && !s.Terminating && (!s.Settled || s.Updated && !s.Available())
}

// Classify says how the Pod stands against the set; selected is false when the set does not
// select it at all (finished, not opted in, or not matching the selectors). A Pod being
// deleted is selected as Terminating: no status count includes it, but the rollout's budget
// does.
func Classify(set *inject.CompiledSet, pod *corev1.Pod, namespaceLabels func(string) map[string]string, scope inject.Scope) (s PodState, selected bool) {
	if finished(pod) || !set.SelectsPod(pod.Labels) {
		return s, false
	}
	nsLabels := namespaceLabels(pod.Namespace)
	// A Pod that does not opt in is no set's; one the gate keeps out for any other reason is
	// selected, and excluded.
	open, reason, _ := inject.Gate(&pod.ObjectMeta, nsLabels, scope)
	if reason == inject.GateNotOptedIn || set.HasNamespaceSelector() && !set.SelectsNamespace(nsLabels) {
		return s, false
	}
	s.Pod = pod
	s.Terminating = pod.DeletionTimestamp != nil
	if !open {
		s.Excluded = true
		return s, true
	}
	hash, injected, own := inject.InjectionOf(pod.Annotations, set)
	s.Injected, s.Updated, s.Ready = injected, injected && hash == set.Hash, PodReady(pod)
	if s.Updated && len(own) > 0 {
		s.Updated, s.OwnCopies = false, strings.Join(own, ", ")
	}
	if injected {
		if hash != set.Hash {
			own = inject.UnlistedSidecars(pod.Annotations, set)
		}
		s.Footprint = footprintOf(set, pod, own)
	}
	s.RunsDeclaredImages = !injected || runsDeclaredImages(set, pod)
	s.Settled, s.SidecarsReady = sidecarsSettled(set, pod)
	// A resize the kubelet is carrying out may restart containers (their resizePolicy): the
	// Pod is not settled until it is done. A deferred one waits for room on the node, for as
	// long as that takes, while the Pod runs as before: it is settled.
	resizing, refused := resizeState(pod)
	s.Settled, s.ResizeRefused = s.Settled && !resizing, refused
	s.Stopping = !s.Settled && oldContainerRunning(set, pod)
	s.Starting = !s.Terminating && starting(pod)
	return s, true
}

// resizeState reads the kubelet's word on the Pod's last in-place resize: whether it is being
// carried out, or why it will not be (Kubernetes 1.33+ kubelets report these conditions).
func resizeState(pod *corev1.Pod) (inProgress bool, refused string) {
	for _, c := range pod.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch {
		case c.Type == corev1.PodResizePending && c.Reason == corev1.PodReasonInfeasible,
			c.Type == corev1.PodResizeInProgress && c.Reason == corev1.PodReasonError:
			return false, fmt.Sprintf("the kubelet refused the in-place resize (%s, %s: %s)", c.Type, c.Reason, c.Message)
		case c.Type == corev1.PodResizeInProgress:
			inProgress = true
		}
	}
	return inProgress, ""
}

// sidecarsSettled reports whether the kubelet runs the images the Pod's spec names for the
// set's sidecars and has observed the Pod's generation (kubelets from Kubernetes 1.35 report
// status.observedGeneration; older ones report none, and the images alone decide), and
// whether it reports each of them ready. A sidecar without a status (not yet started) or
// without a spec (a trimmed Pod) does not unsettle the Pod: its Ready condition decides.
func sidecarsSettled(set *inject.CompiledSet, pod *corev1.Pod) (settled, ready bool) {
	settled = pod.Status.ObservedGeneration == 0 || pod.Status.ObservedGeneration >= pod.Generation
	ready = true
	for _, l := range []struct {
		declared []appsv1alpha1.SidecarContainer
		specs    []corev1.Container
		statuses []corev1.ContainerStatus
	}{{set.Set.Spec.Containers, pod.Spec.Containers, pod.Status.ContainerStatuses},
		{set.Set.Spec.InitContainers, pod.Spec.InitContainers, pod.Status.InitContainerStatuses}} {
		for i := range l.statuses {
			st := &l.statuses[i]
			if !slices.ContainsFunc(l.declared, func(d appsv1alpha1.SidecarContainer) bool { return d.Name == st.Name }) {
				continue
			}
			ready = ready && st.Ready
			for j := range l.specs {
				if l.specs[j].Name == st.Name && !inject.SameImage(l.specs[j].Image, st.Image, st.ImageID) {
					settled = false
				}
			}
		}
	}
	return settled, ready
}

// starting reports whether the kubelet is still creating the Pod's containers: it is
// scheduled and reports no container yet, or a container waits to be created.
func starting(pod *corev1.Pod) bool {
	if len(pod.Status.ContainerStatuses) == 0 && len(pod.Status.InitContainerStatuses) == 0 {
		return podCondition(pod, corev1.PodScheduled) == corev1.ConditionTrue
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for i := range list {
			if w := list[i].State.Waiting; w != nil && (w.Reason == "ContainerCreating" || w.Reason == "PodInitializing") {
				return true
			}
		}
	}
	return false
}

// runsDeclaredImages reports whether no container status of the set's sidecars shows another
// image than the set declares. A Pod without container statuses (not yet started) passes: its
// Ready condition decides.
func runsDeclaredImages(set *inject.CompiledSet, pod *corev1.Pod) bool {
	for _, l := range []struct {
		declared []appsv1alpha1.SidecarContainer
		statuses []corev1.ContainerStatus
	}{{set.Set.Spec.Containers, pod.Status.ContainerStatuses}, {set.Set.Spec.InitContainers, pod.Status.InitContainerStatuses}} {
		for i := range l.statuses {
			st := &l.statuses[i]
			for j := range l.declared {
				if l.declared[j].Name == st.Name && !inject.SameImage(l.declared[j].Image, st.Image, st.ImageID) {
					return false
				}
			}
		}
	}
	return true
}

// finished reports whether the Pod's containers have all ended for good.
func finished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// PodReady reports whether the Pod's Ready condition is True.
func PodReady(pod *corev1.Pod) bool {
	return podCondition(pod, corev1.PodReady) == corev1.ConditionTrue
}

// podCondition is the status of the Pod's condition of that type; empty when it has none.
func podCondition(pod *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}
