package rollout

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestSortMatchesReference: the sorter orders random Pods exactly as a straightforward
// reference does (referenceSort: every term walks every Pod, and each term's scatter rebuilds
// the run). The Pods draw their labels from few values, so priorities tie, terms name the same
// number of Pods, and "*" and named terms overlap; some Pods are being deleted, some not
// available; one sorter sorts several lists, as ComputeWaits does.
func TestSortMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 28))
	for n := range 2000 {
		c := randomOrderCase(rng, 1+n%300)
		if err := c.check(); err != nil {
			t.Fatalf("case %d: %v", n, err)
		}
	}
}

// FuzzSortMatchesReference is TestSortMatchesReference on the fuzzer's seeds.
func FuzzSortMatchesReference(f *testing.F) {
	for _, seed := range [][3]uint64{{1, 2, 8}, {3, 4, 40}, {5, 6, 250}, {7, 8, 3}} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, seed1, seed2, size uint64) {
		c := randomOrderCase(rand.New(rand.NewPCG(seed1, seed2)), 1+int(size%400))
		if err := c.check(); err != nil {
			t.Fatal(err)
		}
	})
}

// orderCase is an Order, Pods, and lists of them to sort with one sorter.
type orderCase struct {
	o     Order
	pods  []Pod
	lists [][]int
}

// check sorts each list with one sorter and with the reference, and says where they differ.
// The sorter holds a run's order as a slice or as a seq depending on how many Pods a term
// names (seqFactor): each list is sorted with the planner's factor, with every term on a
// slice, and with every term on a seq.
func (c orderCase) check() error {
	for _, factor := range []int{newScatterIndex(nil, nil).seqFactor, math.MaxInt32, 0} {
		s := c.o.sorter(c.pods)
		if s.scatter != nil {
			s.scatter.seqFactor = factor
		}
		for _, list := range c.lists {
			got, want := slices.Clone(list), slices.Clone(list)
			s.sort(got)
			referenceSort(c.o, c.pods, want)
			if !slices.Equal(got, want) {
				return fmt.Errorf("%s\nsorted %v (seqFactor %d), reference %v", c, got, factor, want)
			}
		}
	}
	return nil
}

func (c orderCase) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "scatter %v, keys %v, %d weights; pods:", c.o.Scatter, c.o.Keys, len(c.o.Weights))
	for i, p := range c.pods {
		fmt.Fprintf(&b, "\n  %d %s available=%v terminating=%v %v", i, p.Key, p.Available, p.Terminating, p.Labels)
	}
	fmt.Fprintf(&b, "\nlists %v", c.lists)
	return b.String()
}

// randomOrderCase draws n Pods and an Order over the keys zone, rack, tier and ord, each
// value from an alphabet of a random size (1 makes every labelled Pod tie).
func randomOrderCase(rng *rand.Rand, n int) orderCase {
	keys := []string{"zone", "rack", "tier", "ord"}
	alphabet := map[string]int{}
	for _, k := range keys {
		alphabet[k] = 1 + rng.IntN(max(1, n/(1+rng.IntN(4))))
	}
	var c orderCase
	for i := range n {
		p := Pod{Key: fmt.Sprintf("ns%d/p%03d", rng.IntN(3), i), Available: rng.IntN(5) > 0, Terminating: rng.IntN(12) == 0,
			Labels: map[string]string{}}
		for _, k := range keys {
			if rng.IntN(4) > 0 {
				p.Labels[k] = fmt.Sprintf("%s-%d", k, rng.IntN(alphabet[k]))
			}
		}
		if rng.IntN(40) == 0 {
			p.Labels["zone"] = AnyValue // a value "*" is a value like any other
		}
		c.pods = append(c.pods, p)
	}
	terms := []ScatterTerm{{"zone", AnyValue}, {"rack", AnyValue}, {"zone", "zone-0"}, {"rack", "rack-1"}, {"tier", "tier-0"},
		{"absent", AnyValue}, {"zone", "none"}, {"zone", AnyValue}}
	for range rng.IntN(4) {
		c.o.Scatter = append(c.o.Scatter, terms[rng.IntN(len(terms))])
	}
	switch rng.IntN(3) {
	case 0:
		for range 1 + rng.IntN(2) {
			c.o.Weights = append(c.o.Weights, weight(int64(rng.IntN(3)), "tier in (tier-0,tier-1)"))
		}
	case 1:
		c.o.Keys = []string{"ord"}
	}
	// Up to three lists, none sharing a Pod, as todo, remedy and resize.
	perm := rng.Perm(n)
	for range 1 + rng.IntN(3) {
		k := rng.IntN(len(perm) + 1)
		c.lists, perm = append(c.lists, perm[:k]), perm[k:]
	}
	return c
}

