// Package rollout is a SidecarSet's rolling update, whole and pure: how each selected Pod
// stands (Classify: one availability per Pod), what a step is told of the Pods (Inputs), which
// Pods it updates in place or evicts next (Compute, the planner), the step itself (Step, with
// PlanInPlace and Recreate deciding per Pod through the injection engine), and what the rollout
// remembers (Memory: its evictions in flight are restored from the set's status.recreating, its
// halt from the RollingUpdate condition). It never reads or writes the API: the reconciler
// gathers the Pods, calls it, and patches or evicts what it picks. The status package counts
// its classification and writes the conditions; neither calls back into the other.
//
// The rules:
//   - partition: that many of the injected Pods keep the old revision; the rollout stops when
//     the rest are updated (new Pods, injected with the current content, count as updated).
//     Pods the set never injected can only take the sidecars by being recreated: they count
//     neither toward the partition nor toward what it keeps;
//   - maxUnavailable: one budget for the whole set, resolved against the matched Pods. Pods
//     whose sidecars of this set are restarting (the kubelet does not yet run the images the
//     Pod's spec names, or an updated Pod's sidecars are not ready) count against it
//     everywhere. Pods unavailable for reasons of their own (an app that is not ready, a Pod
//     being deleted, a Pod still starting) count against it only in their own namespace: a
//     tenant's broken Pod holds back that tenant's updates, not every tenant's;
//   - no update starts that would take the set's restarts plus the candidate's namespace's
//     other unavailable Pods beyond maxUnavailable; Pods that are already unavailable are
//     updated first and cost nothing (their availability cannot drop);
//   - paused: no update starts; updates in flight finish on their own;
//   - only Pods the strategy's selector matches, that can take the update in place, and that
//     are not still starting, are updated;
//   - a Pod that can take the update only by being recreated (evicted, its controller makes a
//     new one) is picked like the others, under the same budget, and its eviction counts
//     against the set-wide budget until its replacement is available. Pods the set never
//     injected are recreated (remediated) outside the partition, which counts injected Pods.
//     While a workload has a Pod being recreated, no other Pod of it is picked: one Pod per
//     workload at a time, as a StatefulSet's controller needs.
//
// The order is deterministic: unavailable Pods first, then by the strategy's priority (the
// Pods' labels), then by namespace/name, with the strategy's scatter terms spreading the Pods
// they name over each run of Pods of equal availability and priority (see Order).
package rollout

