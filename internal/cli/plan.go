package cli

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/explain"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/rollout"
	"github.com/sidecarset/sidecarset-operator/internal/snapshot"
)

// Action is what the rollout does to a Pod. The values are stable: scripts may read them.
type Action string

// Actions.
const (
	// ActionCurrent: the Pod runs the set's current sidecars.
	ActionCurrent Action = "current"
	// ActionRestarting: the Pod carries the set's current sidecars, and its kubelet does not
	// run them yet (the old container is stopping, or the new one starting); it counts
	// against maxUnavailable until it runs them, Ready.
	ActionRestarting Action = "restarting"
	// ActionInPlace: the rollout patches the Pod's sidecars in place.
	ActionInPlace Action = "update in place"
	// ActionEvict: the rollout evicts the Pod and its controller recreates it (recreate: Evict).
	ActionEvict Action = "evict"
	// ActionRemediate: the rollout evicts a Pod the set never injected (remediate: Evict).
	ActionRemediate Action = "remediate"
	// ActionLeave: the rollout leaves the Pod as it is.
	ActionLeave Action = "leave"
	// ActionOutdated: a set that does not roll: the Pod keeps older sidecars, or none.
	ActionOutdated Action = "outdated"
)

// RolloutPlan is what the next step of a SidecarSet's rollout does to each Pod it selects.
type RolloutPlan struct {
	SidecarSet string       `json:"sidecarSet"`
	Hash       string       `json:"hash"`
	Strategy   PlanStrategy `json:"strategy"`
	// Note says what holds the whole rollout, when something does.
	Note    string       `json:"note,omitempty"`
	Pods    []PlannedPod `json:"pods"`
	Summary PlanSummary  `json:"summary"`
}

// PlanStrategy is the set's update strategy, with maxUnavailable and partition resolved
// against the Pods.
type PlanStrategy struct {
	Type string `json:"type"`
	// MaxUnavailable is how many matched Pods may be unavailable at once.
	MaxUnavailable int `json:"maxUnavailable"`
	// Partition is how many injected Pods keep their revision.
	Partition int  `json:"partition"`
	Paused    bool `json:"paused"`
	// Halted is why the rollout of this generation halted (recreated Pods did not come back).
	Halted    string `json:"halted,omitempty"`
	Recreate  string `json:"recreate,omitempty"`
	Remediate string `json:"remediate,omitempty"`
	// Selector is the canary selector, when there is one.
	Selector string `json:"selector,omitempty"`
	// Priority and Scatter are the order's priority and scatter strategies, when set.
	Priority string `json:"priority,omitempty"`
	Scatter  string `json:"scatter,omitempty"`

	maxUnavailable, partition *intstr.IntOrString
}

// PlannedPod is what the next step does to one Pod, and why.
type PlannedPod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Action    Action `json:"action"`
	// Order is the Pod's place (from 1) in the order the rollout takes the Pods it updates now
	// or later; 0 for the others.
	Order int `json:"order,omitempty"`
	// Next is "now" when the next step starts the action, "waits" when the Pod waits for a
	// later one (WaitsFor says why), empty when the rollout has nothing to do with it.
	Next     string `json:"next,omitempty"`
	WaitsFor string `json:"waitsFor,omitempty"`
	Why      string `json:"why"`
}

// PlanSummary counts what the next step does.
type PlanSummary struct {
	UpdatedInPlace int `json:"updatedInPlace"`
	// Restarting counts the Pods whose kubelet does not yet run the sidecars they carry.
	Restarting int `json:"restarting,omitempty"`
	// Evicted counts evictions, remediations included.
	Evicted int `json:"evicted"`
	Waiting int `json:"waiting"`
	Left    int `json:"leftAlone"`
	// InPlaceLeft counts the Pods still to update in place (now or in a later step), and
	// SlowestSeconds bounds how long their updates take when the sidecars do not exit on
	// SIGTERM: the kubelet then waits each Pod's terminationGracePeriodSeconds before it starts
	// the new image, maxUnavailable Pods at a time (see slowestSeconds).
	InPlaceLeft    int   `json:"inPlaceLeft,omitempty"`
	SlowestSeconds int64 `json:"slowestSeconds,omitempty"`
}

// slowestSeconds bounds how long in-place updates of Pods with these grace periods take when
// their sidecars do not exit on SIGTERM: the rollout starts at most maxUnavailable of them at
// a time and each waits for its whole grace period, so the longest grace periods taken
// maxUnavailable at a time add up to the bound.
func slowestSeconds(graces []int64, maxUnavailable int) int64 {
	slices.SortFunc(graces, func(a, b int64) int { return cmp.Compare(b, a) })
	var total int64
	for i := 0; i < len(graces); i += max(maxUnavailable, 1) {
		total += graces[i]
	}
	return total
}

