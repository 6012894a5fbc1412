package status

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
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
	// Restarting counts the Pods whose unavailability is the rollout's (rollout.PodState.Restarting):
	// a rolling update is not complete while there are any. Stopping counts those of them
	// whose kubelet still runs an old sidecar container (rollout.PodState.Stopping). ReadyRestarting
	// counts the Pods in Ready whose kubelet does not yet run the images their spec names:
	// PodsReady does not count them. None of the three is a status field.
	Restarting, Stopping, ReadyRestarting int32
	// Footprint sums what the set's sidecars request and limit in the Pods it injected, being
	// deleted or excluded ones left out (status.sidecarResources).
	Footprint rollout.Footprint
}

// Scope is the engine's gate scope (inject.Scope): the namespaces never injected by name.
// Classify counts a selected Pod that the gate keeps from injection as excluded.
type Scope = inject.Scope

// Count classifies the Pods against one SidecarSet. namespaceLabels returns the labels of a
// namespace by name.
func Count(set *inject.CompiledSet, pods []*corev1.Pod, namespaceLabels func(string) map[string]string, scope Scope) Counts {
	var c Counts
	for _, pod := range pods {
		s, selected := rollout.Classify(set, pod, namespaceLabels, scope)
		if selected {
			c.Add(s)
		}
	}
	return c
}

// Add counts one selected Pod (see Classify).
func (c *Counts) Add(s rollout.PodState) { c.add(s, 1) }

// Remove takes back what Add counted for the same state.
func (c *Counts) Remove(s rollout.PodState) { c.add(s, -1) }

func (c *Counts) add(s rollout.PodState, d int32) {
	if s.Terminating {
		return
	}
	if s.Excluded {
		c.Excluded += d
		return
	}
	c.Matched += d
	c.Footprint.Add(s.Footprint, int64(d))
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

// Compute returns the status a SidecarSet should have: the counts, its hash, the generation
// they describe, and the conditions (old conditions keep their transition time when their
// status does not change; new transitions get now). conflicts are the set's clashes with
// other SidecarSets (snapshot.Snapshot.Conflicts). Equal inputs give equal statuses, so a
// reconcile that finds nothing new writes nothing.
func Compute(set *inject.CompiledSet, counts Counts, conflicts []snapshot.Conflict, ro *rollout.State, old []metav1.Condition, now metav1.Time) appsv1alpha1.SidecarSetStatus {
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
		SidecarResources:   SidecarResources(counts.Matched-counts.NotInjected, counts.Footprint),
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
	var rolling *metav1.Condition
	if set.Set.Spec.UpdateStrategy.Type == appsv1alpha1.RollingUpdate {
		c := rollingCondition(set, counts, ro)
		conds, rolling = append(conds, c), &c
	} else {
		meta.RemoveStatusCondition(&st.Conditions, appsv1alpha1.ConditionRollingUpdate)
	}
	for _, c := range conds {
		c.ObservedGeneration = gen
		c.LastTransitionTime = now
		meta.SetStatusCondition(&st.Conditions, c)
	}
	r, msg := readyAnswer(set, conflicts, rolling)
	setReady(&st.Conditions, old, r, msg, gen, now)
	return st
}

// SidecarResources is the status form of what a set's sidecars request and limit in pods Pods;
// nil for none. Quantities are in their canonical form (cpu in cores or millicores, memory and
// ephemeral storage in binary units where they divide evenly), so equal footprints give equal
// statuses.
func SidecarResources(pods int32, f rollout.Footprint) *appsv1alpha1.SidecarResources {
	if pods <= 0 {
		return nil
	}
	return &appsv1alpha1.SidecarResources{Pods: pods, Requests: ResourceList(f.Requests), Limits: ResourceList(f.Limits)}
}

// ResourceList is a's non-zero amounts as a ResourceList; nil when all are zero.
func ResourceList(a rollout.Amounts) corev1.ResourceList {
	var l corev1.ResourceList
	for _, r := range [...]struct {
		name corev1.ResourceName
		q    *resource.Quantity
	}{{corev1.ResourceCPU, resource.NewMilliQuantity(a.CPU, resource.DecimalSI)},
		{corev1.ResourceMemory, resource.NewQuantity(a.Memory, resource.BinarySI)},
		{corev1.ResourceEphemeralStorage, resource.NewQuantity(a.EphemeralStorage, resource.BinarySI)}} {
		if r.q.IsZero() {
			continue
		}
		if l == nil {
			l = corev1.ResourceList{}
		}
		l[r.name] = *r.q
	}
	return l
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
		switch set.Status.Conditions[i].Type {
		case appsv1alpha1.ConditionInvalid, appsv1alpha1.ConditionReady, appsv1alpha1.ConditionReconciling, appsv1alpha1.ConditionStalled:
			st.Conditions = append(st.Conditions, *set.Status.Conditions[i].DeepCopy())
		}
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: appsv1alpha1.ConditionInvalid, Status: metav1.ConditionTrue, Reason: "InvalidSpec",
		Message: reason + "; it injects nothing until the spec is fixed", ObservedGeneration: set.Generation,
		LastTransitionTime: now,
	})
	setReady(&st.Conditions, set.Status.Conditions, readyInvalid,
		"The SidecarSet is invalid and injects nothing; see the Invalid condition", set.Generation, now)
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

