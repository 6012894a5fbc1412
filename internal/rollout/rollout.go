// Package rollout decides which running Pods a SidecarSet updates in place next. It is pure:
// the controller describes the matched Pods and the update strategy, and gets back the Pods to
// patch now; it never reads or writes the API.
//
// The rules:
//   - partition: that many of the matched Pods keep the old revision; the rollout stops when
//     the rest are updated (new Pods, injected with the current content, count as updated);
//   - maxUnavailable: no update starts that would leave more Pods unavailable (not Ready, or
//     updated but not yet running the new images) than this; Pods that are already
//     unavailable are updated first and cost nothing;
//   - paused: no update starts; updates in flight finish on their own;
//   - only Pods the strategy's selector matches, and that can take the update in place, are
//     updated.
//
// The order is deterministic: unavailable Pods first, then by namespace/name.
package rollout

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// Pod is what the planner knows of one matched Pod.
type Pod struct {
	// Key is namespace/name.
	Key string
	// Updated is true when the Pod's record carries the revision being rolled out.
	Updated bool
	// Available is true when the Pod is Ready and, if Updated, runs the new images.
	Available bool
	// Eligible is true when the Pod may be updated: the strategy's selector matches it and it
	// can take the update in place. Ignored for updated Pods.
	Eligible bool
}

// Strategy is the resolved update strategy.
type Strategy struct {
	// Partition is how many matched Pods keep the old revision: a count or a percentage of the
	// matched Pods, rounded up. Zero when unset.
	Partition *intstr.IntOrString
	// MaxUnavailable is how many matched Pods may be unavailable at once: a count or a
	// percentage of the matched Pods, rounded down and at least 1. One when unset.
	MaxUnavailable *intstr.IntOrString
	// Paused stops new updates.
	Paused bool
}

// Plan is the planner's answer.
type Plan struct {
	// Update are the indices (into the Pods given) of the Pods to update now, in order.
	Update []int
	// Keep and MaxUnavailable are the strategy's values resolved against the matched Pods.
	Keep, MaxUnavailable int
	// Updated and Unavailable count the Pods as given.
	Updated, Unavailable int
	// Waiting counts the Pods the rollout still has to update (within the partition) that
	// cannot start now: paused, or no budget left.
	Waiting int
	// Ineligible counts the Pods still to update that the strategy's selector excludes or
	// that cannot be updated in place.
	Ineligible int
}

// Done reports whether the rollout has nothing left to start: every Pod it may update is.
func (p Plan) Done() bool { return len(p.Update) == 0 && p.Waiting == 0 }

// Compute plans the next step of the rollout over pods.
func Compute(pods []Pod, s Strategy) (Plan, error) {
	n := len(pods)
	keep, err := scaled(s.Partition, 0, n, true, "partition")
	if err != nil {
		return Plan{}, err
	}
	budget, err := scaled(s.MaxUnavailable, 1, n, false, "maxUnavailable")
	if err != nil {
		return Plan{}, err
	}
	p := Plan{Keep: min(keep, n), MaxUnavailable: max(budget, 1)}
	var todo []int
	for i, pod := range pods {
		if pod.Updated {
			p.Updated++
		}
		if !pod.Available {
			p.Unavailable++
		}
		switch {
		case pod.Updated:
		case !pod.Eligible:
			p.Ineligible++
		default:
			todo = append(todo, i)
		}
	}
	quota := n - p.Keep - p.Updated
	if quota <= 0 || len(todo) == 0 {
		return p, nil
	}
	slices.SortStableFunc(todo, func(a, b int) int {
		if pods[a].Available != pods[b].Available {
			if pods[a].Available {
				return 1
			}
			return -1
		}
		return strings.Compare(pods[a].Key, pods[b].Key)
	})
	unavailable := p.Unavailable
	for _, i := range todo[:min(quota, len(todo))] {
		switch {
		case s.Paused:
			p.Waiting++
		case !pods[i].Available:
			p.Update = append(p.Update, i) // already unavailable: costs nothing
		case unavailable < p.MaxUnavailable:
			p.Update = append(p.Update, i)
			unavailable++
		default:
			p.Waiting++
		}
	}
	return p, nil
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
