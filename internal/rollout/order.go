package rollout

import (
	"cmp"
	"math"
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

// sortPods orders idx (indices into pods) as the rollout takes them: unavailable Pods first,
// then by priority, then by namespace/name; then, within each run of equal availability and
// priority, the scatter terms spread the Pods they name.
func (o Order) sortPods(pods []Pod, idx []int) {
	ranks := make(map[int]rank, len(idx))
	for _, i := range idx {
		ranks[i] = o.rankOf(pods[i].Labels)
	}
	class := func(a, b int) int {
		if pods[a].Available != pods[b].Available {
			if pods[a].Available {
				return 1
			}
			return -1
		}
		return compareRanks(ranks[a], ranks[b])
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		if c := class(a, b); c != 0 {
			return c
		}
		return strings.Compare(pods[a].Key, pods[b].Key)
	})
	if len(o.Scatter) == 0 {
		return
	}
	terms := o.expand(pods)
	for start := 0; start < len(idx); {
		end := start + 1
		for end < len(idx) && class(idx[start], idx[end]) == 0 {
			end++
		}
		if end-start > 2 {
			copy(idx[start:end], scatter(pods, idx[start:end], terms))
		}
		start = end
	}
}

// expand replaces each term of value "*" by one term per value of its key among the Pods that
// are not being deleted, in the order of the values; duplicates are dropped.
func (o Order) expand(pods []Pod) []ScatterTerm {
	var out []ScatterTerm
	add := func(t ScatterTerm) {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	for _, t := range o.Scatter {
		if t.Value != AnyValue {
			add(t)
			continue
		}
		var values []string
		for _, p := range pods {
			if v, ok := p.Labels[t.Key]; ok && !p.Terminating {
				values = append(values, v)
			}
		}
		slices.Sort(values)
		for _, v := range slices.Compact(values) {
			add(ScatterTerm{Key: t.Key, Value: v})
		}
	}
	return out
}

// matches reports whether the Pod carries the term's label.
func (t ScatterTerm) matches(p Pod) bool {
	v, ok := p.Labels[t.Key]
	return ok && v == t.Value
}

// scatter spreads, term after term, the Pods of idx each term names over idx. With several
// terms, those naming more of these Pods go first (ties keep their order), and terms naming
// none are dropped.
func scatter(pods []Pod, idx []int, terms []ScatterTerm) []int {
	if len(terms) > 1 {
		count := map[ScatterTerm]int{}
		var named []ScatterTerm
		for _, t := range terms {
			for _, i := range idx {
				if t.matches(pods[i]) {
					count[t]++
				}
			}
			if count[t] > 0 {
				named = append(named, t)
			}
		}
		slices.SortStableFunc(named, func(a, b ScatterTerm) int { return cmp.Compare(count[b], count[a]) })
		terms = named
	}
	out := slices.Clone(idx)
	for _, t := range terms {
		out = scatterTerm(pods, out, t)
	}
	return out
}

// scatterTerm spreads the Pods of idx that t names among the others. The Pods are cut into
// groups, each of a few named Pods followed by a few others, sized so that the named Pods are
// as dense in the order as they are among all the set's Pods (or among idx, when they are
// denser there); the last named Pod goes last. It is OpenKruise's scatter, so that a set moved
// from it rolls in the same order.
func scatterTerm(pods []Pod, idx []int, t ScatterTerm) []int {
	var named, others []int
	for _, i := range idx {
		if t.matches(pods[i]) {
			named = append(named, i)
		} else {
			others = append(others, i)
		}
	}
	if len(named) <= 1 || len(others) <= 1 {
		return idx
	}
	// The density of the named Pods among all the set's Pods.
	totalNamed, totalOthers := 0, 0
	for _, p := range pods {
		switch {
		case p.Terminating:
		case t.matches(p):
			totalNamed++
		default:
			totalOthers++
		}
	}
	last := named[len(named)-1]
	named = named[:len(named)-1]
	g := groupsFor(totalNamed-1, totalOthers, len(named), len(others))
	out := make([]int, 0, len(idx))
	out = append(out, others[:g.lead]...)
	others = others[g.lead:]
	for range g.n {
		named, out = move(named, out, g.named)
		others, out = move(others, out, g.others)
	}
	out = append(append(append(out, named...), others...), last)
	return out
}

// move moves the first n items of src (all of them when fewer) to the end of dst.
func move(src, dst []int, n int) ([]int, []int) {
	n = min(n, len(src))
	return src[n:], append(dst, src[:n]...)
}

// groups is how scatterTerm cuts the Pods: lead others first, then n groups of named named
// Pods and others others.
type groups struct {
	n, named, others, lead int
}

// evenGroups cuts named and others Pods into as many groups as the smaller of the two, each
// group's share rounded to the nearest (halves up).
func evenGroups(named, others int) groups {
	n := min(named, others)
	if n == 0 {
		return groups{}
	}
	return groups{n: n, named: int(math.Round(float64(named) / float64(n))), others: int(math.Round(float64(others) / float64(n)))}
}

// groupsFor sizes the groups of the Pods to update (named and others of them) from the
// density of the named Pods among all the set's Pods (totalNamed, totalOthers): when the
// named Pods to update are at least as dense as in the set, they are spread evenly over the
// Pods to update; when they are sparser, the groups keep the set's proportions, and the others
// that no group takes lead.
func groupsFor(totalNamed, totalOthers, named, others int) groups {
	// others/named <= totalOthers/totalNamed, without rounding.
	if totalOthers*named >= others*totalNamed {
		return evenGroups(named, others)
	}
	total := evenGroups(totalNamed, totalOthers)
	if total.n == 0 {
		// Cannot happen (the set's Pods include those to update), but a division by zero
		// must not be what tells.
		return evenGroups(named, others)
	}
	g := groups{named: total.named, others: total.others}
	g.n = min(named/g.named, others/g.others)
	g.lead = others - g.n*g.others
	return g
}
