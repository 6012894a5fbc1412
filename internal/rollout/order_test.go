package rollout

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// labelled gives pods (from the pods spec) the labels in spec: one entry per pod, separated by
// spaces, "-" for none, else comma-separated key=value pairs.
func labelled(ps []Pod, spec string) []Pod {
	for i, entry := range strings.Fields(spec) {
		if entry == "-" {
			continue
		}
		ps[i].Labels = map[string]string{}
		for _, kv := range strings.Split(entry, ",") {
			k, v, _ := strings.Cut(kv, "=")
			ps[i].Labels[k] = v
		}
	}
	return ps
}

func weight(w int64, selector string) WeightTerm {
	s, err := labels.Parse(selector)
	if err != nil {
		panic(err)
	}
	return WeightTerm{Weight: w, Selector: s}
}

// TestComputeOrder: the order the planner takes the Pods in (Plan.Order) and the Pods it
// updates now (Plan.Update) under a priority and scatter order, with availability first and
// the budget and partition as without.
func TestComputeOrder(t *testing.T) {
	tierWeights := Order{Weights: []WeightTerm{weight(60, "tier=high"), weight(30, "zone=a")}}
	tests := []struct {
		name   string
		pods   string
		labels string
		s      Strategy
		order  []int
		update []int
	}{
		{name: "no order: namespace/name", pods: "oooo", labels: "tier=high zone=a - tier=high,zone=a",
			order: []int{0, 1, 2, 3}, update: []int{0}},
		{name: "weights: the sum of the matching terms, highest first", pods: "oooo", labels: "tier=high zone=a - tier=high,zone=a",
			s: Strategy{Order: tierWeights}, order: []int{3, 0, 1, 2}, update: []int{3}},
		{name: "weights: equal sums keep namespace/name", pods: "oooo", labels: "zone=a tier=high zone=a tier=high",
			s: Strategy{Order: tierWeights}, order: []int{1, 3, 0, 2}, update: []int{1}},
		{name: "weights: a weight of 0 changes nothing", pods: "ooo", labels: "- zone=a -",
			s: Strategy{Order: Order{Weights: []WeightTerm{weight(0, "zone=a")}}}, order: []int{0, 1, 2}, update: []int{0}},
		{name: "weights: set-based selectors", pods: "ooo", labels: "zone=c zone=b zone=a",
			s: Strategy{Order: Order{Weights: []WeightTerm{weight(10, "zone in (a,b)"), weight(5, "zone notin (a)")}}}, order: []int{1, 2, 0}, update: []int{1}},
		{name: "unavailable pods first, whatever their priority", pods: "oono", labels: "- tier=high - tier=high",
			s: Strategy{Order: tierWeights}, order: []int{2, 1, 3, 0}, update: []int{2}},
		{name: "the budget goes to the highest priorities", pods: "ooooo", labels: "zone=a - tier=high tier=high,zone=a -",
			s: Strategy{Order: tierWeights, MaxUnavailable: intOrString(intstr.FromInt32(2))}, order: []int{3, 2, 0, 1, 4}, update: []int{3, 2}},
		{name: "the partition keeps the lowest priorities", pods: "oooo", labels: "- tier=high - tier=high",
			s: Strategy{Order: tierWeights, Partition: intOrString(intstr.FromInt32(2)), MaxUnavailable: intOrString(intstr.FromInt32(4))}, order: []int{1, 3, 0, 2}, update: []int{1, 3}},
		{name: "updated and ineligible pods are not ordered", pods: "uxoo", labels: "tier=high tier=high - tier=high",
			s: Strategy{Order: tierWeights}, order: []int{3, 2}, update: []int{3}},
		{name: "pods to remediate after those in place, each by priority", pods: "mmoo", labels: "- tier=high - tier=high",
			s: Strategy{Order: tierWeights, MaxUnavailable: intOrString(intstr.FromInt32(2))}, order: []int{3, 2, 1, 0}, update: []int{3, 2}},
		{name: "keys: the number a value ends with, highest first", pods: "oooo", labels: "ord=sts-9 ord=sts-10 ord=2 ord=sts-0",
			s: Strategy{Order: Order{Keys: []string{"ord"}}}, order: []int{1, 0, 2, 3}, update: []int{1}},
		{name: "keys: a value without a final number counts as 0", pods: "ooo", labels: "ord=a ord=1 ord=3b",
			s: Strategy{Order: Order{Keys: []string{"ord"}}}, order: []int{1, 0, 2}, update: []int{1}},
		{name: "keys: a number too large counts as 0", pods: "ooo", labels: "ord=99999999999999999999 ord=1 ord=0",
			s: Strategy{Order: Order{Keys: []string{"ord"}}}, order: []int{1, 0, 2}, update: []int{1}},
		{name: "keys: the first key first, then the second, then none", pods: "ooooo", labels: "- second=9 first=1 first=2,second=50 second=10",
			s: Strategy{Order: Order{Keys: []string{"first", "second"}}}, order: []int{3, 2, 4, 1, 0}, update: []int{3}},
		{name: "keys: ignored when there are weights", pods: "ooo", labels: "ord=1 ord=2 ord=3,zone=a",
			s: Strategy{Order: Order{Weights: []WeightTerm{weight(1, "zone=a")}, Keys: []string{"ord"}}}, order: []int{2, 0, 1}, update: []int{2}},
		{name: "scatter: spread over the pods of equal priority, not over the others", pods: "oooooooo",
			labels: "tier=high,zone=a tier=high,zone=a tier=high tier=high zone=a zone=a - -",
			s:      Strategy{Order: Order{Weights: []WeightTerm{weight(60, "tier=high")}, Scatter: []ScatterTerm{{"zone", "a"}}}},
			order:  []int{2, 0, 3, 1, 6, 4, 7, 5}, update: []int{2}},
		{name: "scatter: unavailable pods first, spread among themselves", pods: "ooooonnnn",
			labels: "zone=a zone=a - - - zone=a zone=a - -",
			s:      Strategy{Order: Order{Scatter: []ScatterTerm{{"zone", "a"}}}},
			order:  []int{5, 7, 8, 6, 2, 0, 3, 4, 1}, update: []int{5, 7, 8, 6}},
		{name: "scatter: zone=* spreads every zone", pods: "ooooooooo",
			labels: "zone=a zone=a zone=a zone=b zone=b zone=b zone=c zone=c zone=c",
			s:      Strategy{Order: Order{Scatter: []ScatterTerm{{"zone", AnyValue}}}},
			order:  []int{6, 3, 0, 1, 7, 4, 2, 5, 8}, update: []int{6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := labelled(pods(tt.pods), tt.labels)
			p, err := Compute(ps, tt.s)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.Order, tt.order) || !slices.Equal(p.Update, tt.update) {
				t.Errorf("order %v, update %v; want %v, %v", p.Order, p.Update, tt.order, tt.update)
			}
		})
	}
}