// gracePeriod is the Pod's terminationGracePeriodSeconds, 30 when unset (the API server's default).
func gracePeriod(pod *corev1.Pod) int64 {
	return ptr.Deref(pod.Spec.TerminationGracePeriodSeconds, corev1.DefaultTerminationGracePeriodSeconds)
}

// planInput is what a rollout plan is computed from: what the operator's rollout reads.
type planInput struct {
	set    *appsv1alpha1.SidecarSet
	engine *Engine
	// pods are the opted-in Pods (the set's selector is applied here).
	pods            []*corev1.Pod
	namespaceLabels func(string) map[string]string
	env             rollout.InPlaceEnv
	now             time.Time
}

// planRollout works out the next step of the set's rollout as the operator's rollout takes
// it: the same classification (rollout.Inputs, with a fresh memory as after a restart),
// the same in-place decision (rollout.PlanInPlace) and the same step (rollout.Step), whose
// updates and evictions are only predicted. PodDisruptionBudgets are not read: an eviction
// they hold waits for a later step.
func planRollout(in planInput) (*RolloutPlan, error) {
	c, err := inject.Compile(in.set)
	if err != nil {
		return nil, fmt.Errorf("SidecarSet %q is invalid, so its rollout updates nothing until it is fixed: %w", in.set.Name, err)
	}
	snap := in.engine.store.Load()
	pods := slices.Clone(in.pods)
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(rollout.PodKey(a), rollout.PodKey(b)) })
	injecting := slices.ContainsFunc(snap.Sets, func(s *inject.CompiledSet) bool { return s.Name() == c.Name() })
	eligible, err := rollout.Eligible(c, injecting)
	if err != nil {
		return nil, fmt.Errorf("SidecarSet %q: %w", c.Name(), err)
	}
	inputs := rollout.Inputs(c, pods, in.namespaceLabels, in.engine.injector.Scope, eligible, rollout.NewMemory(), in.now)
	plan := &RolloutPlan{SidecarSet: c.Name(), Hash: c.Hash, Strategy: strategyOf(in.set)}
	if c.Set.Spec.UpdateStrategy.Type != appsv1alpha1.RollingUpdate {
		plan.Note = fmt.Sprintf("spec.updateStrategy.type is %s: running pods are never updated; new pods get the current sidecars", plan.Strategy.Type)
		for i, p := range inputs.Plan {
			plan.add(notRolled(c, inputs.Targets[i], p, in.now))
		}
		return plan, nil
	}
	if !injecting {
		plan.Note = stoppedNote(snap.Conflicts[c.Name()])
	}
	return plan, plan.step(in, c, inputs, injecting)
}

// step runs the rollout's step over the classified Pods and says what it does to each.
func (plan *RolloutPlan) step(in planInput, c *inject.CompiledSet, inputs rollout.Input, injecting bool) error {
	before := slices.Clone(inputs.Plan) // Step updates the planner's view as it goes
	verdicts := make([]inPlaceVerdict, len(inputs.Targets))
	byPod := map[*corev1.Pod]int{}
	for i, pod := range inputs.Targets {
		byPod[pod] = i
		if p := before[i]; p.Injected && !p.Updated && !p.Terminating {
			v, err := in.inPlace(c, pod)
			if err != nil {
				return err
			}
			verdicts[i] = v
		}
	}
	ro := rollout.State{Blocked: inputs.Blocked, Halted: rollout.HaltedBefore(in.set)}
	res, err := rollout.Step(c, inputs, &ro, rollout.NewMemory(), func(pod *corev1.Pod, recreate bool) (rollout.Attempt, error) {
		if recreate {
			return rollout.Attempt{EvictedAt: in.now}, nil
		}
		if v := verdicts[byPod[pod]]; v.refusal.Why != "" {
			return rollout.Attempt{Why: v.refusal.Why, Recreatable: v.refusal.Recreatable}, nil
		}
		return rollout.Attempt{Hash: c.Hash}, nil
	})
	if err != nil {
		return fmt.Errorf("SidecarSet %q: %w", c.Name(), err)
	}
	plan.Strategy.MaxUnavailable, plan.Strategy.Partition, plan.Strategy.Halted = ro.Plan.MaxUnavailable, ro.Plan.Keep, ro.Halted
	next := map[int]string{}
	for _, i := range ro.Plan.Update {
		next[i] = "now"
	}
	waits := map[int]rollout.Wait{}
	for _, w := range res.Waits {
		waits[w.Pod] = w
	}
	blocked := map[string]string{}
	for _, b := range inputs.Blocked {
		blocked[b.Namespace+"/"+b.Name] = b.Why
	}
	order := map[int]int{}
	for n, i := range res.Order {
		order[i] = n + 1
	}
	var graces []int64
	for i, pod := range inputs.Targets {
		row := rolled(c, pod, before[i], verdicts[i], blocked[rollout.PodKey(pod)], in.now)
		settled := row.Action == ActionLeave || row.Action == ActionCurrent || row.Action == ActionRestarting
		if !settled && !before[i].Eligible {
			row.Action, row.Why = ActionLeave, ineligible(c, injecting)+"; "+row.Why
		}
		switch w, waiting := waits[i]; {
		case settled:
		case next[i] != "":
			row.Next, row.Order = next[i], order[i]
		case waiting:
			row.Next, row.WaitsFor, row.Order = "waits", waitsFor(w, pod.Namespace), order[i]
		}
		if row.Action == ActionInPlace && row.Next != "" {
			graces = append(graces, gracePeriod(pod))
		}
		plan.add(row)
	}
	plan.Summary.InPlaceLeft, plan.Summary.SlowestSeconds = len(graces), slowestSeconds(graces, ro.Plan.MaxUnavailable)
	plan.renumber()
	return nil
}

