package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/printers"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/eventcatalog"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/rollout"
	"github.com/sidecarset/sidecarset-operator/internal/validation"
)

// SetChange is what upgrading the operator to this version does to a SidecarSet. The values
// are stable: scripts may read them.
type SetChange string

// Set changes.
const (
	// SetUnchanged: this version injects and rolls the set as the running operator does.
	SetUnchanged SetChange = "unchanged"
	// SetRefused: this version cannot compile the set, so it stops injecting it.
	SetRefused SetChange = "refused"
	// SetStopped: this version finds a conflict the running operator does not, so it stops
	// injecting the set.
	SetStopped SetChange = "stopped"
	// SetRehashed: this version computes another hash for the same spec, so its rollout
	// takes every pod the set injected for outdated.
	SetRehashed SetChange = "rehashed"
	// SetUnobserved: the running operator has not observed the set's current generation
	// yet, so there is nothing to compare with; check again.
	SetUnobserved SetChange = "unobserved"
)

// UpgradeReport is what upgrading the operator to this version would change, set by set and
// pod by pod.
type UpgradeReport struct {
	// Version is this plugin's build (the commit it was built from, when known).
	Version     string         `json:"version"`
	SidecarSets []UpgradeSet   `json:"sidecarSets"`
	Summary     UpgradeSummary `json:"summary"`
}

// UpgradeSet is one SidecarSet: how this version takes it, and the pods that would change.
type UpgradeSet struct {
	Name   string    `json:"name"`
	Change SetChange `json:"change"`
	// Why says what changes, and what to do about it; empty when nothing does.
	Why string `json:"why,omitempty"`
	// RunningHash is the hash the running operator computed (status.hash); Hash is this
	// version's.
	RunningHash string `json:"runningHash"`
	Hash        string `json:"hash,omitempty"`
	// EditsRefused lists what this version's validating webhook refuses in the set as it
	// is: it keeps injecting, and its next edit must fix these.
	EditsRefused []string `json:"editsRefused,omitempty"`
	// PodsSelected counts the opted-in pods the set selects; PodsChecked those checked (all of
	// them, or --sample of them).
	PodsSelected int          `json:"podsSelected"`
	PodsChecked  int          `json:"podsChecked"`
	Pods         []UpgradePod `json:"pods,omitempty"`
}

// UpgradePod is a pod that this version would treat otherwise than the running operator.
type UpgradePod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Now is what the running operator makes of it: current or outdated.
	Now Action `json:"now"`
	// After is what this version's rollout does to it (the rollout plan's action), or
	// "drift" when it runs the current hash and this version injects that hash otherwise.
	After Action `json:"after"`
	Why   string `json:"why"`
}

// ActionDrift: the pod carries the set's current hash, and this version injects that content
// otherwise; it leaves the pod as it is, and new pods get the other content.
const ActionDrift Action = "drift"

// UpgradeSummary counts the report's findings.
type UpgradeSummary struct {
	SidecarSets int `json:"sidecarSets"`
	// SetsChanged counts the sets whose change is not unchanged (unobserved ones included).
	SetsChanged int `json:"setsChanged"`
	PodsChecked int `json:"podsChecked"`
	PodsChanged int `json:"podsChanged"`
}

// Changed reports whether the upgrade would change anything the report checked.
func (r *UpgradeReport) Changed() bool {
	return r.Summary.SetsChanged > 0 || r.Summary.PodsChanged > 0
}

