package rollout

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// Eligible is the rollout's eligible function for Inputs: a Pod may be picked when the
// set injects (it is valid and no conflict stops it) and the strategy's canary selector
// matches the Pod.
func Eligible(set *inject.CompiledSet, injecting bool) (func(*corev1.Pod) bool, error) {
	canary := labels.Everything()
	if sel := set.Set.Spec.UpdateStrategy.Selector; sel != nil {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			return nil, fmt.Errorf("spec.updateStrategy.selector: %w", err)
		}
		canary = s
	}
	return func(pod *corev1.Pod) bool { return injecting && canary.Matches(labels.Set(pod.Labels)) }, nil
}

// HaltedBefore is why the rollout of this generation of the set halted, as its RollingUpdate
// condition says (written from an earlier pass, maybe by another replica); empty when it did
// not. A change of the spec (a new generation) resumes it.
func HaltedBefore(set *appsv1alpha1.SidecarSet) string {
	c := meta.FindStatusCondition(set.Status.Conditions, appsv1alpha1.ConditionRollingUpdate)
	if c == nil || c.Reason != HaltedReason || c.ObservedGeneration != set.Generation {
		return ""
	}
	if _, why, found := strings.Cut(c.Message, "; "); found {
		return why
	}
	return c.Message
}

// Recreation is how a rollout goes on with an outdated Pod it cannot update in place.
type Recreation struct {
	// Workload is the UID of the Pod's controller when the rollout evicts the Pod for the
	// controller to recreate it; empty when the rollout leaves the Pod.
	Workload string
	// Left is why the rollout leaves the Pod: why it cannot be updated in place and, when
	// only its controller keeps the rollout from recreating it, why. Empty when it evicts it.
	Left string
}

// Recreate decides what the rollout does with an outdated Pod it cannot update in place: one
// the set never injected (injected false; why is NotInjected), or one that cannot take the
// set's hash in place (why; recreatable when a Pod created now would have it). It evicts the
// Pod when the strategy says so (remediate: Evict for the first, recreate: Evict for a
// recreatable second) and the Pod's controller recreates an evicted Pod; else it leaves it.
func Recreate(strategy appsv1alpha1.UpdateStrategy, pod *corev1.Pod, injected bool, why string, recreatable bool) Recreation {
	evict := (!injected && strategy.Remediate == appsv1alpha1.RecreateEvict) ||
		(injected && recreatable && strategy.Recreate == appsv1alpha1.RecreateEvict)
	controller, noController := RecreatingController(pod)
	if evict && controller != nil {
		return Recreation{Workload: string(controller.UID)}
	}
	return Recreation{Left: withoutController(why, evict, noController)}
}

// Attempt is what became of one Pod a rollout step picked (see Step).
type Attempt struct {
	// Hash is the hash the Pod now carries in place (it was patched to it, or found with it);
	// empty when nothing happened (the Pod is gone).
	Hash string
	// EvictedAt is when a Pod to recreate was evicted; zero when it was not.
	EvictedAt time.Time
	// Stale is true when the Pod changed while it was being updated: it is tried again on
	// the next pass.
	Stale bool
	// WaitsForBudget is why an eviction must wait (its PodDisruptionBudget allows none now):
	// it is tried again on the next pass.
	WaitsForBudget string
	// Why the Pod cannot be updated: in place (Recreatable when a Pod created now would have
	// the set's hash), or by eviction.
	Why         string
	Recreatable bool
}

// StepResult is what a rollout step did besides what it wrote into its Rollout.
type StepResult struct {
	// Stale is true when a picked Pod changed while it was being updated: take the step
	// again soon.
	Stale bool
	// Report are the Pods whose eviction was refused in this step, and why: they should hear
	// it (an event).
	Report []BlockedPod
	// Waits says why each Pod of the last plan still to update waits (into in.Plan).
	Waits []Wait
	// Order are the Pods the step had to update (into in.Plan), in the order it took them
	// (Plan.Order of its first plan).
	Order []int
}

// OrderOf is the order of a set's rollout, from its update strategy's priority and scatter
// strategies.
func OrderOf(strategy appsv1alpha1.UpdateStrategy) (Order, error) {
	var o Order
	if ps := strategy.PriorityStrategy; ps != nil {
		for i, w := range ps.WeightPriority {
			sel, err := metav1.LabelSelectorAsSelector(&w.MatchSelector)
			if err != nil {
				return o, fmt.Errorf("spec.updateStrategy.priorityStrategy.weightPriority[%d].matchSelector: %w", i, err)
			}
			o.Weights = append(o.Weights, WeightTerm{Weight: int64(w.Weight), Selector: sel})
		}
		for _, k := range ps.OrderPriority {
			o.Keys = append(o.Keys, k.OrderedKey)
		}
	}
	for _, t := range strategy.ScatterStrategy {
		o.Scatter = append(o.Scatter, ScatterTerm{Key: t.Key, Value: t.Value})
	}
	return o, nil
}