// renumber numbers the order of the Pods the rollout updates from 1 without gaps: the
// rollout's order also holds Pods it only finds it leaves when it tries them.
func (plan *RolloutPlan) renumber() {
	var ordered []*PlannedPod
	for i := range plan.Pods {
		if plan.Pods[i].Order > 0 {
			ordered = append(ordered, &plan.Pods[i])
		}
	}
	slices.SortFunc(ordered, func(a, b *PlannedPod) int { return a.Order - b.Order })
	for n, p := range ordered {
		p.Order = n + 1
	}
}

// inPlaceVerdict is whether a Pod takes the set's current spec in place, and how.
type inPlaceVerdict struct {
	update  *inject.InPlace
	refusal rollout.Refusal
}

// inPlace decides as the rollout does whether the Pod takes c's current spec in place.
func (in planInput) inPlace(c *inject.CompiledSet, pod *corev1.Pod) (inPlaceVerdict, error) {
	var injected *inject.CompiledSet
	if hash, ok := inject.InjectedHash(pod.Annotations, c.Name()); ok {
		injected = in.engine.injected(c, hash)
	}
	u, no, err := rollout.PlanInPlace(in.engine.store.Load(), c, pod, in.namespaceLabels(pod.Namespace), injected, in.env)
	if err != nil {
		return inPlaceVerdict{}, fmt.Errorf("pod %s: %w", rollout.PodKey(pod), err)
	}
	return inPlaceVerdict{update: u, refusal: no}, nil
}

// rolled is the row of a Pod of a rolling set, before the step's timing: its action and why.
// now measures how long a restarting Pod has waited.
func rolled(c *inject.CompiledSet, pod *corev1.Pod, p rollout.Pod, v inPlaceVerdict, blocked string, now time.Time) PlannedPod {
	row := PlannedPod{Namespace: pod.Namespace, Name: pod.Name}
	hash, _ := inject.InjectedHash(pod.Annotations, c.Name())
	outdated := fmt.Sprintf("outdated (hash %s, the set is at %s)", hash, c.Hash)
	switch {
	case p.Terminating:
		row.Action, row.Why = ActionLeave, "being deleted"
	case blocked != "":
		// Never injected and not recreated, or updated but not running what it asks for.
		row.Action, row.Why = ActionLeave, blocked
	case p.Updated:
		row.Action, row.Why = current(c, pod, now)
	case !p.Injected:
		row.Action, row.Why = ActionRemediate, "not injected: the pod was created before the SidecarSet selected it (or while it was paused); "+explain.Recreation(pod, c)
	case v.refusal.Why == "":
		row.Action, row.Why = ActionInPlace, outdated+": in place: "+changes(v.update)
	default:
		r := rollout.Recreate(c.Set.Spec.UpdateStrategy, pod, true, v.refusal.Why, v.refusal.Recreatable)
		row.Action, row.Why = ActionLeave, outdated+" and not updatable in place: "+r.Left
		if r.Workload != "" {
			row.Action, row.Why = ActionEvict, fmt.Sprintf("%s and not updatable in place (%s); %s", outdated, v.refusal.Why, explain.Recreation(pod, c))
		}
	}
	return row
}