// referenceSort is the rollout's order written the straightforward way, as the planner had it
// before the sorter: every term walks every Pod, and each term's scatter rebuilds the run. It
// is quadratic in the values of a key, and the sorter must give the same order.
func referenceSort(o Order, pods []Pod, idx []int) {
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
	terms := referenceExpand(o, pods)
	for start := 0; start < len(idx); {
		end := start + 1
		for end < len(idx) && class(idx[start], idx[end]) == 0 {
			end++
		}
		if end-start > 2 {
			copy(idx[start:end], referenceScatter(pods, idx[start:end], terms))
		}
		start = end
	}
}

// referenceExpand replaces each term of value "*" by one term per value of its key among the
// Pods that are not being deleted, in the order of the values; duplicates are dropped.
func referenceExpand(o Order, pods []Pod) []ScatterTerm {
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

func referenceMatches(t ScatterTerm, p Pod) bool {
	v, ok := p.Labels[t.Key]
	return ok && v == t.Value
}

// referenceScatter spreads, term after term, the Pods of idx each term names over idx; with
// several terms, those naming more of these Pods go first (ties keep their order), and terms
// naming none are dropped.
func referenceScatter(pods []Pod, idx []int, terms []ScatterTerm) []int {
	if len(terms) > 1 {
		count := map[ScatterTerm]int{}
		var named []ScatterTerm
		for _, t := range terms {
			for _, i := range idx {
				if referenceMatches(t, pods[i]) {
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
		out = referenceScatterTerm(pods, out, t)
	}
	return out
}

// referenceScatterTerm is OpenKruise's scatter of the Pods of idx that t names.
func referenceScatterTerm(pods []Pod, idx []int, t ScatterTerm) []int {
	var named, others []int
	for _, i := range idx {
		if referenceMatches(t, pods[i]) {
			named = append(named, i)
		} else {
			others = append(others, i)
		}
	}
	if len(named) <= 1 || len(others) <= 1 {
		return idx
	}
	totalNamed, totalOthers := 0, 0
	for _, p := range pods {
		switch {
		case p.Terminating:
		case referenceMatches(t, p):
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
	move := func(src, dst []int, n int) ([]int, []int) {
		n = min(n, len(src))
		return src[n:], append(dst, src[:n]...)
	}
	for range g.n {
		named, out = move(named, out, g.named)
		others, out = move(others, out, g.others)
	}
	return append(append(append(out, named...), others...), last)
}

// TestSeq: the sequence behind scattering against a slice doing the same moves.
func TestSeq(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 7))
	for _, n := range []int{1, 2, 3, 10, 257} {
		want := rng.Perm(n)
		s := newSeq(slices.Clone(want))
		if got := s.inOrder(); !slices.Equal(got, want) || s.len() != n {
			t.Fatalf("n=%d: built %v (%d), want %v", n, got, s.len(), want)
		}
		for range 4 * n {
			e := rng.IntN(n)
			at := slices.Index(want, e)
			if got := s.rank(e); got != at {
				t.Fatalf("n=%d: rank(%d) = %d, want %d", n, e, got, at)
			}
			s.remove(e, at)
			want = slices.Delete(want, at, at+1)
			to := rng.IntN(n)
			s.insert(e, to)
			want = slices.Insert(want, to, e)
			if got := s.inOrder(); !slices.Equal(got, want) {
				t.Fatalf("n=%d: %v, want %v", n, got, want)
			}
		}
	}
}
