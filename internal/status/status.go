package status

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/rollout"
	"github.com/sidecarset/sidecarset-operator/internal/snapshot"
	"github.com/sidecarset/sidecarset-operator/internal/validation"
)

// Counts are the pod counts of a SidecarSet's status; see SidecarSetStatus for definitions.
type Counts struct {
	Matched, Excluded, Updated, Ready, UpdatedReady, Unavailable, NotInjected int32
	// Restarting counts the Pods whose unavailability is the rollout's (PodState.Restarting):
	// a rolling update is not complete while there are any. Stopping counts those of them
	// whose kubelet still runs an old sidecar container (PodState.Stopping). ReadyRestarting
	// counts the Pods in Ready whose kubelet does not yet run the images their spec names:
	// PodsReady does not count them. None of the three is a status field.
	Restarting, Stopping, ReadyRestarting int32
}

// Scope is the engine's gate scope (inject.Scope): the namespaces never injected by name.
// Classify counts a selected Pod that the gate keeps from injection as excluded.
type Scope = inject.Scope

// Count classifies the Pods against one SidecarSet. namespaceLabels returns the labels of a
// namespace by name.
func Count(set *inject.CompiledSet, pods []*corev1.Pod, namespaceLabels func(string) map[string]string, scope Scope) Counts {
	var c Counts
	for _, pod := range pods {
		s, selected := Classify(set, pod, namespaceLabels, scope)
		if selected {
			c.Add(s)
		}
	}
	return c
}

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
	// the set's current hash (inject.UnlistedSidecars): the Pod is not counted updated, and the
	// rollout has nothing to give it.
	OwnCopies string
	// ResizeRefused is why the kubelet will not apply the Pod's last resize (its
	// PodResizePending condition with reason Infeasible, or PodResizeInProgress with reason
	// Error); empty otherwise.
	ResizeRefused string
}

// Available reports whether the Pod counts as available: Ready, not being deleted, and
// running the images its spec names.
func (s PodState) Available() bool { return s.Ready && s.Settled && !s.Terminating }

// Restarting reports whether the Pod's unavailability counts as the rollout's: the kubelet
// does not yet run the images the set's sidecars name, or the Pod carries the revision being
// rolled out and is not available, whatever made it so (its sidecars still starting, or the
// new sidecars ready and the app not, as when a new proxy breaks the app's readiness, or the
// replacement of an evicted Pod still warming up). Such a Pod counts against the set-wide
// budget, so a revision that breaks its Pods stops the rollout. Judged from the Pod alone, it
// holds across operator restarts. Any other unavailability is the Pod's own.
func (s PodState) Restarting() bool {
	return s.Injected && !s.Terminating && (!s.Settled || s.Updated && !s.Available())
}

// Add counts one selected Pod (see Classify).
func (c *Counts) Add(s PodState) { c.add(s, 1) }

// Remove takes back what Add counted for the same state.
func (c *Counts) Remove(s PodState) { c.add(s, -1) }

func (c *Counts) add(s PodState, d int32) {
	if s.Terminating {
		return
	}
	if s.Excluded {
		c.Excluded += d
		return
	}
	c.Matched += d
	if s.Updated {
		c.Updated += d
	}
	if !s.Injected {
		c.NotInjected += d
	}
	if s.Injected && s.Ready {
		c.Ready += d
	}
	if s.Updated && s.Ready && s.RunsDeclaredImages && s.Settled {
		c.UpdatedReady += d
	}
	if !s.Available() {
		c.Unavailable += d
	}
	if s.Restarting() {
		c.Restarting += d
		if s.Stopping {
			c.Stopping += d
		}
	}
	if s.Injected && s.Ready && !s.Settled {
		c.ReadyRestarting += d
	}
}

