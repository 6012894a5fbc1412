package validation

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// SetsOverlap reports whether some Pod can be selected by both SidecarSet specs: a Pod that
// carries the opt-in label sidecarset.io/inject=true, matches both pod selectors, and lives in
// a namespace that matches both namespace selectors. A nil namespace selector selects every
// namespace. The error reports a selector that cannot be parsed, as "first SidecarSet:
// spec.selector is invalid: ..." for a, or "second SidecarSet: ..." for b.
func SetsOverlap(a, b *appsv1alpha1.SidecarSetSpec) (bool, error) {
	if err := selectorsError(a); err != nil {
		return false, fmt.Errorf("first SidecarSet: %w", err)
	}
	if err := selectorsError(b); err != nil {
		return false, fmt.Errorf("second SidecarSet: %w", err)
	}
	// Only opted-in Pods are ever injected (the engine's gate), so a selector that excludes
	// the opt-in label overlaps nothing, whatever else it says.
	pods, err := satisfiable(a.Selector, b.Selector, inject.OptInSelector())
	if err != nil {
		return false, fmt.Errorf("pod selectors: %w", err)
	}
	if !pods {
		return false, nil
	}
	namespaces, err := satisfiable(a.NamespaceSelector, b.NamespaceSelector)
	if err != nil {
		return false, fmt.Errorf("namespace selectors: %w", err)
	}
	return namespaces, nil
}

// selectorsError reports the first selector of a spec that cannot be parsed, by its path.
func selectorsError(spec *appsv1alpha1.SidecarSetSpec) error {
	if err := parseSelector(spec.Selector); err != nil {
		return fmt.Errorf("spec.selector is invalid: %w", err)
	}
	if err := parseSelector(spec.NamespaceSelector); err != nil {
		return fmt.Errorf("spec.namespaceSelector is invalid: %w", err)
	}
	return nil
}

// parseSelector refuses exactly what the injection engine refuses when it compiles a selector
// (an unknown operator, In without values, an invalid key or value). nil is fine: it selects
// everything here.
func parseSelector(s *metav1.LabelSelector) error {
	if s == nil {
		return nil
	}
	_, err := metav1.LabelSelectorAsSelector(s)
	return err
}

// SelectorsOverlap reports exactly whether some label set satisfies both selectors. A nil or
// empty selector matches every label set. The error reports a selector that
// metav1.LabelSelectorAsSelector would refuse (an unknown operator, In without values, an
// invalid key or value), naming it "selector 1" (a) or "selector 2" (b).
func SelectorsOverlap(a, b *metav1.LabelSelector) (bool, error) {
	return satisfiable(a, b)
}

// satisfiable decides whether the conjunction of all requirements of all selectors can hold.
// Requirements on different keys never constrain each other and label values are unbounded
// strings, so the conjunction holds iff the requirements on every single key can hold.
func satisfiable(selectors ...*metav1.LabelSelector) (bool, error) {
	byKey := map[string]*keyRequirements{}
	for i, s := range selectors {
		if err := collect(byKey, s); err != nil {
			return false, fmt.Errorf("selector %d: %w", i+1, err)
		}
	}
	for _, r := range byKey {
		if !r.satisfiable() {
			return false, nil
		}
	}
	return true, nil
}

// collect adds the requirements of one selector to byKey. matchLabels k: v is the requirement
// k In [v].
func collect(byKey map[string]*keyRequirements, s *metav1.LabelSelector) error {
	if s == nil {
		return nil
	}
	// Parsing first means the algebra below only ever sees well-formed requirements.
	if err := parseSelector(s); err != nil {
		return err
	}
	for k, v := range s.MatchLabels {
		requirementsOf(byKey, k).addIn([]string{v})
	}
	for _, e := range s.MatchExpressions {
		if err := requirementsOf(byKey, e.Key).add(e); err != nil {
			return err
		}
	}
	return nil
}

func requirementsOf(byKey map[string]*keyRequirements, key string) *keyRequirements {
	r, ok := byKey[key]
	if !ok {
		r = &keyRequirements{notIn: sets.New[string]()}
		byKey[key] = r
	}
	return r
}

// keyRequirements is the conjunction of all requirements on one label key.
type keyRequirements struct {
	in     sets.Set[string] // intersection of every In value set; nil while there is no In
	notIn  sets.Set[string] // union of every NotIn value set
	exists bool             // some Exists requirement
	absent bool             // some DoesNotExist requirement
}

func (r *keyRequirements) add(e metav1.LabelSelectorRequirement) error {
	switch e.Operator {
	case metav1.LabelSelectorOpIn:
		r.addIn(e.Values)
	case metav1.LabelSelectorOpNotIn:
		r.notIn.Insert(e.Values...)
	case metav1.LabelSelectorOpExists:
		r.exists = true
	case metav1.LabelSelectorOpDoesNotExist:
		r.absent = true
	default:
		// LabelSelectorAsSelector refuses unknown operators already; this keeps the
		// decision exact should it ever accept a new one.
		return fmt.Errorf("key %q: unsupported operator %q", e.Key, e.Operator)
	}
	return nil
}

func (r *keyRequirements) addIn(values []string) {
	if r.in == nil {
		r.in = sets.New(values...)
		return
	}
	r.in = r.in.Intersection(sets.New(values...))
}

// satisfiable reports whether one value (or the absence of the key) meets every requirement.
// An absent key meets NotIn and DoesNotExist; a present key needs a value allowed by every In
// and by no NotIn, and without an In any value outside the finite NotIn set will do.
func (r *keyRequirements) satisfiable() bool {
	mustExist := r.exists || r.in != nil
	if r.absent {
		return !mustExist
	}
	return r.in == nil || r.in.Difference(r.notIn).Len() > 0
}
