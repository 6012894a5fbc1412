package inject

import (
	"fmt"
	"slices"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// Drift says how the Pod, whose record says the named set injected its current hash, differs
// from what this engine injects for that content: empty when injecting the Pod afresh gives
// what it carries. A difference is what this engine would do otherwise than the one that
// injected the Pod (a field it renders another way, an override it reads another way), or an
// edit made since injection: the two cannot be told apart. A Pod that records another hash drifts by definition, as the rollout's business: nil.
// The record is checked as UpdateInPlace checks it; what it may not say is a difference too.
func Drift(in Input, set string) ([]string, error) {
	current, _, rec, err := recordedBy(in, set)
	if err != nil {
		return nil, err
	}
	if rec.Hash != current.Hash {
		return nil, nil
	}
	if refused := checkRecord(&rec, current, nil, in.AllowedAnnotations); len(refused) > 0 {
		return refused, nil
	}
	in.Pod = withPolicyResourcesOf(asRecorded(in.Pod, rec, current), rec, current)
	res, err := Apply(in)
	if err != nil {
		return []string{err.Error()}, nil //nolint:nilerr // the engine refusing the pod as recorded is a difference, not an error
	}
	return differences(in.Pod, res, set, "differs from what this version injects"), nil
}

// recordedBy is the named set as it is now (one of in.Sets), the Pod's records, and the set's
// record among them: an error when the set may not apply to the Pod or the Pod records none of it.
func recordedBy(in Input, set string) (*CompiledSet, Records, Record, error) {
	current, ok := in.setByName(set)
	if !ok || !slices.Contains(in.Sets, current) {
		return nil, nil, Record{}, fmt.Errorf("SidecarSet %q is not among the sets that may apply to the pod", set)
	}
	records, err := ParseRecords(in.Pod.Annotations)
	if err != nil {
		return nil, nil, Record{}, err
	}
	rec, ok := records[set]
	if !ok {
		return nil, nil, Record{}, fmt.Errorf("the pod's %s annotation has no record of SidecarSet %q", appsv1alpha1.StatusAnnotation, set)
	}
	return current, records, rec, nil
}