// Classify says how the Pod stands against the set; selected is false when the set does not
// select it at all (finished, not opted in, or not matching the selectors). A Pod being
// deleted is selected as Terminating: no status count includes it, but the rollout's budget
// does.
func Classify(set *inject.CompiledSet, pod *corev1.Pod, namespaceLabels func(string) map[string]string, scope Scope) (s PodState, selected bool) {
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
	hash, injected := inject.InjectedHash(pod.Annotations, set.Name())
	s.Injected, s.Updated, s.Ready = injected, injected && hash == set.Hash, PodReady(pod)
	if s.Updated {
		if own := inject.UnlistedSidecars(pod.Annotations, set); len(own) > 0 {
			s.Updated, s.OwnCopies = false, strings.Join(own, ", ")
		}
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

// Compute returns the status a SidecarSet should have: the counts, its hash, the generation
// they describe, and the conditions (old conditions keep their transition time when their
// status does not change; new transitions get now). conflicts are the set's clashes with
// other SidecarSets (snapshot.Snapshot.Conflicts). Equal inputs give equal statuses, so a
// reconcile that finds nothing new writes nothing.
func Compute(set *inject.CompiledSet, counts Counts, conflicts []snapshot.Conflict, ro *Rollout, old []metav1.Condition, now metav1.Time) appsv1alpha1.SidecarSetStatus {
	gen := set.Set.Generation
	st := appsv1alpha1.SidecarSetStatus{
		ObservedGeneration: gen,
		MatchedPods:        counts.Matched,
		ExcludedPods:       counts.Excluded,
		UpdatedPods:        counts.Updated,
		ReadyPods:          counts.Ready,
		UpdatedReadyPods:   counts.UpdatedReady,
		UnavailablePods:    counts.Unavailable,
		NotInjectedPods:    counts.NotInjected,
		Hash:               set.Hash,
	}
	for i := range old {
		st.Conditions = append(st.Conditions, *old[i].DeepCopy())
	}
	meta.RemoveStatusCondition(&st.Conditions, appsv1alpha1.ConditionInvalid)
	// Conditions that no longer apply go; the others are set, keeping their transition time
	// when their status stays.
	if len(conflicts) == 0 {
		meta.RemoveStatusCondition(&st.Conditions, appsv1alpha1.ConditionConflict)
	}
	conds := conditions(set, counts, conflicts)
	if set.Set.Spec.UpdateStrategy.Type == appsv1alpha1.RollingUpdate {
		rolling := rollingCondition(set, counts, ro)
		conds = append(conds, rolling, readyCondition(set, conflicts, &rolling))
	} else {
		meta.RemoveStatusCondition(&st.Conditions, appsv1alpha1.ConditionRollingUpdate)
		conds = append(conds, readyCondition(set, conflicts, nil))
	}
	for _, c := range conds {
		c.ObservedGeneration = gen
		c.LastTransitionTime = now
		meta.SetStatusCondition(&st.Conditions, c)
	}
	return st
}

// Invalid returns the status of a SidecarSet that cannot be compiled: no counts (it selects
// nothing) and the Invalid condition with the reason. The reason is what validation finds,
// sorted (its selector checks walk maps, whose order changes from call to call), so the
// message is the same on every reconcile; err is the fallback.
func Invalid(set *appsv1alpha1.SidecarSet, err error, now metav1.Time) appsv1alpha1.SidecarSetStatus {
	reason := err.Error()
	if errs := validation.ValidateSidecarSet(set, nil); len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = e.Error()
		}
		slices.Sort(msgs)
		reason = fmt.Sprintf("SidecarSet %q: %s", set.Name, strings.Join(slices.Compact(msgs), "; "))
	}
	st := appsv1alpha1.SidecarSetStatus{ObservedGeneration: set.Generation}
	for i := range set.Status.Conditions {
		if t := set.Status.Conditions[i].Type; t == appsv1alpha1.ConditionInvalid || t == appsv1alpha1.ConditionReady {
			st.Conditions = append(st.Conditions, *set.Status.Conditions[i].DeepCopy())
		}
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: appsv1alpha1.ConditionInvalid, Status: metav1.ConditionTrue, Reason: "InvalidSpec",
		Message: reason + "; it injects nothing until the spec is fixed", ObservedGeneration: set.Generation,
		LastTransitionTime: now,
	})
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: appsv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Invalid",
		Message: "The SidecarSet is invalid and injects nothing; see the Invalid condition", ObservedGeneration: set.Generation,
		LastTransitionTime: now,
	})
	return st
}