// TestScatterAsOpenKruise: one scatter order over Pods of equal availability and priority is
// OpenKruise's (the expected orders are those of its scatter tests), so a SidecarSet moved
// from it updates its Pods in the same order. Labels: a is labelA=AAA, b labelB=BBB, c
// labelC=CCC, x another label, - none; the Pods after the first `waiting` are already updated
// and count only toward the density of the scattered Pods.
func TestScatterAsOpenKruise(t *testing.T) {
	a, b, c := ScatterTerm{"labelA", "AAA"}, ScatterTerm{"labelB", "BBB"}, ScatterTerm{"labelC", "CCC"}
	tests := []struct {
		labels  string
		terms   []ScatterTerm
		waiting int // 0: all
		want    []int
	}{
		{"-", []ScatterTerm{a}, 0, []int{0}},
		{"a", []ScatterTerm{a}, 0, []int{0}},
		{"a x", []ScatterTerm{a}, 0, []int{0, 1}},
		{"- - - - a a", []ScatterTerm{a}, 0, []int{4, 0, 1, 2, 3, 5}},
		{"- - - a a a", []ScatterTerm{a}, 0, []int{3, 0, 1, 4, 2, 5}},
		{"- - - a - - a", []ScatterTerm{a}, 0, []int{3, 0, 1, 2, 4, 5, 6}},
		{"- - - - - - a a a", []ScatterTerm{a}, 0, []int{6, 0, 1, 2, 7, 3, 4, 5, 8}},
		{"- - a a a a", []ScatterTerm{a}, 0, []int{2, 3, 0, 4, 1, 5}},
		{"- - a - a a a a a", []ScatterTerm{a}, 0, []int{2, 4, 0, 5, 6, 1, 7, 3, 8}},
		{"- a - a - - a a a", []ScatterTerm{a}, 0, []int{1, 0, 3, 2, 6, 4, 7, 5, 8}},
		{"- - - - x x - a a a,b", []ScatterTerm{a}, 0, []int{7, 0, 1, 2, 3, 8, 4, 5, 6, 9}},
		{"- - - - x x b a a a,b", []ScatterTerm{b}, 0, []int{6, 0, 1, 2, 3, 4, 5, 7, 8, 9}},
		{"b b - - a a", []ScatterTerm{a, b}, 0, []int{0, 4, 2, 3, 5, 1}},
		{"- - - b a,b a", []ScatterTerm{a, b}, 0, []int{4, 0, 1, 2, 5, 3}},
		{"- - - - x x b a a b", []ScatterTerm{b, a}, 0, []int{7, 6, 0, 1, 2, 3, 4, 5, 9, 8}},
		{"- - - - x x b a a b", []ScatterTerm{a, b}, 0, []int{6, 7, 0, 1, 2, 3, 4, 5, 8, 9}},
		{"- - - - x x a,b - - a,b", []ScatterTerm{a, b}, 0, []int{6, 0, 1, 2, 3, 4, 5, 7, 8, 9}},
		{"- - - a x x a,b - - -", []ScatterTerm{a, b}, 8, []int{3, 0, 1, 2, 4, 5, 7, 6}},
		{"- - - a - - x x a,b - - a,b", []ScatterTerm{a, b}, 11, []int{0, 1, 2, 4, 3, 5, 6, 7, 9, 10, 8}},
		{"- - - a a,x x a,b - - a,b", []ScatterTerm{a, b}, 0, []int{6, 3, 0, 1, 4, 2, 5, 7, 8, 9}},
		{"- a a x x a,b - - a,b", []ScatterTerm{a, b}, 0, []int{5, 1, 0, 3, 2, 4, 6, 7, 8}},
		{"a - - a a,x x a,b - - a,b", []ScatterTerm{a, b}, 8, []int{1, 0, 2, 3, 5, 4, 7, 6}},
		{"- - a a - a x x a,b - - a,b", []ScatterTerm{a, b}, 11, []int{0, 2, 1, 4, 3, 6, 7, 5, 9, 10, 8}},
		{"- a a b b c c c c c", []ScatterTerm{a, b, c}, 0, []int{3, 1, 5, 0, 6, 7, 8, 9, 2, 4}},
		{"- a a,c b,c b - - c c c", []ScatterTerm{a, b, c}, 0, []int{3, 2, 0, 7, 8, 5, 6, 9, 1, 4}},
		{"- - - - a a a", []ScatterTerm{a}, 6, []int{0, 1, 4, 2, 3, 5}},
		{"a a - - - - - - - a", []ScatterTerm{a}, 7, []int{2, 0, 3, 4, 5, 6, 1}},
	}
	for _, tt := range tests {
		var entries []string
		for _, f := range strings.Fields(tt.labels) {
			var kv []string
			for _, r := range f {
				kv = append(kv, map[rune]string{'a': "labelA=AAA", 'b': "labelB=BBB", 'c': "labelC=CCC", 'x': "other=value", '-': "-"}[r])
			}
			entries = append(entries, strings.Join(kv, ","))
		}
		spec := strings.ReplaceAll(strings.Join(entries, " "), ",,", ",")
		n := len(entries)
		waiting := n
		if tt.waiting > 0 {
			waiting = tt.waiting
		}
		ps := labelled(pods(strings.Repeat("o", waiting)+strings.Repeat("u", n-waiting)), spec)
		p, err := Compute(ps, Strategy{Order: Order{Scatter: tt.terms}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(p.Order, tt.want) {
			t.Errorf("%s scattered by %v (%d waiting): %v, want %v", tt.labels, tt.terms, waiting, p.Order, tt.want)
		}
	}
}

func TestTrailingNumber(t *testing.T) {
	for in, want := range map[string]int64{"": 0, "5": 5, "sts-10": 10, "a5b": 0, "a-007": 7, "x": 0, "9223372036854775807": 9223372036854775807,
		"9223372036854775808": 0, "-3": 3} {
		if got := trailingNumber(in); got != want {
			t.Errorf("trailingNumber(%q) = %d, want %d", in, got, want)
		}
	}
}

// TestOrderKeepsLabels: ordering reads the Pods' labels and never writes them.
func TestOrderKeepsLabels(t *testing.T) {
	ps := labelled(pods("oooo"), "zone=a zone=b zone=a zone=b")
	before := make([]map[string]string, len(ps))
	for i, p := range ps {
		before[i] = map[string]string{"zone": p.Labels["zone"]}
	}
	if _, err := Compute(ps, Strategy{Order: Order{Scatter: []ScatterTerm{{"zone", AnyValue}}, Weights: []WeightTerm{weight(1, "zone=a")}}}); err != nil {
		t.Fatal(err)
	}
	for i, p := range ps {
		if len(p.Labels) != 1 || p.Labels["zone"] != before[i]["zone"] {
			t.Errorf("pod %d labels changed: %v", i, p.Labels)
		}
	}
}
