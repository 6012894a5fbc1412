package rollout

import (
	"fmt"
	"testing"
)

// BenchmarkScatterAnyValue plans a rollout under scatterStrategy {key: k, value: "*"} over
// Pods whose label k takes 1,000, 4,000 or 16,000 distinct values: the values are chosen by
// the Pods' authors, so the plan must not grow faster than the Pods and values do. With one
// Pod per value (values=N) no term names two Pods, so none moves any; with two (values=N,pairs)
// every term moves its two. values=3,pods=12000 is the usual case: a few zones, each on many
// Pods.
func BenchmarkScatterAnyValue(b *testing.B) {
	for _, c := range []struct{ values, perValue int }{
		{1000, 1}, {4000, 1}, {16000, 1}, {1000, 2}, {4000, 2}, {16000, 2}, {3, 4000},
	} {
		name := fmt.Sprintf("values=%d", c.values)
		switch {
		case c.perValue == 2:
			name += ",pairs"
		case c.perValue > 2:
			name += fmt.Sprintf(",pods=%d", c.values*c.perValue)
		}
		ps := anyValuePods(c.values, c.perValue)
		s := Strategy{Order: Order{Scatter: []ScatterTerm{{Key: "k", Value: AnyValue}}}}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, err := Compute(ps, s)
				if err != nil || len(p.Order) != len(ps) {
					b.Fatalf("plan of %d pods: %d ordered, %v", len(ps), len(p.Order), err)
				}
			}
		})
	}
}

// anyValuePods are values*perValue ready, injected, outdated Pods; label k takes values
// distinct values, each on perValue Pods spread apart in namespace/name order.
func anyValuePods(values, perValue int) []Pod {
	ps := make([]Pod, values*perValue)
	for i := range ps {
		ps[i] = Pod{Key: fmt.Sprintf("ns/p-%06d", i), Namespace: "ns", Injected: true, Available: true, Eligible: true,
			Labels: map[string]string{"k": fmt.Sprintf("v-%06d", i%values)}}
	}
	return ps
}