func conditions(set *inject.CompiledSet, c Counts, conflicts []snapshot.Conflict) []metav1.Condition {
	paused := metav1.Condition{Type: appsv1alpha1.ConditionPaused, Status: metav1.ConditionFalse,
		Reason: "Injecting", Message: "New matching pods are injected"}
	if set.Set.Spec.InjectionStrategy.Paused {
		paused.Status, paused.Reason = metav1.ConditionTrue, "PausedBySpec"
		paused.Message = "spec.injectionStrategy.paused is true: new pods are not injected; injected pods keep their sidecars"
	}
	updated := metav1.Condition{Type: appsv1alpha1.ConditionPodsUpdated, Status: metav1.ConditionTrue,
		Reason: "AllPodsUpdated", Message: fmt.Sprintf("All %d matched pods carry hash %s", c.Matched, set.Hash)}
	switch {
	case c.Matched == 0:
		updated.Reason, updated.Message = "NoMatchedPods", noMatchMessage(set, c)
	case c.Updated < c.Matched:
		updated.Status, updated.Reason = metav1.ConditionFalse, "PodsOutdated"
		updated.Message = fmt.Sprintf("%d of %d matched pods were not injected with hash %s; recreate them (for example kubectl rollout restart) to pick up the current spec",
			c.Matched-c.Updated, c.Matched, set.Hash)
	}
	ready := metav1.Condition{Type: appsv1alpha1.ConditionPodsReady, Status: metav1.ConditionTrue,
		Reason: "AllPodsReady", Message: fmt.Sprintf("All %d matched pods are injected and Ready", c.Matched)}
	// A Pod whose kubelet still runs an old sidecar (its container stopping after an in-place
	// update) may report Ready: it is not counted Ready here until the kubelet runs the new one.
	switch notReady := c.Matched - c.Ready + c.ReadyRestarting; {
	case c.Matched == 0:
		ready.Reason, ready.Message = "NoMatchedPods", noMatchMessage(set, c)
	case notReady > 0:
		ready.Status, ready.Reason = metav1.ConditionFalse, "PodsNotReady"
		ready.Message = fmt.Sprintf("%d of %d matched pods are not both injected and Ready", notReady, c.Matched)
		if c.ReadyRestarting > 0 {
			ready.Message += fmt.Sprintf(" (%d of them report Ready while the kubelet does not yet run the sidecar images their spec names: an in-place update is restarting them)", c.ReadyRestarting)
		}
	}
	out := []metav1.Condition{paused, updated, ready}
	if len(conflicts) > 0 {
		out = append(out, conflictCondition(conflicts))
	}
	return out
}

// conflictCondition says which SidecarSets this one clashes with, on which fields, and which
// of the two injects.
func conflictCondition(conflicts []snapshot.Conflict) metav1.Condition {
	cond := metav1.Condition{Type: appsv1alpha1.ConditionConflict, Status: metav1.ConditionTrue, Reason: "ConflictWithNewer"}
	var msgs []string
	for _, c := range conflicts {
		fields := strings.Join(c.Fields, "; ")
		if c.Stopped {
			cond.Reason = "StoppedByConflict"
			msgs = append(msgs, fmt.Sprintf("injects nothing while it conflicts with the older SidecarSet %q, which keeps injecting (%s)", c.With, fields))
		} else {
			msgs = append(msgs, fmt.Sprintf("the newer SidecarSet %q conflicts with this one and injects nothing until the conflict is resolved (%s)", c.With, fields))
		}
	}
	cond.Message = strings.Join(msgs, "; ") + ". Resolve it by renaming, making the definitions equal, or making the selectors disjoint"
	return cond
}