import (
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// Pod is what the planner knows of one Pod the set selects.
type Pod struct {
	// Key is namespace/name.
	Key string
	// Namespace is the Pod's namespace: unavailability that is not the rollout's is counted
	// per namespace.
	Namespace string
	// Injected is true when the Pod carries an injection of this set (at any revision).
	Injected bool
	// Updated is true when the Pod's record carries the revision being rolled out.
	Updated bool
	// Available is true when the Pod is Ready and the kubelet runs the images its spec names.
	Available bool
	// Restarting is true when the set's own sidecars in the Pod are changing: the kubelet does
	// not yet run the images the Pod's spec names, or the Pod is updated and they are not
	// ready. Such a Pod counts against the set-wide budget.
	Restarting bool
	// Terminating is true for a Pod being deleted: it is unavailable, and neither matched nor
	// updated.
	Terminating bool
	// Starting is true while the kubelet is still creating the Pod's containers: restarting a
	// sidecar then would only slow the start (a Pod injected with a pinned revision is
	// updated once it runs).
	Starting bool
	// Eligible is true when the Pod may be updated: the strategy's selector matches it and it
	// can take the update in place, or by being recreated (Recreate). Ignored for updated Pods.
	Eligible bool
	// Recreate is true when the Pod takes the update only by being evicted and recreated by
	// its controller (an outdated Pod whose change cannot be made in place, or a Pod the set
	// never injected).
	Recreate bool
	// Workload identifies the Pod's controller (its UID), for Pods to recreate.
	Workload string
	// WorkloadBusy is true when another Pod of the Pod's workload is being recreated: the Pod
	// waits its turn.
	WorkloadBusy bool
	// Labels are the Pod's labels, which the strategy's Order reads. Never modified.
	Labels map[string]string
	// Resize is true for an updated Pod whose sidecar's computed resources (resourcesPolicy)
	// must follow an app container resized in place: it counts as updated toward the
	// partition, and is resized first, within the budget, when Eligible.
	Resize bool
}

// Strategy is the resolved update strategy.
type Strategy struct {
	// Partition is how many injected Pods keep the old revision: a count or a percentage of
	// the injected Pods, rounded up. Zero when unset.
	Partition *intstr.IntOrString
	// MaxUnavailable is how many matched Pods may be unavailable at once: a count or a
	// percentage of the matched Pods, rounded down and at least 1. One when unset.
	MaxUnavailable *intstr.IntOrString
	// Paused stops new updates.
	Paused bool
	// InFlight counts restarts the rollout caused that no Pod shows: a Pod it evicted is gone
	// and its controller has not created the replacement yet. They count against the
	// set-wide budget.
	InFlight int
	// Order ranks the Pods to update by their labels (priority and scatter).
	Order Order
}

// Plan is the planner's answer.
type Plan struct {
	// Update are the indices (into the Pods given) of the Pods to update now, in order.
	Update []int
	// Order are the indices of the eligible Pods still to update, in the order the rollout
	// takes them: those within the partition, then those to remediate, then those the
	// partition keeps (the next ones a lower partition lets through).
	Order []int
	// Keep and MaxUnavailable are the strategy's values resolved against the Pods.
	Keep, MaxUnavailable int
	// Updated and Unavailable count the Pods as given (terminating Pods are unavailable);
	// Restarting counts those whose sidecars are restarting.
	Updated, Unavailable, Restarting int
	// Waiting counts the Pods the rollout still has to update (within the partition) that
	// cannot start now: paused, starting, or no budget left.
	Waiting int
	// HeldBack are the namespaces (sorted) where Pods unavailable for reasons of their own
	// keep Pods waiting that the set-wide budget alone would update.
	HeldBack []string
	// HeldBackPods counts the waiting Pods that only their namespace's own unavailability holds
	// back: a rollout whose every waiting Pod is such makes no progress of its own.
	HeldBackPods int
	// Ineligible counts the Pods still to update that the strategy's selector excludes or
	// that cannot be updated in place.
	Ineligible int
}

// Done reports whether the rollout has nothing left to start: every Pod it may update is.
func (p Plan) Done() bool { return len(p.Update) == 0 && p.Waiting == 0 }

// WaitReason is why a Pod the rollout still has to update does not start now.
type WaitReason string

// Wait reasons, from the first that applies.
const (
	// WaitPaused: the strategy is paused (or the rollout halted).
	WaitPaused WaitReason = "paused"
	// WaitStarting: the kubelet is still creating the Pod's containers.
	WaitStarting WaitReason = "starting"
	// WaitWorkloadBusy: another Pod of the Pod's workload is being recreated.
	WaitWorkloadBusy WaitReason = "workload busy"
	// WaitBudget: updating it would take the unavailable Pods beyond maxUnavailable.
	WaitBudget WaitReason = "budget"
	// WaitPartition: the partition keeps it at its revision.
	WaitPartition WaitReason = "partition"
)

// Wait is one Pod the rollout still has to update that does not start now, and why.
type Wait struct {
	// Pod is the Pod's index into the Pods given.
	Pod    int
	Reason WaitReason
	// HeldBack is true when only its namespace's Pods unavailable for reasons of their own
	// keep it waiting (Reason is WaitBudget).
	HeldBack bool
}

// Compute plans the next step of the rollout over pods.
func Compute(pods []Pod, s Strategy) (Plan, error) {
	p, _, err := ComputeWaits(pods, s)
	return p, err
}

// ComputeWaits is Compute, and says why each eligible Pod still to update that it does not
// pick waits: those Plan.Waiting counts, then those the partition keeps, in the order the
// planner looked at them.
func ComputeWaits(pods []Pod, s Strategy) (Plan, []Wait, error) {
	matched, injected := 0, 0
	for _, pod := range pods {
		if pod.Terminating {
			continue
		}
		matched++
		if pod.Injected || pod.Updated {
			injected++
		}
	}
	keep, err := scaled(s.Partition, 0, injected, true, "partition")
	if err != nil {
		return Plan{}, nil, err
	}
	budget, err := scaled(s.MaxUnavailable, 1, matched, false, "maxUnavailable")
	if err != nil {
		return Plan{}, nil, err
	}
	p := Plan{Keep: min(keep, injected), MaxUnavailable: max(budget, 1), Restarting: s.InFlight, Unavailable: s.InFlight}
	// others: namespace -> Pods unavailable for reasons of their own.
	others := map[string]int{}
	// todo: injected outdated Pods (within the partition); remedy: Pods never injected;
	// resize: updated Pods whose sidecars follow an app resize.
	var todo, remedy, resize []int
	for i, pod := range pods {
		if pod.Updated && !pod.Terminating {
			p.Updated++
		}
		switch {
		case pod.Restarting:
			// The rollout's own doing, a Pod it evicted included (being deleted, it is no
			// longer matched).
			p.Restarting++
			p.Unavailable++
		case !pod.Available || pod.Terminating:
			others[pod.Namespace]++
			p.Unavailable++
		}
		switch {
		case pod.Terminating:
		case pod.Updated:
			if pod.Resize && pod.Eligible {
				resize = append(resize, i)
			}
		case !pod.Injected && !pod.Recreate:
		case !pod.Eligible:
			p.Ineligible++
		case !pod.Injected:
			remedy = append(remedy, i)
		default:
			todo = append(todo, i)
		}
	}
	order := s.Order.sorter(pods)
	order.sort(todo)
	order.sort(remedy)
	order.sort(resize)
	quota := max(0, injected-p.Keep-p.Updated)
	p.Order = slices.Concat(resize, todo[:min(quota, len(todo))], remedy, todo[min(quota, len(todo)):])
	restarting, held, recreating := p.Restarting, map[string]bool{}, map[string]bool{}
	var waits, kept []Wait
	for _, i := range todo[min(quota, len(todo)):] {
		kept = append(kept, Wait{Pod: i, Reason: WaitPartition})
	}
	for _, i := range slices.Concat(resize, todo[:min(quota, len(todo))], remedy) {
		pod := pods[i]
		busy := pod.WorkloadBusy || (pod.Recreate && recreating[pod.Workload])
		if pod.Recreate && !busy && !s.Paused && !pod.Starting {
			recreating[pod.Workload] = true // picked below unless the budget says no
		}
		switch {
		case s.Paused, pod.Starting, busy:
			p.Waiting++ // a starting Pod is updated once it runs; a busy workload's Pod waits its turn
			waits = append(waits, Wait{Pod: i, Reason: waitReason(s.Paused, pod.Starting)})
		case !pod.Available:
			// Already unavailable: updating it costs nothing. It restarts from now on.
			p.Update = append(p.Update, i)
			if !pod.Restarting {
				restarting++
				others[pod.Namespace]--
			}
		case restarting+others[pod.Namespace] < p.MaxUnavailable:
			p.Update = append(p.Update, i)
			restarting++
		default:
			p.Waiting++
			w := Wait{Pod: i, Reason: WaitBudget}
			if restarting < p.MaxUnavailable {
				held[pod.Namespace] = true
				p.HeldBackPods++
				w.HeldBack = true
			}
			waits = append(waits, w)
		}
	}
	p.HeldBack = slices.Sorted(maps.Keys(held))
	return p, append(waits, kept...), nil
}

// waitReason is why a Pod that Compute does not pick for its own sake waits: the first of
// paused, starting, its workload busy.
func waitReason(paused, starting bool) WaitReason {
	switch {
	case paused:
		return WaitPaused
	case starting:
		return WaitStarting
	}
	return WaitWorkloadBusy
}

// scaled resolves v against n; def when v is nil.
func scaled(v *intstr.IntOrString, def, n int, roundUp bool, field string) (int, error) {
	if v == nil {
		return def, nil
	}
	out, err := intstr.GetScaledValueFromIntOrPercent(v, n, roundUp)
	if err != nil {
		return 0, fmt.Errorf("updateStrategy.%s: %w", field, err)
	}
	if out < 0 {
		return 0, fmt.Errorf("updateStrategy.%s: %s is negative", field, v.String())
	}
	return out, nil
}