func newUpgradeCheckCommand(o *options) *cobra.Command {
	var output string
	var sample int
	cmd := &cobra.Command{
		Use:   "upgrade-check [SIDECARSET...]",
		Short: "Say what upgrading the operator to this plugin's version would change, before anyone upgrades",
		Long: `upgrade-check runs this version's engine, offline, against the cluster's SidecarSets and
opted-in pods, and compares what it makes of them with what the running operator says
(each set's status). For each SidecarSet it reports whether this version refuses it (it cannot
compile it, and stops injecting it), stops it for a conflict the running operator does not
see, or computes another hash for the same spec (then its rollout takes every pod the set
injected for outdated); and what this version's validating webhook would refuse at the set's
next edit. For each pod the running operator counts as current, it reports what this
version's rollout would do to it instead (update in place, evict, leave), and whether this
version injects the pod's hash otherwise (drift: new pods would differ from running ones).

Use the plugin of the version you are about to install. It only reads the cluster, as rollout
plan does. With --sample N, it checks N pods of each set, spread over its namespaces, instead
of all of them.

It exits 0 when nothing would change and 4 when something would (see Exit codes).`,
		Example: `  kubectl sidecarset upgrade-check
  kubectl sidecarset upgrade-check mesh-proxy --sample 200
  kubectl sidecarset upgrade-check -o json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != "json" {
				return usageError("--output must be json; got %q", output)
			}
			if sample < 0 {
				return usageError("--sample must be 0 (every pod) or more; got %d", sample)
			}
			report, err := checkUpgrade(cmd.Context(), o, args, sample)
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(o.streams.Out)
				enc.SetIndent("", "  ")
				err = enc.Encode(report)
			} else {
				err = printUpgradeReport(o.streams.Out, report)
			}
			if err == nil && report.Changed() {
				return &exitError{code: ExitChanges, err: fmt.Errorf("upgrading to %s would change %d SidecarSets and %d pods of %d checked",
					report.Version, report.Summary.SetsChanged, report.Summary.PodsChanged, report.Summary.PodsChecked)}
			}
			return err
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json: print the report as JSON instead of tables")
	cmd.Flags().IntVar(&sample, "sample", 0, "check at most this many pods of each SidecarSet, spread over its namespaces (0: every pod)")
	return cmd
}

// checkUpgrade reads what the operator reads (SidecarSets, their revisions, the opted-in
// pods, their namespaces and nodes) and compares this version's verdicts with the sets'
// status.
func checkUpgrade(ctx context.Context, o *options, names []string, sample int) (*UpgradeReport, error) {
	c, err := o.kubeClient()
	if err != nil {
		return nil, err
	}
	e, err := o.engine(ctx, o.streams.In, nil)
	if err != nil {
		return nil, err
	}
	var list appsv1alpha1.SidecarSetList
	if err := c.List(ctx, &list); err != nil {
		return nil, clusterError(fmt.Errorf("listing SidecarSets: %w", err))
	}
	for _, name := range names {
		if !slices.ContainsFunc(list.Items, func(s appsv1alpha1.SidecarSet) bool { return s.Name == name }) {
			return nil, &exitError{code: ExitRefused, err: fmt.Errorf("SidecarSet %q not found", name)}
		}
	}
	env, err := o.inPlaceEnv(ctx, c, e)
	if err != nil {
		return nil, err
	}
	report := &UpgradeReport{Version: buildVersion()}
	nsLabels := map[string]map[string]string{}
	for i := range list.Items {
		set := &list.Items[i]
		if len(names) > 0 && !slices.Contains(names, set.Name) {
			continue
		}
		pods, err := optedInPods(ctx, c, set)
		if err != nil {
			return nil, err
		}
		selected := len(pods)
		pods = sampled(pods, sample)
		for _, pod := range pods {
			if _, ok := nsLabels[pod.Namespace]; !ok {
				if nsLabels[pod.Namespace], err = e.NamespaceLabels(ctx, pod.Namespace); err != nil {
					return nil, err
				}
			}
		}
		in := planInput{set: set, engine: e, pods: pods, env: env, now: time.Now(),
			namespaceLabels: func(ns string) map[string]string { return nsLabels[ns] }}
		s, err := checkSet(in, list.Items)
		if err != nil {
			return nil, err
		}
		s.PodsSelected = selected
		report.add(s)
	}
	return report, nil
}

// checkSet compares how this version takes one set, and the pods in, with the set's status.
func checkSet(in planInput, all []appsv1alpha1.SidecarSet) (UpgradeSet, error) {
	set := in.set
	s := UpgradeSet{Name: set.Name, Change: SetUnchanged, RunningHash: set.Status.Hash, PodsChecked: len(in.pods)}
	others := slices.DeleteFunc(slices.Clone(all), func(o appsv1alpha1.SidecarSet) bool { return o.Name == set.Name })
	for _, e := range validation.ValidateSidecarSet(set, others) {
		s.EditsRefused = append(s.EditsRefused, e.Error())
	}
	snap := in.engine.store.Load()
	if err, invalid := snap.Invalid[set.Name]; invalid {
		if !meta.IsStatusConditionTrue(set.Status.Conditions, appsv1alpha1.ConditionInvalid) {
			s.Change, s.Why = SetRefused, fmt.Sprintf("this version cannot compile the SidecarSet, so it stops injecting it: %v", err)
		}
		return s, nil
	}
	i := slices.IndexFunc(snap.Valid, func(x *inject.CompiledSet) bool { return x.Name() == set.Name })
	var compiled *inject.CompiledSet
	if i >= 0 {
		compiled = snap.Valid[i]
	}
	if compiled == nil {
		return s, fmt.Errorf("SidecarSet %q compiles but the engine does not hold it", set.Name)
	}
	s.Hash = compiled.Hash
	if set.Status.ObservedGeneration != set.Generation {
		s.Change, s.Why = SetUnobserved, fmt.Sprintf("the running operator has not observed generation %d yet (status is at %d): run upgrade-check again once it has",
			set.Generation, set.Status.ObservedGeneration)
		return s, nil
	}
	injecting := slices.ContainsFunc(snap.Sets, func(x *inject.CompiledSet) bool { return x.Name() == set.Name })
	stoppedNow := conditionReason(set, appsv1alpha1.ConditionConflict) == string(eventcatalog.StoppedByConflict)
	switch {
	case !injecting && !stoppedNow:
		s.Change, s.Why = SetStopped, "this version finds a conflict the running operator does not, and stops injecting the SidecarSet: "+stoppedNote(snap.Conflicts[set.Name])
	case set.Status.Hash != "" && set.Status.Hash != compiled.Hash:
		s.Change, s.Why = SetRehashed, fmt.Sprintf("this version computes hash %s for the spec the running operator hashes %s: its rollout takes every pod the SidecarSet injected for outdated (see the pods)",
			compiled.Hash, set.Status.Hash)
	}
	pods, err := changedPods(in, compiled)
	if err != nil {
		return s, err
	}
	s.Pods = pods
	return s, nil
}

// changedPods lists the pods the running operator counts as current (they record its hash)
// that this version would update, evict or leave instead, or injects otherwise.
func changedPods(in planInput, c *inject.CompiledSet) ([]UpgradePod, error) {
	running := in.set.Status.Hash
	var current []*corev1.Pod
	for _, pod := range in.pods {
		if hash, ok := inject.InjectedHash(pod.Annotations, c.Name()); ok && hash == running && pod.DeletionTimestamp == nil {
			current = append(current, pod)
		}
	}
	if len(current) == 0 {
		return nil, nil
	}
	plan, err := planRollout(planInput{set: in.set, engine: in.engine, pods: current, namespaceLabels: in.namespaceLabels, env: in.env, now: in.now})
	if err != nil {
		return nil, err
	}
	byKey := map[string]*corev1.Pod{}
	for _, pod := range current {
		byKey[rollout.PodKey(pod)] = pod
	}
	snap := in.engine.store.Load()
	var out []UpgradePod
	_, injecting := snap.Get(c.Name())
	for _, row := range plan.Pods {
		pod := byKey[row.Namespace+"/"+row.Name]
		if row.Action != ActionCurrent && row.Action != ActionRestarting {
			out = append(out, UpgradePod{Namespace: row.Namespace, Name: row.Name, Now: ActionCurrent, After: row.Action, Why: row.Why})
			continue
		}
		if !injecting {
			continue // stopped: it injects nothing, so nothing otherwise
		}
		drift, err := inject.Drift(inject.Input{Pod: pod, Sets: inject.Candidates(snap.Sets, pod.Labels), NamespaceLabels: in.namespaceLabels(pod.Namespace),
			SetByName: snap.Get, AllowedAnnotations: in.env.AllowedAnnotations}, c.Name())
		switch {
		case err != nil:
			out = append(out, UpgradePod{Namespace: row.Namespace, Name: row.Name, Now: ActionCurrent, After: ActionDrift,
				Why: "this version cannot read the pod's record: " + err.Error()})
		case len(drift) > 0:
			out = append(out, UpgradePod{Namespace: row.Namespace, Name: row.Name, Now: ActionCurrent, After: ActionDrift,
				Why: "the pod's sidecars are not what this version injects for hash " + c.Hash +
					" (this version injects it otherwise, or someone edited the pod since injection: kubectl set image, say); " +
					"the pod is left as it is, new pods get this version's: " + strings.Join(drift, "; ")})
		}
	}
	return out, nil
}

// conditionReason is the reason of the set's condition of that type when it is True, "" otherwise.
func conditionReason(set *appsv1alpha1.SidecarSet, condition string) string {
	if c := meta.FindStatusCondition(set.Status.Conditions, condition); c != nil && c.Status == "True" {
		return c.Reason
	}
	return ""
}

// sampled returns at most n of the pods (all when n is 0), sorted by namespace and name and
// taken at even steps, so that the sample spans the namespaces.
func sampled(pods []*corev1.Pod, n int) []*corev1.Pod {
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(rollout.PodKey(a), rollout.PodKey(b)) })
	if n == 0 || len(pods) <= n {
		return pods
	}
	out := make([]*corev1.Pod, 0, n)
	for i := range n {
		out = append(out, pods[i*len(pods)/n])
	}
	return out
}

func (r *UpgradeReport) add(s UpgradeSet) {
	r.SidecarSets = append(r.SidecarSets, s)
	r.Summary.SidecarSets++
	r.Summary.PodsChecked += s.PodsChecked
	r.Summary.PodsChanged += len(s.Pods)
	if s.Change != SetUnchanged {
		r.Summary.SetsChanged++
	}
}

// buildCommit is the commit the Makefile built the plugin from (-ldflags -X), empty otherwise.
var buildCommit string

// buildVersion is the commit this plugin was built from: the Makefile's, or Go's VCS stamp
// (with "+dirty" when the tree had changes), or the module version, or "a development build"
// (go run, go test).
func buildVersion() string {
	if buildCommit != "" {
		return buildCommit
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "a development build"
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	switch {
	case rev != "" && modified == "true":
		return rev + "+dirty"
	case rev != "":
		return rev
	case info.Main.Version != "" && info.Main.Version != "(devel)":
		return info.Main.Version
	}
	return "a development build"
}

// printUpgradeReport prints a table of the SidecarSets, then one of the pods that change.
func printUpgradeReport(out io.Writer, r *UpgradeReport) error {
	fmt.Fprintf(out, "Checked with this plugin (%s): %d SidecarSets, %d pods.\n\n", r.Version, r.Summary.SidecarSets, r.Summary.PodsChecked)
	w := printers.GetNewTabWriter(out)
	fmt.Fprintln(w, "SIDECARSET\tCHANGE\tHASH NOW\tHASH AFTER\tPODS CHECKED\tPODS CHANGED\tWHY")
	for _, s := range r.SidecarSets {
		why := s.Why
		if len(s.EditsRefused) > 0 {
			why = strings.TrimPrefix(why+"; its next edit must fix what this version's validation refuses: "+strings.Join(s.EditsRefused, "; "), "; ")
		}
		if why == "" {
			why = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d of %d\t%d\t%s\n", s.Name, s.Change, orDash(s.RunningHash), orDash(s.Hash), s.PodsChecked, s.PodsSelected, len(s.Pods), why)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if r.Summary.PodsChanged == 0 {
		fmt.Fprintln(out, "\nNo pod the running operator counts as current would be touched or injected otherwise.")
		return nil
	}
	fmt.Fprintln(out)
	w = printers.GetNewTabWriter(out)
	fmt.Fprintln(w, "NAMESPACE\tPOD\tSIDECARSET\tNOW\tAFTER\tWHY")
	for _, s := range r.SidecarSets {
		for _, p := range s.Pods {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Namespace, p.Name, s.Name, p.Now, p.After, p.Why)
		}
	}
	return w.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