// noMatchMessage answers "why is MATCHED 0?" with what a pod needs.
func noMatchMessage(set *inject.CompiledSet, c Counts) string {
	msg := fmt.Sprintf("No pod matches: a pod needs the label %s=%s and labels matching spec.selector (%s)",
		appsv1alpha1.InjectLabel, appsv1alpha1.InjectLabelValue, metav1.FormatLabelSelector(set.Set.Spec.Selector))
	if set.Set.Spec.NamespaceSelector != nil {
		msg += fmt.Sprintf(", in a namespace matching spec.namespaceSelector (%s)", metav1.FormatLabelSelector(set.Set.Spec.NamespaceSelector))
	}
	msg += fmt.Sprintf(", outside kube-system, the operator's namespace and namespaces labelled %s=%s",
		appsv1alpha1.NamespaceInjectionLabel, appsv1alpha1.NamespaceInjectionDisabled)
	if c.Excluded > 0 {
		msg += fmt.Sprintf("; %d selected pods are in such excluded namespaces (status.excludedPods)", c.Excluded)
	}
	return msg
}

// Rollout is where a RollingUpdate stands: the planner's last step, and the outdated Pods that
// cannot take the change in place.
type Rollout struct {
	Plan    rollout.Plan
	Blocked []BlockedPod
	// WaitingForBudget are the Pods to recreate whose PodDisruptionBudget allowed no eviction
	// in this pass: they are tried again.
	WaitingForBudget []BlockedPod
	// Halted is why the rollout halted for this generation of the set (recreated Pods not
	// available by the progress deadline); empty while it goes on.
	Halted string
	// Stopping are the restarting Pods whose kubelet still runs an old sidecar container, each
	// with its grace period (StoppingWhy): the condition counts them by namespace and grace
	// period, and never names them.
	Stopping []BlockedPod
}

// HaltedReason is the RollingUpdate condition's reason while the rollout is halted.
const HaltedReason = "Halted"

// HaltSummary says why a rollout halts: the Pods not available by the deadline, counted by
// namespace and by why (the Pods' names go to events on them).
func HaltSummary(stalled []BlockedPod, deadlineSeconds int32) string {
	return fmt.Sprintf("%d recreated pods were not available %ds after the eviction (%s; %s); the rollout starts no update or eviction "+
		"until the spec changes (fix it, or set updateStrategy.paused and unset it)", len(stalled), deadlineSeconds,
		countBy(stalled, func(b BlockedPod) string { return b.Namespace }), countBy(stalled, func(b BlockedPod) string { return b.Why }))
}

// BlockedPod is an outdated Pod that cannot take the change in place, and why. The set's
// status, which anyone who may read SidecarSets sees, counts such Pods by namespace and never
// names them: the why goes to an event on the Pod itself.
type BlockedPod struct {
	Namespace, Name, Why string
	// NeverInjected is true for a Pod the set selects but never injected.
	NeverInjected bool
}

// maxNamed is how many namespaces a condition message names.
const maxNamed = 5