// Step takes the next step of a set's rollout over in (from Inputs, with memory): it
// plans, tries each Pod the plan picks with try (an in-place update, or an eviction for a Pod
// to recreate), and plans again while picked Pods turn out not updatable: the budget they
// would have used is free, and the plan must not report updates that did not happen. A Pod
// that cannot be updated in place is picked again for eviction when Recreate says so.
//
// It fills ro.Plan (its Update: the Pods started across the plans), ro.Blocked and
// ro.WaitingForBudget, and updates memory with what it learnt. ro.Halted pauses it.
// An error of try ends the step with the Pods started so far.
func Step(set *inject.CompiledSet, in Input, ro *State, memory Memory,
	try func(pod *corev1.Pod, recreate bool) (Attempt, error)) (StepResult, error) {
	strategy := set.Set.Spec.UpdateStrategy
	var res StepResult
	order, err := OrderOf(strategy)
	if err != nil {
		return res, err
	}
	s := Strategy{Partition: strategy.Partition, MaxUnavailable: strategy.MaxUnavailable,
		Paused: strategy.Paused || ro.Halted != "", InFlight: in.InFlight, Order: order}
	var started []int
	plan := in.Plan
	for {
		p, waits, err := ComputeWaits(plan, s)
		if err != nil {
			return res, err
		}
		if res.Order == nil {
			res.Order = p.Order
		}
		ro.Plan, res.Waits = p, waits
		replan := false
		for _, i := range p.Update {
			target := in.Targets[i]
			blocked := func(why string) BlockedPod {
				return BlockedPod{Namespace: target.Namespace, Name: target.Name, Why: why}
			}
			a, err := try(target, plan[i].Recreate)
			switch {
			case err != nil:
				ro.Plan.Update = started
				return res, err
			case a.Stale:
				res.Stale = true
				plan[i].Eligible = false // tried again on the next pass
			case plan[i].Recreate && a.WaitsForBudget != "":
				ro.WaitingForBudget = append(ro.WaitingForBudget, blocked(a.WaitsForBudget))
				plan[i].Eligible, replan = false, true
			case plan[i].Recreate && a.Why != "":
				why := "not recreated: " + a.Why
				memory.NotUpdatable[plan[i].Key] = Verdict{Hash: set.Hash, ResourceVersion: target.ResourceVersion, Why: why}
				ro.Blocked = append(ro.Blocked, blocked(why))
				res.Report = append(res.Report, blocked(why))
				plan[i].Eligible, replan = false, true
			case plan[i].Recreate && !a.EvictedAt.IsZero():
				memory.Recreating[plan[i].Workload] = a.EvictedAt
				plan[i].Available, plan[i].Restarting = false, true
				plan[i].Terminating = true // being deleted: no longer matched
				for j := range plan {
					plan[j].WorkloadBusy = plan[j].WorkloadBusy || (j != i && plan[j].Workload == plan[i].Workload)
				}
				started = append(started, i)
			case plan[i].Recreate:
			case a.Why != "":
				memory.NotUpdatable[plan[i].Key] = Verdict{Hash: set.Hash, ResourceVersion: target.ResourceVersion, Why: a.Why, Recreatable: a.Recreatable}
				if r := Recreate(strategy, target, true, a.Why, a.Recreatable); r.Workload != "" {
					// Only recreating the Pod applies the change: it is picked again, for eviction.
					plan[i].Recreate, plan[i].Workload = true, r.Workload
					_, plan[i].WorkloadBusy = memory.Recreating[plan[i].Workload]
				} else {
					ro.Blocked = append(ro.Blocked, blocked(r.Left))
					plan[i].Eligible = false
				}
				replan = true
			case a.Hash != "":
				memory.Patched[plan[i].Key] = a.Hash
				plan[i].Updated, plan[i].Available, plan[i].Restarting, plan[i].Resize = true, false, true, false
				started = append(started, i)
			}
		}
		if !replan {
			break
		}
	}
	ro.Plan.Update = started // what this pass started, across the plans
	return res, nil
}

// State is where a RollingUpdate stands: the planner's last step, and the outdated Pods that
// cannot take the change in place.
type State struct {
	Plan    Plan
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

// BlockedPod is an outdated Pod that cannot take the change in place, and why. The set's
// status, which anyone who may read SidecarSets sees, counts such Pods by namespace and never
// names them: the why goes to an event on the Pod itself.
type BlockedPod struct {
	Namespace, Name, Why string
	// NeverInjected is true for a Pod the set selects but never injected.
	NeverInjected bool
}
