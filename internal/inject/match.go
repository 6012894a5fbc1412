package inject

import "k8s.io/apimachinery/pkg/labels"

// MatchReason says why a SidecarSet does or does not apply to a Pod. The values are stable:
// they label metrics and appear in explanations.
type MatchReason string

// Reasons a SidecarSet does or does not apply to a Pod.
const (
	Matched              MatchReason = "Matched"
	NotOptedIn           MatchReason = "NotOptedIn"
	SelectorMismatch     MatchReason = "SelectorMismatch"
	NamespaceMismatch    MatchReason = "NamespaceMismatch"
	InjectionPaused      MatchReason = "Paused"
	NamespaceUnavailable MatchReason = "NamespaceUnavailable"
)

// SelectsPod reports whether the SidecarSet's pod selector matches the labels. It does not
// look at the namespace or the opt-in label.
func (c *CompiledSet) SelectsPod(podLabels map[string]string) bool {
	return c.selector.Matches(labels.Set(podLabels))
}

// SelectsNamespace reports whether the SidecarSet's namespace selector (if any) matches the
// labels of a namespace.
func (c *CompiledSet) SelectsNamespace(namespaceLabels map[string]string) bool {
	return c.namespaceSelector == nil || c.namespaceSelector.Matches(labels.Set(namespaceLabels))
}

// Match decides whether the SidecarSet selects a Pod with these labels in a namespace with
// these labels. namespaceLabels is only read when the set has a namespace selector. Pausing
// is not a matter of matching: a paused set still matches (and counts) its Pods.
func (c *CompiledSet) Match(podLabels, namespaceLabels map[string]string) MatchReason {
	switch {
	case !OptedIn(podLabels):
		return NotOptedIn
	case !c.SelectsPod(podLabels):
		return SelectorMismatch
	case !c.SelectsNamespace(namespaceLabels):
		return NamespaceMismatch
	}
	return Matched
}

// Candidates returns the sets whose pod selector matches the labels, keeping their order. It is
// the cheap first pass of admission: only when a candidate has a namespace selector does the
// caller need to look the namespace up.
func Candidates(sets []*CompiledSet, podLabels map[string]string) []*CompiledSet {
	var out []*CompiledSet
	for _, s := range sets {
		if s.SelectsPod(podLabels) {
			out = append(out, s)
		}
	}
	return out
}

// NeedNamespace reports whether any of the sets has a namespace selector.
func NeedNamespace(sets []*CompiledSet) bool {
	for _, s := range sets {
		if s.HasNamespaceSelector() {
			return true
		}
	}
	return false
}