// rollingCondition is the RollingUpdate condition of a set whose updateStrategy is
// RollingUpdate; ro is where the rollout of this very spec stands, nil until it is planned.
func rollingCondition(set *inject.CompiledSet, c Counts, ro *Rollout) metav1.Condition {
	cond := metav1.Condition{Type: appsv1alpha1.ConditionRollingUpdate}
	progress := fmt.Sprintf("%d of %d matched pods carry hash %s", c.Updated, c.Matched, set.Hash)
	if ro == nil {
		switch {
		case c.Updated < c.Matched:
			cond.Status, cond.Reason = metav1.ConditionTrue, "Progressing"
			cond.Message = progress + "; the rollout has not planned this spec yet"
		case c.Restarting > 0:
			cond.Status, cond.Reason = metav1.ConditionTrue, "Progressing"
			cond.Message = progress + "; " + restartingSummary(c, nil)
		default:
			cond.Status, cond.Reason = metav1.ConditionFalse, "Complete"
			cond.Message = progress + "; nothing left to update, and the kubelet runs the new sidecars Ready in every updated pod"
		}
		return cond
	}
	p := ro.Plan
	if p.Keep > 0 {
		progress += fmt.Sprintf(" (partition keeps %d)", p.Keep)
	}
	switch {
	case ro.Halted != "":
		cond.Status, cond.Reason = metav1.ConditionFalse, HaltedReason
		cond.Message = progress + "; " + ro.Halted
	case set.Set.Spec.UpdateStrategy.Paused && p.Waiting > 0:
		cond.Status, cond.Reason = metav1.ConditionTrue, "Paused"
		cond.Message = progress + fmt.Sprintf("; spec.updateStrategy.paused is true: %d pods wait", p.Waiting)
	case len(p.Update) > 0 || p.Waiting > 0:
		cond.Status, cond.Reason = metav1.ConditionTrue, "Progressing"
		cond.Message = progress + fmt.Sprintf("; %d restarting of at most %d unavailable", p.Restarting, p.MaxUnavailable)
		if len(p.HeldBack) > 0 {
			cond.Message += "; pods unavailable for reasons of their own hold back the updates in namespaces " + namedList(p.HeldBack)
		}
		if len(ro.WaitingForBudget) > 0 {
			cond.Message += "; " + budgetSummary(ro.WaitingForBudget)
		}
		if stopping := stoppingSummary(c, ro); stopping != "" {
			cond.Message += "; " + stopping
		}
	case len(ro.WaitingForBudget) > 0:
		cond.Status, cond.Reason = metav1.ConditionTrue, "Progressing"
		cond.Message = progress + "; " + budgetSummary(ro.WaitingForBudget)
	case restarting(c, ro) > 0:
		// Nothing left to start, but the kubelet has yet to run the new sidecars, Ready, in
		// Pods the rollout patched (or created with the new revision): not complete yet.
		cond.Status, cond.Reason = metav1.ConditionTrue, "Progressing"
		cond.Message = progress + "; " + restartingSummary(c, ro)
	case len(ro.Blocked) > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, "PodsNotUpdatable"
		cond.Message = progress + "; " + blockedSummary(ro.Blocked)
	default:
		cond.Status, cond.Reason = metav1.ConditionFalse, "Complete"
		cond.Message = progress + "; nothing left to update, and the kubelet runs the new sidecars Ready in every updated pod"
	}
	return cond
}

// restarting counts the Pods whose sidecars restart for the rollout: those the counts show
// (taken now) or the rollout's last pass saw (which also knows of patches the cache does not
// show yet, and of evicted Pods not yet replaced).
func restarting(c Counts, ro *Rollout) int {
	n := int(c.Restarting)
	if ro != nil {
		n = max(n, ro.Plan.Restarting)
	}
	return n
}

// restartingSummary says that the rollout waits for the kubelet in restarting Pods, and why.
func restartingSummary(c Counts, ro *Rollout) string {
	msg := fmt.Sprintf("nothing left to start; %d restarting: waiting for the kubelet to run the new sidecars and report the pods Ready", restarting(c, ro))
	if stopping := stoppingSummary(c, ro); stopping != "" {
		msg += "; " + stopping
	}
	return msg
}

// stoppingSummary counts the restarting Pods whose kubelet still runs an old sidecar
// container, by namespace and grace period; empty when there are none.
func stoppingSummary(c Counts, ro *Rollout) string {
	var stopping []BlockedPod
	if ro != nil {
		stopping = ro.Stopping
	}
	n := max(int(c.Stopping), len(stopping))
	if n == 0 {
		return ""
	}
	msg := fmt.Sprintf("%d pods wait for an old sidecar container to stop", n)
	if len(stopping) > 0 {
		msg += fmt.Sprintf(" (%s; %s)", countByNamespace(stopping), countBy(stopping, func(b BlockedPod) string { return b.Why }))
	}
	return msg + ": the kubelet starts the new image once the old container exits, or kills it when the pod's terminationGracePeriodSeconds ends " +
		"(a sidecar that does not exit on SIGTERM costs the whole grace period per pod); kubectl sidecarset explain pod says how long each has waited"
}

// budgetSummary counts the Pods that wait for their PodDisruptionBudget by namespace.
func budgetSummary(waiting []BlockedPod) string {
	return fmt.Sprintf("%d pods to recreate wait for their PodDisruptionBudget to allow an eviction (%s)", len(waiting), countByNamespace(waiting))
}

// countByNamespace is "a: 2, b: 1" for the Pods' namespaces, naming at most maxNamed.
func countByNamespace(pods []BlockedPod) string {
	return countBy(pods, func(b BlockedPod) string { return b.Namespace })
}

