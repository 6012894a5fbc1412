package rollout

import (
	"cmp"
	"math"
	"slices"
)

// scatterIndex is what scattering reads of all the Pods: the terms, each "*" expanded into
// one term per value, and how many Pods not being deleted each term names. A Pod's author
// chooses its labels, so there can be as many terms as Pods: nothing here walks every Pod for
// every term.
type scatterIndex struct {
	pods []Pod
	// terms are the distinct terms, in the order of the strategy's terms; each "*" stands
	// for its key's values among the Pods not being deleted, in the order of the values.
	terms []ScatterTerm
	// keys are the terms' keys, each once; byValue[k][v] is the index of the term {keys[k], v}.
	keys    []string
	byValue []map[string]int
	// total[t] counts the Pods not being deleted that terms[t] names; live counts all of
	// them.
	total []int
	live  int
	// seqFactor: a term naming k of a run of n Pods is applied to a slice while
	// k*seqFactor*log2(n) >= n, to a seq once below (see apply).
	seqFactor int
	// Scratch space, by term, for spread: how many Pods of the run a term names, and where
	// its Pods go in members (-1: none, the term moves nothing).
	count, next []int
	members     []int
}

// newScatterIndex expands terms over pods and counts what each names.
func newScatterIndex(terms []ScatterTerm, pods []Pod) *scatterIndex {
	x := &scatterIndex{pods: pods, seqFactor: 16}
	x.expand(terms)
	x.total = make([]int, len(x.terms))
	x.count, x.next = make([]int, len(x.terms)), make([]int, len(x.terms))
	for t := range x.next {
		x.next[t] = -1
	}
	for _, p := range pods {
		if !p.Terminating {
			x.live++
			x.termsOf(p, func(t int) { x.total[t]++ })
		}
	}
	return x
}

// expand sets x.terms and indexes them: terms in order, each "*" replaced by one term per
// value of its key among the Pods not being deleted (sorted), each distinct term once.
func (x *scatterIndex) expand(terms []ScatterTerm) {
	keyIndex := map[string]int{}
	for _, t := range terms {
		values := []string{t.Value}
		if t.Value == AnyValue {
			values = liveValues(x.pods, t.Key)
		}
		k, ok := keyIndex[t.Key]
		if !ok {
			k = len(x.keys)
			keyIndex[t.Key] = k
			x.keys, x.byValue = append(x.keys, t.Key), append(x.byValue, make(map[string]int, len(values)))
		}
		for _, v := range values {
			if _, dup := x.byValue[k][v]; !dup {
				x.byValue[k][v] = len(x.terms)
				x.terms = append(x.terms, ScatterTerm{Key: t.Key, Value: v})
			}
		}
	}
}

// liveValues are the values of key among the Pods not being deleted, sorted, each once.
func liveValues(pods []Pod, key string) []string {
	var values []string
	for _, p := range pods {
		if v, ok := p.Labels[key]; ok && !p.Terminating {
			values = append(values, v)
		}
	}
	slices.Sort(values)
	return slices.Compact(values)
}

// termsOf calls f with the index of each term that names p: at most one per key.
func (x *scatterIndex) termsOf(p Pod, f func(t int)) {
	for k, key := range x.keys {
		if v, ok := p.Labels[key]; ok {
			if t, ok := x.byValue[k][v]; ok {
				f(t)
			}
		}
	}
}

