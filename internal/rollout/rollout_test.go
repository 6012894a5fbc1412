package rollout

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
)

func pods(spec string) []Pod {
	// One letter per pod, keyed ns/p00, ns/p01...: u updated, n not ready (old), U updated not
	// available, o old and ready, x old and ineligible.
	out := make([]Pod, len(spec))
	for i, c := range spec {
		out[i] = Pod{Key: fmt.Sprintf("ns/p%02d", i), Updated: c == 'u' || c == 'U', Available: c == 'u' || c == 'o' || c == 'x', Eligible: c != 'x'}
	}
	return out
}

func ptr(v intstr.IntOrString) *intstr.IntOrString { return &v }

func TestCompute(t *testing.T) {
	tests := []struct {
		name       string
		pods       string
		s          Strategy
		want       []int
		wantKeep   int
		wantBudget int
		wantWait   int
		wantDone   bool
	}{
		{"default: one at a time", "oooo", Strategy{}, []int{0}, 0, 1, 3, false},
		{"budget in use by an update in flight", "Uooo", Strategy{}, nil, 0, 1, 3, false},
		{"unavailable pods first, and free", "oono", Strategy{}, []int{2}, 0, 1, 3, false},
		{"unavailable pods first, then the budget", "oono", Strategy{MaxUnavailable: ptr(intstr.FromInt32(2))}, []int{2, 0}, 0, 2, 2, false},
		{"maxUnavailable 2", "oooo", Strategy{MaxUnavailable: ptr(intstr.FromInt32(2))}, []int{0, 1}, 0, 2, 2, false},
		{"maxUnavailable 50% of 5 rounds down", "ooooo", Strategy{MaxUnavailable: ptr(intstr.FromString("50%"))}, []int{0, 1}, 0, 2, 3, false},
		{"maxUnavailable 10% of 5 is at least 1", "ooooo", Strategy{MaxUnavailable: ptr(intstr.FromString("10%"))}, []int{0}, 0, 1, 4, false},
		{"pods unavailable for other reasons count", "nnoo", Strategy{MaxUnavailable: ptr(intstr.FromInt32(2))}, []int{0, 1}, 0, 2, 2, false},
		{"partition keeps the last by key", "oooo", Strategy{Partition: ptr(intstr.FromInt32(2)), MaxUnavailable: ptr(intstr.FromInt32(4))}, []int{0, 1}, 2, 4, 0, false},
		{"partition reached", "uuoo", Strategy{Partition: ptr(intstr.FromInt32(2))}, nil, 2, 1, 0, true},
		{"partition percent rounds up", "ooo", Strategy{Partition: ptr(intstr.FromString("50%")), MaxUnavailable: ptr(intstr.FromInt32(3))}, []int{0}, 2, 3, 0, false},
		{"partition larger than the pods", "oo", Strategy{Partition: ptr(intstr.FromInt32(5))}, nil, 2, 1, 0, true},
		{"new pods count as updated toward the partition", "uuuoo", Strategy{Partition: ptr(intstr.FromInt32(1))}, []int{3}, 1, 1, 0, false},
		{"paused", "oono", Strategy{Paused: true}, nil, 0, 1, 4, false},
		{"ineligible pods are left", "xoxo", Strategy{MaxUnavailable: ptr(intstr.FromInt32(4))}, []int{1, 3}, 0, 4, 0, false},
		{"done", "uuxu", Strategy{}, nil, 0, 1, 0, true},
		{"nothing matched", "", Strategy{}, nil, 0, 1, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Compute(pods(tt.pods), tt.s)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.Update, tt.want) || p.Keep != tt.wantKeep || p.MaxUnavailable != tt.wantBudget || p.Waiting != tt.wantWait || p.Done() != tt.wantDone {
				t.Errorf("Compute(%q) = update %v keep %d budget %d waiting %d done %v; want %v %d %d %d %v",
					tt.pods, p.Update, p.Keep, p.MaxUnavailable, p.Waiting, p.Done(), tt.want, tt.wantKeep, tt.wantBudget, tt.wantWait, tt.wantDone)
			}
		})
	}
}

func TestComputeRefusesBadValues(t *testing.T) {
	for _, s := range []Strategy{
		{Partition: ptr(intstr.FromString("half"))},
		{MaxUnavailable: ptr(intstr.FromString("10"))},
		{Partition: ptr(intstr.FromInt32(-1))},
	} {
		if _, err := Compute(pods("oo"), s); err == nil {
			t.Errorf("Compute with %+v: no error", s)
		}
	}
}

// TestRolloutSimulation runs random rollouts step by step (updated pods become available
// after a random delay, some pods fail and never do, other pods go unready and back) and
// checks at every step: no update beyond the budget unless every pod started was already
// unavailable, never more updated than the partition allows, never an ineligible or updated
// pod, and, when no pod fails and none is ineligible, the rollout completes.
func TestRolloutSimulation(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 25))
	for run := range 500 {
		n := 1 + rng.IntN(40)
		ps := make([]Pod, n)
		failing := make([]bool, n)
		for i := range ps {
			ps[i] = Pod{Key: fmt.Sprintf("ns-%d/p%03d", rng.IntN(3), rng.IntN(1000)), Available: rng.IntN(10) > 0, Eligible: rng.IntN(8) > 0}
			failing[i] = rng.IntN(15) == 0
		}
		s := Strategy{}
		if rng.IntN(2) == 0 {
			s.MaxUnavailable = ptr(intstr.FromInt32(int32(1 + rng.IntN(5))))
		} else {
			s.MaxUnavailable = ptr(intstr.FromString(fmt.Sprintf("%d%%", 1+rng.IntN(60))))
		}
		if rng.IntN(2) == 0 {
			s.Partition = ptr(intstr.FromInt32(int32(rng.IntN(n + 2))))
		}
		updating := map[int]int{} // pod -> steps until available
		for step := 0; step < 20*n+20; step++ {
			before, err := Compute(ps, s)
			if err != nil {
				t.Fatal(err)
			}
			unavailable := before.Unavailable
			for _, i := range before.Update {
				switch {
				case ps[i].Updated || !ps[i].Eligible:
					t.Fatalf("run %d step %d: planned %+v", run, step, ps[i])
				case ps[i].Available:
					unavailable++
				}
				ps[i].Updated, ps[i].Available = true, false
				updating[i] = 1 + rng.IntN(3)
			}
			if len(before.Update) > 0 && unavailable > max(before.MaxUnavailable, before.Unavailable) {
				t.Fatalf("run %d step %d: %d unavailable after starting %v with budget %d (%d before)", run, step, unavailable, before.Update, before.MaxUnavailable, before.Unavailable)
			}
			updated := 0
			for _, p := range ps {
				if p.Updated {
					updated++
				}
			}
			if updated > n-before.Keep && len(before.Update) > 0 {
				t.Fatalf("run %d step %d: %d updated, partition keeps %d of %d", run, step, updated, before.Keep, n)
			}
			for i, left := range updating {
				if left--; left == 0 && !failing[i] {
					ps[i].Available = true
					delete(updating, i)
				} else {
					updating[i] = left
				}
			}
		}
		final, _ := Compute(ps, s)
		allGood := !slices.Contains(failing, true)
		for _, p := range ps {
			allGood = allGood && p.Eligible
		}
		if allGood && !final.Done() {
			t.Errorf("run %d: rollout of %d pods did not complete: %+v", run, n, final)
		}
	}
}