// countBy is "a: 2, b: 1" for the Pods' keys, sorted, naming at most maxNamed.
func countBy(pods []BlockedPod, key func(BlockedPod) string) string {
	n := map[string]int{}
	for _, b := range pods {
		n[key(b)]++
	}
	var counts []string
	for _, k := range slices.Sorted(maps.Keys(n)) {
		counts = append(counts, fmt.Sprintf("%s: %d", k, n[k]))
	}
	return namedList(counts)
}

// blockedSummary counts the Pods that cannot be updated in place by namespace.
func blockedSummary(blocked []BlockedPod) string {
	never := 0
	for _, b := range blocked {
		if b.NeverInjected {
			never++
		}
	}
	msg := fmt.Sprintf("%d pods cannot be updated in place and keep their sidecars until recreated (%s", len(blocked), countByNamespace(blocked))
	if never > 0 {
		msg += fmt.Sprintf("; %d of them were never injected by this SidecarSet", never)
	}
	return msg + "); a PodNotUpdatable event on each pod, and kubectl sidecarset explain, say why"
}

// namedList joins the first maxNamed names and counts the rest.
func namedList(names []string) string {
	out := strings.Join(names[:min(len(names), maxNamed)], ", ")
	if len(names) > maxNamed {
		out += fmt.Sprintf(" and %d more", len(names)-maxNamed)
	}
	return out
}

// readyCondition summarises a compiled set's conditions (see appsv1alpha1.ConditionReady).
func readyCondition(set *inject.CompiledSet, conflicts []snapshot.Conflict, rolling *metav1.Condition) metav1.Condition {
	ready := metav1.Condition{Type: appsv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Injecting",
		Message: "The SidecarSet is valid and injects new matching pods"}
	if set.Set.Spec.InjectionStrategy.Paused {
		ready.Reason, ready.Message = "InjectionPaused", "The SidecarSet is valid; injection is paused by spec.injectionStrategy.paused"
	}
	for _, c := range conflicts {
		if c.Stopped {
			ready.Status, ready.Reason = metav1.ConditionFalse, "StoppedByConflict"
			ready.Message = fmt.Sprintf("The SidecarSet injects nothing while it conflicts with the older SidecarSet %q; see the Conflict condition", c.With)
			return ready
		}
	}
	if rolling != nil {
		switch rolling.Reason {
		case "Progressing", "Paused", "PodsNotUpdatable", HaltedReason:
			reason := rolling.Reason
			if reason != "PodsNotUpdatable" {
				reason = "RollingUpdate" + reason
			}
			ready.Status, ready.Reason = metav1.ConditionFalse, reason
			ready.Message = "Running pods are not all updated: " + rolling.Message
		}
	}
	return ready
}

// WithPolicy sets the set's PolicyCompiled condition (policy mode) into conditions and makes
// Ready say False while the set's MutatingAdmissionPolicy is not yet in force, or cannot be
// written: until then a pod created may get no sidecar, and Ready means that the next
// matching pod gets them, in both modes. A policy that routes the set's pods to the webhook
// (Unsupported) leaves Ready as it is: the webhook injects them.
// previous are the conditions the status held, whose Ready keeps its transition time while
// it stays False.
func WithPolicy(conditions *[]metav1.Condition, previous []metav1.Condition, policy metav1.Condition) {
	meta.SetStatusCondition(conditions, policy)
	ready := meta.FindStatusCondition(*conditions, appsv1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionTrue || policy.Status == metav1.ConditionTrue || policy.Reason == "Unsupported" {
		return
	}
	since := policy.LastTransitionTime
	if was := meta.FindStatusCondition(previous, appsv1alpha1.ConditionReady); was != nil && was.Status == metav1.ConditionFalse {
		since = was.LastTransitionTime
	}
	meta.RemoveStatusCondition(conditions, appsv1alpha1.ConditionReady)
	meta.SetStatusCondition(conditions, metav1.Condition{Type: appsv1alpha1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: "Policy" + policy.Reason, ObservedGeneration: ready.ObservedGeneration, LastTransitionTime: since,
		Message: "New matching pods may be created without the sidecars: " + policy.Message})
}