// current is the action and why of a Pod that carries the set's current hash: current, or
// restarting while its kubelet does not run what it carries yet.
func current(c *inject.CompiledSet, pod *corev1.Pod, now time.Time) (Action, string) {
	if r, restarting := rollout.RestartOf(c, pod); restarting {
		return ActionRestarting, r.Describe(now)
	}
	return ActionCurrent, "current (hash " + c.Hash + ")"
}

// notRolled is the row of a Pod of a set that does not roll: current (or restarting) or
// outdated.
func notRolled(c *inject.CompiledSet, pod *corev1.Pod, p rollout.Pod, now time.Time) PlannedPod {
	row := PlannedPod{Namespace: pod.Namespace, Name: pod.Name, Action: ActionOutdated}
	hash, _ := inject.InjectedHash(pod.Annotations, c.Name())
	switch {
	case p.Updated:
		row.Action, row.Why = current(c, pod, now)
	case !p.Injected:
		row.Why = "not injected: the pod was created before the SidecarSet selected it (or while it was paused); recreate it to inject"
	default:
		row.Why = fmt.Sprintf("outdated (hash %s, the set is at %s): recreate the pod to update it", hash, c.Hash)
	}
	return row
}

// changes lists what an in-place update changes.
func changes(u *inject.InPlace) string {
	var out []string
	for _, img := range u.Images {
		out = append(out, fmt.Sprintf("%s %s -> %s", img.Name, img.From, img.To))
	}
	for _, r := range u.Resources {
		out = append(out, r.Name+" resources (in-place resize)")
	}
	if len(out) == 0 {
		return "only the record of the hash changes"
	}
	return strings.Join(out, ", ")
}

// ineligible is why the rollout does not pick a Pod it has to update.
func ineligible(c *inject.CompiledSet, injecting bool) string {
	if !injecting {
		return "the SidecarSet injects nothing and updates no pod"
	}
	return fmt.Sprintf("spec.updateStrategy.selector %s does not match the pod", metav1.FormatLabelSelector(c.Set.Spec.UpdateStrategy.Selector))
}

// stoppedNote says why a valid set injects nothing: a conflict with an older set.
func stoppedNote(conflicts []snapshot.Conflict) string {
	for _, conflict := range conflicts {
		if conflict.Stopped {
			return fmt.Sprintf("the SidecarSet conflicts with the older SidecarSet %q (%s): it injects nothing and updates no pod until that is fixed",
				conflict.With, strings.Join(conflict.Fields, "; "))
		}
	}
	return "the SidecarSet injects nothing: it updates no pod"
}

// waitsFor says why a Pod waits for a later step.
func waitsFor(w rollout.Wait, namespace string) string {
	if w.HeldBack {
		return fmt.Sprintf("%s (pods of namespace %s unavailable for reasons of their own)", w.Reason, namespace)
	}
	return string(w.Reason)
}

// add appends a row and counts it.
func (plan *RolloutPlan) add(row PlannedPod) {
	switch {
	case row.Action == ActionRestarting:
		plan.Summary.Restarting++
	case row.Next == "now" && row.Action == ActionInPlace:
		plan.Summary.UpdatedInPlace++
	case row.Next == "now":
		plan.Summary.Evicted++
	case row.Next == "waits":
		plan.Summary.Waiting++
	case row.Action == ActionLeave:
		plan.Summary.Left++
	}
	plan.Pods = append(plan.Pods, row)
}

// strategyOf is the set's update strategy as the plan shows it, before it is resolved.
func strategyOf(set *appsv1alpha1.SidecarSet) PlanStrategy {
	s := set.Spec.UpdateStrategy
	out := PlanStrategy{Type: string(s.Type), Paused: s.Paused, Recreate: string(s.Recreate), Remediate: string(s.Remediate),
		maxUnavailable: s.MaxUnavailable, partition: s.Partition}
	if out.Type == "" {
		out.Type = string(appsv1alpha1.NotUpdate)
	}
	if s.Selector != nil {
		out.Selector = metav1.FormatLabelSelector(s.Selector)
	}
	out.Priority, out.Scatter = priorityOf(s.PriorityStrategy), scatterOf(s.ScatterStrategy)
	return out
}

