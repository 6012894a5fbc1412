package rollout

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
)

// WeightTerm adds Weight to the priority of the Pods whose labels Selector matches.
type WeightTerm struct {
	Weight   int64
	Selector labels.Selector
}

// ScatterTerm names the Pods whose label Key has Value; Value "*" stands for one term per
// value of Key that the Pods carry.
type ScatterTerm struct {
	Key, Value string
}

// AnyValue is the ScatterTerm value that stands for every value of its key.
const AnyValue = "*"

// Order is how the rollout orders the Pods it updates, after availability (unavailable Pods
// first: updating them costs nothing).
type Order struct {
	// Weights: a Pod's priority is the sum of the weights of the terms that match it; higher
	// first.
	Weights []WeightTerm
	// Keys: the Pods carrying Keys[0] first, by the number their value ends with, highest
	// first; then those carrying Keys[1] (and not Keys[0]); and so on; Pods carrying none
	// last. Used when Weights is empty.
	Keys []string
	// Scatter spreads the Pods each term names evenly over the Pods of equal availability and
	// priority, instead of leaving them back to back in namespace/name order.
	Scatter []ScatterTerm
}

// rank is a Pod's place in the priority order: by tier, lowest first, then by value, highest
// first.
type rank struct {
	tier  int
	value int64
}

func compareRanks(a, b rank) int {
	if c := cmp.Compare(a.tier, b.tier); c != 0 {
		return c
	}
	return cmp.Compare(b.value, a.value)
}

// rankOf is the Pod's rank under o: its weight (tier 0), or the first of o.Keys it carries
// (the key's index is the tier, pods carrying none after every key) and that value's number.
func (o Order) rankOf(podLabels map[string]string) rank {
	if len(o.Weights) > 0 {
		var sum int64
		for _, w := range o.Weights {
			if w.Selector.Matches(labels.Set(podLabels)) {
				sum += w.Weight
			}
		}
		return rank{value: sum}
	}
	for i, key := range o.Keys {
		if v, ok := podLabels[key]; ok {
			return rank{tier: i, value: trailingNumber(v)}
		}
	}
	return rank{tier: len(o.Keys)}
}

// trailingNumber is the number made of the digits value ends with ("sts-10" is 10), 0 when it
// ends with none or they overflow an int64.
func trailingNumber(value string) int64 {
	start := len(value)
	for start > 0 && '0' <= value[start-1] && value[start-1] <= '9' {
		start--
	}
	n, err := strconv.ParseInt(value[start:], 10, 64)
	if err != nil {
		return 0 // no digit at the end, or too many
	}
	return n
}

// sorter orders lists of the same Pods under one Order (ComputeWaits sorts three): the scatter
// terms, and how many Pods each names, are worked out once.
type sorter struct {
	o     Order
	pods  []Pod
	ranks []rank // by index into pods, for the Pods of the lists sorted
	// scatter is nil when the Order has no scatter terms.
	scatter *scatterIndex
}

// sorter prepares o for lists of indices into pods.
func (o Order) sorter(pods []Pod) *sorter {
	s := &sorter{o: o, pods: pods, ranks: make([]rank, len(pods))}
	if len(o.Scatter) > 0 {
		s.scatter = newScatterIndex(o.Scatter, pods)
	}
	return s
}

// sort orders idx (indices into the Pods) as the rollout takes them: unavailable Pods first,
// then by priority, then by namespace/name; then, within each run of equal availability and
// priority, the scatter terms spread the Pods they name.
func (s *sorter) sort(idx []int) {
	pods := s.pods
	for _, i := range idx {
		s.ranks[i] = s.o.rankOf(pods[i].Labels)
	}
	class := func(a, b int) int {
		if pods[a].Available != pods[b].Available {
			if pods[a].Available {
				return 1
			}
			return -1
		}
		return compareRanks(s.ranks[a], s.ranks[b])
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		if c := class(a, b); c != 0 {
			return c
		}
		return strings.Compare(pods[a].Key, pods[b].Key)
	})
	if s.scatter == nil {
		return
	}
	for start := 0; start < len(idx); {
		end := start + 1
		for end < len(idx) && class(idx[start], idx[end]) == 0 {
			end++
		}
		if end-start > 2 {
			s.scatter.spread(idx[start:end])
		}
		start = end
	}
}