// spread reorders run, Pods of equal availability and priority, term after term: the terms
// naming more of these Pods first (ties in the terms' order), each spreading the Pods it names
// over the run (scatterSlice). A term that names fewer than two of the run's Pods, or all but
// one, leaves the order as it is, so only the others are applied.
func (x *scatterIndex) spread(run []int) {
	var touched []int
	for _, i := range run {
		x.termsOf(x.pods[i], func(t int) {
			if x.count[t] == 0 {
				touched = append(touched, t)
			}
			x.count[t]++
		})
	}
	var moving []int
	for _, t := range touched {
		if c := x.count[t]; c >= 2 && len(run)-c >= 2 {
			moving = append(moving, t)
		}
	}
	slices.SortFunc(moving, func(a, b int) int {
		if c := cmp.Compare(x.count[b], x.count[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	if len(moving) > 0 {
		x.apply(run, moving)
	}
	for _, t := range touched {
		x.count[t], x.next[t] = 0, -1
	}
}

// apply spreads the Pods each of the terms moving names over run, in that order.
// The order is kept as positions in run (run[e] is the Pod at e before any term moves it).
// Terms naming many of the run's Pods come first (moving is sorted so): each is applied to
// the order as a slice, in a pass over it. Once the terms name few, the order is held as a
// seq, in which each term moves its k Pods in O(k log n) whatever the run's length: a key
// whose values are on two Pods each would otherwise cost the run's length per value.
func (x *scatterIndex) apply(run []int, moving []int) {
	x.collect(run, moving)
	order := make([]int, len(run))
	for e := range order {
		order[e] = e
	}
	log2 := 1 // the bits of len(run)
	for m := len(run); m > 1; m >>= 1 {
		log2++
	}
	var s *seq
	mark := make([]bool, len(run))
	from := 0
	for _, t := range moving {
		named := x.members[from : from+x.count[t]]
		from += len(named)
		g := groupsFor(x.total[t]-1, x.live-x.total[t], len(named)-1, len(run)-len(named))
		switch {
		case s == nil && len(named)*x.seqFactor*log2 >= len(run):
			order = scatterSlice(order, named, g, mark)
		case s == nil:
			s = newSeq(order)
			fallthrough
		default:
			scatterSeq(s, named, g)
		}
	}
	if s != nil {
		order = s.inOrder()
	}
	before := slices.Clone(run)
	for j, e := range order {
		run[j] = before[e]
	}
}

// collect sets x.members to the Pods each of the terms moving names, as positions in run, one
// term after the other in the order of moving.
func (x *scatterIndex) collect(run []int, moving []int) {
	n := 0
	for _, t := range moving {
		x.next[t] = n
		n += x.count[t]
	}
	x.members = slices.Grow(x.members[:0], n)[:n]
	for e, i := range run {
		x.termsOf(x.pods[i], func(t int) {
			if x.next[t] >= 0 {
				x.members[x.next[t]] = e
				x.next[t]++
			}
		})
	}
}

// scatterSlice spreads named, the elements of order (a slice) that one term names, among the
// others. They are cut into groups, each of a few named elements followed by a few others,
// sized by g so that the named Pods are as dense in the order as they are among all the set's
// Pods (or among the run, when they are denser there); the last named element goes last. It
// is OpenKruise's scatter, so that a set moved from it rolls in the same order. The others
// keep their order, and so do the named elements: where each named element goes is said by
// how many others go before it (groups.before). mark is false for every element, and is left
// so.
func scatterSlice(order, named []int, g groups, mark []bool) []int {
	for _, e := range named {
		mark[e] = true
	}
	inOrder, others := make([]int, 0, len(named)), make([]int, 0, len(order)-len(named))
	for _, e := range order {
		if mark[e] {
			inOrder = append(inOrder, e)
		} else {
			others = append(others, e)
		}
	}
	for _, e := range named {
		mark[e] = false
	}
	out, placed := make([]int, 0, len(order)), 0
	last := len(inOrder) - 1
	for j, e := range inOrder[:last] {
		before := g.before(j, len(others))
		out = append(append(out, others[placed:before]...), e)
		placed = before
	}
	return append(append(out, others[placed:]...), inOrder[last])
}

// scatterSeq is scatterSlice on an order held as a seq: the named elements are taken out, then
// put back in where they go.
func scatterSeq(s *seq, named []int, g groups) {
	at := make([]int, len(named))
	for j, e := range named {
		at[j] = s.rank(e)
	}
	byRank := make([]int, len(named))
	for j := range byRank {
		byRank[j] = j
	}
	slices.SortFunc(byRank, func(a, b int) int { return cmp.Compare(at[a], at[b]) })
	for j := len(byRank) - 1; j >= 0; j-- { // the last first: the places before stay true
		s.remove(named[byRank[j]], at[byRank[j]])
	}
	others, last := s.len(), len(byRank)-1
	for j, e := range byRank[:last] {
		s.insert(named[e], g.before(j, others)+j)
	}
	s.insert(named[byRank[last]], others+last)
}

// groups is how a term's scatter cuts the Pods: lead others first, then n groups of named named
// Pods and others others, then the named Pods no group took, then the others no group took.
type groups struct {
	n, named, others, lead int
}

// before is how many of the others (others of them) go before the named Pod j (from 0, in
// their order; the last named Pod left out).
func (g groups) before(j, others int) int {
	groupsBefore := g.n // not in a group: after every group
	if j < g.n*g.named {
		groupsBefore = j / g.named
	}
	return min(g.lead+groupsBefore*g.others, others)
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