// priorityOf is the priority strategy on one line: "weights 60 (tier=canary), 30 (zone=b)" or
// "ordered keys ordinal, rack"; empty when unset.
func priorityOf(p *appsv1alpha1.UpdatePriorityStrategy) string {
	if p == nil {
		return ""
	}
	var parts []string
	for _, w := range p.WeightPriority {
		parts = append(parts, fmt.Sprintf("%d (%s)", w.Weight, metav1.FormatLabelSelector(&w.MatchSelector)))
	}
	if len(parts) > 0 {
		return "weights " + strings.Join(parts, ", ")
	}
	for _, o := range p.OrderPriority {
		parts = append(parts, o.OrderedKey)
	}
	if len(parts) > 0 {
		return "ordered keys " + strings.Join(parts, ", ")
	}
	return ""
}

// scatterOf is the scatter strategy on one line: "zone=*, app=web"; empty when unset.
func scatterOf(terms []appsv1alpha1.UpdateScatterTerm) string {
	var parts []string
	for _, t := range terms {
		parts = append(parts, t.Key+"="+t.Value)
	}
	return strings.Join(parts, ", ")
}

// printPlan prints the plan as a table, with the strategy above and the counts below.
func printPlan(out io.Writer, plan *RolloutPlan) error {
	w := printers.GetNewTabWriter(out)
	fmt.Fprintf(w, "SidecarSet %s (hash %s): %s\n", plan.SidecarSet, plan.Hash, plan.Strategy.describe())
	if plan.Note != "" {
		fmt.Fprintln(w, plan.Note)
	}
	fmt.Fprintln(w, "ORDER\tNAMESPACE\tPOD\tACTION\tNEXT STEP\tWHY")
	if len(plan.Pods) == 0 {
		fmt.Fprintln(w, "-\t(none)\t\t\t\tthe SidecarSet selects no pod")
	}
	for _, p := range plan.Pods {
		next, order := "-", "-"
		switch p.Next {
		case "now":
			next = "now"
		case "waits":
			next = "waits: " + p.WaitsFor
		}
		if p.Order > 0 {
			order = fmt.Sprint(p.Order)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", order, p.Namespace, p.Name, p.Action, next, p.Why)
	}
	if plan.Strategy.Type != string(appsv1alpha1.RollingUpdate) {
		fmt.Fprintln(w, "next step: none; running pods are never updated")
	} else {
		s := plan.Summary
		fmt.Fprintf(w, "next step: %d updated in place, %d evicted; %d wait; %d left alone", s.UpdatedInPlace, s.Evicted, s.Waiting, s.Left)
		if s.Restarting > 0 {
			// They hold the budget until the kubelet runs their new sidecars, Ready.
			fmt.Fprintf(w, "; %d restarting", s.Restarting)
		}
		fmt.Fprintln(w)
		if s.InPlaceLeft > 0 {
			fmt.Fprintf(w, "in place: %d pods left, %d at a time; up to %s if the sidecars do not exit on SIGTERM (the kubelet then waits each pod's grace period before it starts the new image), seconds per pod if they do\n",
				s.InPlaceLeft, plan.Strategy.MaxUnavailable, time.Duration(s.SlowestSeconds)*time.Second)
		}
	}
	return w.Flush()
}

// describe is the strategy on one line, maxUnavailable and partition resolved.
func (s PlanStrategy) describe() string {
	if s.Type != string(appsv1alpha1.RollingUpdate) {
		return s.Type
	}
	parts := []string{s.Type, "maxUnavailable " + resolved(s.MaxUnavailable, s.maxUnavailable, "default"),
		"partition " + resolved(s.Partition, s.partition, "")}
	if s.Selector != "" {
		parts = append(parts, "selector "+s.Selector)
	}
	if s.Priority != "" {
		parts = append(parts, "priority "+s.Priority)
	}
	if s.Scatter != "" {
		parts = append(parts, "scatter "+s.Scatter)
	}
	if s.Paused {
		parts = append(parts, "paused")
	}
	if s.Halted != "" {
		parts = append(parts, "halted: "+s.Halted)
	}
	return strings.Join(append(parts, "recreate "+orDefault(s.Recreate), "remediate "+orDefault(s.Remediate)), ", ")
}

// resolved is a value resolved against the Pods, with the percentage it came from (or what
// stands for it when unset).
func resolved(n int, spec *intstr.IntOrString, unset string) string {
	switch {
	case spec != nil && spec.Type == intstr.String:
		return fmt.Sprintf("%d (%s)", n, spec.StrVal)
	case spec == nil && unset != "":
		return fmt.Sprintf("%d (%s)", n, unset)
	}
	return fmt.Sprint(n)
}

func orDefault(policy string) string {
	if policy == "" {
		return string(appsv1alpha1.RecreateNever)
	}
	return policy
}