// HaltSummary says why a rollout halts: the Pods not available by the deadline, counted by
// namespace and by why (the Pods' names go to events on them).
func HaltSummary(stalled []rollout.BlockedPod, deadlineSeconds int32) string {
	return fmt.Sprintf("%d recreated pods were not available %ds after the eviction (%s; %s); the rollout starts no update or eviction "+
		"until the spec changes (fix it, or set updateStrategy.paused and unset it)", len(stalled), deadlineSeconds,
		countBy(stalled, func(b rollout.BlockedPod) string { return b.Namespace }), countBy(stalled, func(b rollout.BlockedPod) string { return b.Why }))
}

// maxNamed is how many namespaces a condition message names.
const maxNamed = 5

// rollingCondition is the RollingUpdate condition of a set whose updateStrategy is
// RollingUpdate; ro is where the rollout of this very spec stands, nil until it is planned.
func rollingCondition(set *inject.CompiledSet, c Counts, ro *rollout.State) metav1.Condition {
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
		cond.Status, cond.Reason = metav1.ConditionFalse, rollout.HaltedReason
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
func restarting(c Counts, ro *rollout.State) int {
	n := int(c.Restarting)
	if ro != nil {
		n = max(n, ro.Plan.Restarting)
	}
	return n
}

// restartingSummary says that the rollout waits for the kubelet in restarting Pods, and why.
func restartingSummary(c Counts, ro *rollout.State) string {
	msg := fmt.Sprintf("nothing left to start; %d restarting: waiting for the kubelet to run the new sidecars and report the pods Ready", restarting(c, ro))
	if stopping := stoppingSummary(c, ro); stopping != "" {
		msg += "; " + stopping
	}
	return msg
}

// stoppingSummary counts the restarting Pods whose kubelet still runs an old sidecar
// container, by namespace and grace period; empty when there are none.
func stoppingSummary(c Counts, ro *rollout.State) string {
	var stopping []rollout.BlockedPod
	if ro != nil {
		stopping = ro.Stopping
	}
	n := max(int(c.Stopping), len(stopping))
	if n == 0 {
		return ""
	}
	msg := fmt.Sprintf("%d pods wait for an old sidecar container to stop", n)
	if len(stopping) > 0 {
		msg += fmt.Sprintf(" (%s; %s)", countByNamespace(stopping), countBy(stopping, func(b rollout.BlockedPod) string { return b.Why }))
	}
	return msg + ": the kubelet starts the new image once the old container exits, or kills it when the pod's terminationGracePeriodSeconds ends " +
		"(a sidecar that does not exit on SIGTERM costs the whole grace period per pod); kubectl sidecarset explain pod says how long each has waited"
}

// budgetSummary counts the Pods that wait for their PodDisruptionBudget by namespace.
func budgetSummary(waiting []rollout.BlockedPod) string {
	return fmt.Sprintf("%d pods to recreate wait for their PodDisruptionBudget to allow an eviction (%s)", len(waiting), countByNamespace(waiting))
}

// countByNamespace is "a: 2, b: 1" for the Pods' namespaces, naming at most maxNamed.
func countByNamespace(pods []rollout.BlockedPod) string {
	return countBy(pods, func(b rollout.BlockedPod) string { return b.Namespace })
}

// countBy is "a: 2, b: 1" for the Pods' keys, sorted, naming at most maxNamed.
func countBy(pods []rollout.BlockedPod, key func(rollout.BlockedPod) string) string {
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
func blockedSummary(blocked []rollout.BlockedPod) string {
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

// readyAnswer is Ready's answer for a compiled set, and its message (see
// appsv1alpha1.ConditionReady); rolling is its RollingUpdate condition, nil for other strategies.
func readyAnswer(set *inject.CompiledSet, conflicts []snapshot.Conflict, rolling *metav1.Condition) (readiness, string) {
	for _, c := range conflicts {
		if c.Stopped {
			return readyStoppedByConflict, fmt.Sprintf("The SidecarSet injects nothing while it conflicts with the older SidecarSet %q; see the Conflict condition", c.With)
		}
	}
	if rolling != nil {
		if r, ok := readyByRollingReason[rolling.Reason]; ok {
			return r, "Running pods are not all updated: " + rolling.Message
		}
	}
	if set.Set.Spec.InjectionStrategy.Paused {
		return readyInjectionPaused, "The SidecarSet is valid; injection is paused by spec.injectionStrategy.paused"
	}
	return readyInjecting, "The SidecarSet is valid and injects new matching pods"
}

// WithPolicy sets the set's PolicyCompiled condition (policy mode) into conditions and makes
// Ready say False while the set's MutatingAdmissionPolicy is not yet in force, or cannot be
// written: until then a pod created may get no sidecar, and Ready means that the next
// matching pod gets them, in both modes. A policy that routes the set's pods to the webhook
// (Unsupported) leaves Ready as it is: the webhook injects them.
// previous are the conditions the status held, whose Ready (and Reconciling and Stalled, set
// with it) keeps its transition time while its status stays.
func WithPolicy(conditions *[]metav1.Condition, previous []metav1.Condition, policy metav1.Condition) {
	meta.SetStatusCondition(conditions, policy)
	ready := meta.FindStatusCondition(*conditions, appsv1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionTrue || policy.Status == metav1.ConditionTrue || policy.Reason == "Unsupported" {
		return
	}
	// NameTaken waits for a person; any other reason for the policy to be in force.
	r := readyPolicyPending
	if policy.Reason == "NameTaken" {
		r = readyPolicyNameTaken
	}
	setReady(conditions, previous, r, "New matching pods may be created without the sidecars: "+policy.Message,
		ready.ObservedGeneration, policy.LastTransitionTime)
}

// InProgress reports whether the rollout is in progress, for the operator's upgrade gate: it
// has Pods to update or evict, now or once the budget allows (not counting Pods that only their
// own namespace's unavailable Pods hold back: they may wait forever), or Pods restarting (the
// kubelet does not yet run the new sidecars, Ready). c are the counts taken with the plan. Any
// Pod restarting keeps the RollingUpdate condition from Complete as well.
func InProgress(ro *rollout.State, c Counts) bool {
	p := ro.Plan
	return len(p.Update) > 0 || restarting(c, ro) > 0 || p.Waiting > p.HeldBackPods || len(ro.WaitingForBudget) > 0
}

// Progress says where the rollout stands in a few words: "3 of 4 matched pods updated, 1
// restarting (1 of them waiting for an old sidecar container to stop)".
func Progress(ro *rollout.State, c Counts) string {
	msg := fmt.Sprintf("%d of %d matched pods updated", c.Updated, c.Matched)
	if n := restarting(c, ro); n > 0 {
		msg += fmt.Sprintf(", %d restarting", n)
	}
	if n := max(int(c.Stopping), len(ro.Stopping)); n > 0 {
		msg += fmt.Sprintf(" (%d of them waiting for an old sidecar container to stop)", n)
	}
	return msg
}

// Tally counts the selected Pods a rollout classified (rollout.Input.States).
func Tally(states []rollout.PodState) Counts {
	var c Counts
	for _, s := range states {
		c.Add(s)
	}
	return c
}
