package rollout

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
)

func pods(spec string) []Pod {
	// One letter per pod; spaces separate namespaces (ns0, ns1, ...); keys nsN/p00, nsN/p01...
	// in one sequence: u updated, U updated and restarting, N updated and not ready for its own
	// reasons, o old and ready, n old and not
	// ready for its own reasons, r old with its sidecars restarting, x old and ineligible,
	// s old and starting, t terminating, i never injected (ready); to recreate by eviction: e old,
	// m never injected, b old whose workload has a Pod being recreated, E one the rollout
	// evicted (being deleted); z updated whose sidecar must follow an app resize, Z the same
	// and ineligible. A namespace's Pods are one workload.
	var out []Pod
	for ns, group := range strings.Fields(spec) {
		for _, c := range group {
			p := Pod{Key: fmt.Sprintf("ns%d/p%02d", ns, len(out)), Namespace: fmt.Sprintf("ns%d", ns),
				Injected: c != 'i' && c != 'm', Updated: strings.ContainsRune("uUNzZ", c), Available: strings.ContainsRune("uoxiembzZ", c),
				Restarting: strings.ContainsRune("UrE", c), Terminating: c == 't' || c == 'E', Starting: c == 's', Eligible: c != 'x' && c != 'Z',
				Recreate: strings.ContainsRune("emb", c), WorkloadBusy: c == 'b', Resize: c == 'z' || c == 'Z'}
			if p.Recreate {
				p.Workload = p.Namespace
			}
			out = append(out, p)
		}
	}
	return out
}

func intOrString(v intstr.IntOrString) *intstr.IntOrString { return &v }

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
		{"unavailable pods first, then the budget", "oono", Strategy{MaxUnavailable: intOrString(intstr.FromInt32(2))}, []int{2, 0}, 0, 2, 2, false},
		{"maxUnavailable 2", "oooo", Strategy{MaxUnavailable: intOrString(intstr.FromInt32(2))}, []int{0, 1}, 0, 2, 2, false},
		{"maxUnavailable 50% of 5 rounds down", "ooooo", Strategy{MaxUnavailable: intOrString(intstr.FromString("50%"))}, []int{0, 1}, 0, 2, 3, false},
		{"maxUnavailable 10% of 5 is at least 1", "ooooo", Strategy{MaxUnavailable: intOrString(intstr.FromString("10%"))}, []int{0}, 0, 1, 4, false},
		{"pods unavailable for other reasons count", "nnoo", Strategy{MaxUnavailable: intOrString(intstr.FromInt32(2))}, []int{0, 1}, 0, 2, 2, false},
		{"partition keeps the last by key", "oooo", Strategy{Partition: intOrString(intstr.FromInt32(2)), MaxUnavailable: intOrString(intstr.FromInt32(4))}, []int{0, 1}, 2, 4, 0, false},
		{"partition reached", "uuoo", Strategy{Partition: intOrString(intstr.FromInt32(2))}, nil, 2, 1, 0, true},
		{"partition percent rounds up", "ooo", Strategy{Partition: intOrString(intstr.FromString("50%")), MaxUnavailable: intOrString(intstr.FromInt32(3))}, []int{0}, 2, 3, 0, false},
		{"partition larger than the pods", "oo", Strategy{Partition: intOrString(intstr.FromInt32(5))}, nil, 2, 1, 0, true},
		{"new pods count as updated toward the partition", "uuuoo", Strategy{Partition: intOrString(intstr.FromInt32(1))}, []int{3}, 1, 1, 0, false},
		{"paused", "oono", Strategy{Paused: true}, nil, 0, 1, 4, false},
		{"ineligible pods are left", "xoxo", Strategy{MaxUnavailable: intOrString(intstr.FromInt32(4))}, []int{1, 3}, 0, 4, 0, false},
		{"done", "uuxu", Strategy{}, nil, 0, 1, 0, true},
		{"nothing matched", "", Strategy{}, nil, 0, 1, 0, true},
		{"a pod to recreate is picked like the others", "eo", Strategy{MaxUnavailable: intOrString(intstr.FromInt32(2))}, []int{0, 1}, 0, 2, 0, false},
		{"one recreation per workload at a time", "ee o", Strategy{MaxUnavailable: intOrString(intstr.FromInt32(3))}, []int{0, 2}, 0, 3, 1, false},
		{"a workload with a pod being recreated waits", "Eb oo", Strategy{MaxUnavailable: intOrString(intstr.FromInt32(3))}, []int{2, 3}, 0, 3, 1, false},
		{"an evicted pod holds the set-wide budget", "E o", Strategy{}, nil, 0, 1, 1, false},
		{"a recreation no pod shows yet holds the set-wide budget", "o", Strategy{InFlight: 1}, nil, 0, 1, 1, false},
		{"never-injected pods are remediated outside the partition", "um", Strategy{Partition: intOrString(intstr.FromInt32(1))}, []int{1}, 1, 1, 0, false},
		{"never-injected pods without remediation are left", "ui", Strategy{}, nil, 0, 1, 0, true},
		{"a terminating pod holds its namespace's budget", "too", Strategy{}, nil, 0, 1, 2, false},
		{"a terminating pod is not matched", "t ooo", Strategy{MaxUnavailable: intOrString(intstr.FromString("50%"))}, []int{1}, 0, 1, 2, false},
		{"a pod unavailable for its own reasons holds back only its namespace", "No oo", Strategy{}, []int{2}, 0, 1, 2, false},
		{"restarts count in every namespace", "Uo oo", Strategy{}, nil, 0, 1, 3, false},
		{"an old pod whose sidecars restart holds every namespace", "ro oo", Strategy{}, []int{0}, 0, 1, 3, false},
		{"a free update restarts, and then counts everywhere", "no oo", Strategy{MaxUnavailable: intOrString(intstr.FromInt32(2))}, []int{0, 1}, 0, 2, 2, false},
		{"partition counts injected pods only", "iiooo", Strategy{Partition: intOrString(intstr.FromInt32(2)), MaxUnavailable: intOrString(intstr.FromInt32(5))}, []int{2}, 2, 5, 0, false},
		{"pods never injected are not updated", "io", Strategy{}, []int{1}, 0, 1, 0, false},
		{"a starting pod waits and is not free", "s o", Strategy{}, []int{1}, 0, 1, 1, false},
		{"a resize goes first, within the budget", "oz", Strategy{}, []int{1}, 0, 1, 1, false},
		{"a resize counts as updated toward the partition", "uooz", Strategy{Partition: intOrString(intstr.FromInt32(2)), MaxUnavailable: intOrString(intstr.FromInt32(4))}, []int{3}, 2, 4, 0, false},
		{"a resize waits while paused", "zu", Strategy{Paused: true}, nil, 0, 1, 1, false},
		{"an ineligible resize is left", "Zu", Strategy{}, nil, 0, 1, 0, true},
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
		{Partition: intOrString(intstr.FromString("half"))},
		{MaxUnavailable: intOrString(intstr.FromString("10"))},
		{Partition: intOrString(intstr.FromInt32(-1))},
	} {
		if _, err := Compute(pods("oo"), s); err == nil {
			t.Errorf("Compute with %+v: no error", s)
		}
	}
}

// TestRolloutSimulation runs random rollouts step by step (updated pods become available
// after a random delay, some pods fail and never do, other pods are unavailable for reasons of
// their own) and checks at every step: no namespace loses availability beyond the budget, the
// set-wide restarts stay within the budget unless every pod started was already unavailable,
// never more updated than the partition allows, never an ineligible, starting, terminating,
// never-injected or updated pod started, and, when no pod fails and every one is eligible, the
// rollout completes; whatever the priority and scatter order, which orders each Pod to update
// exactly once.
func TestRolloutSimulation(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 25))
	started := 0
	for run := range 500 {
		n := 1 + rng.IntN(40)
		ps := make([]Pod, n)
		failing := make([]bool, n)
		for i := range ps {
			ns := fmt.Sprintf("ns-%d", rng.IntN(3))
			ps[i] = Pod{Key: fmt.Sprintf("%s/p%03d", ns, i), Namespace: ns, Injected: rng.IntN(12) > 0,
				Available: rng.IntN(10) > 0, Eligible: rng.IntN(8) > 0, Terminating: rng.IntN(30) == 0,
				Labels: map[string]string{"zone": fmt.Sprintf("z%d", rng.IntN(3))}}
			failing[i] = rng.IntN(15) == 0
		}
		s := Strategy{}
		if rng.IntN(2) == 0 {
			s.MaxUnavailable = intOrString(intstr.FromInt32(int32(1 + rng.IntN(5))))
		} else {
			s.MaxUnavailable = intOrString(intstr.FromString(fmt.Sprintf("%d%%", 1+rng.IntN(60))))
		}
		if rng.IntN(2) == 0 {
			s.Partition = intOrString(intstr.FromInt32(int32(rng.IntN(n + 2))))
		}
		switch rng.IntN(3) {
		case 1:
			s.Order.Weights = []WeightTerm{weight(int64(rng.IntN(101)), "zone=z0"), weight(int64(rng.IntN(101)), "zone in (z1,z2)")}
		case 2:
			s.Order.Scatter = []ScatterTerm{{"zone", AnyValue}}
		}
		updating := map[int]int{} // pod -> steps until available
		for step := 0; step < 20*n+20; step++ {
			before, err := Compute(ps, s)
			if err != nil {
				t.Fatal(err)
			}
			if todo := countPods(ps, func(p Pod) bool { return p.Injected && p.Eligible && !p.Updated && !p.Terminating }); len(before.Order) != todo ||
				len(slices.Compact(slices.Sorted(slices.Values(before.Order)))) != todo {
				t.Fatalf("run %d step %d: order %v is not each of the %d pods to update once", run, step, before.Order, todo)
			}
			unavailableBefore := unavailableByNamespace(ps)
			free := 0
			for _, i := range before.Update {
				p := ps[i]
				if p.Updated || !p.Eligible || p.Starting || p.Terminating || !p.Injected {
					t.Fatalf("run %d step %d: planned %+v", run, step, p)
				}
				if !p.Available {
					free++
				}
				ps[i].Updated, ps[i].Available, ps[i].Restarting = true, false, true
				updating[i] = 1 + rng.IntN(3)
				started++
			}
			if len(before.Update) > 0 {
				for ns, after := range unavailableByNamespace(ps) {
					if after > max(before.MaxUnavailable, unavailableBefore[ns]) {
						t.Fatalf("run %d step %d: %s has %d unavailable after starting %v with budget %d (%d before)",
							run, step, ns, after, before.Update, before.MaxUnavailable, unavailableBefore[ns])
					}
				}
				if restarting := countPods(ps, func(p Pod) bool { return p.Restarting }); restarting > max(before.MaxUnavailable, before.Restarting+free) {
					t.Fatalf("run %d step %d: %d restarting after starting %v with budget %d", run, step, restarting, before.Update, before.MaxUnavailable)
				}
				injected := countPods(ps, func(p Pod) bool { return p.Injected && !p.Terminating })
				if updated := countPods(ps, func(p Pod) bool { return p.Updated && !p.Terminating }); updated > injected-before.Keep {
					t.Fatalf("run %d step %d: %d updated, partition keeps %d of %d injected", run, step, updated, before.Keep, injected)
				}
			}
			for i, left := range updating {
				if left--; left == 0 && !failing[i] {
					ps[i].Available, ps[i].Restarting = true, false
					delete(updating, i)
				} else {
					updating[i] = left
				}
			}
		}
		final, _ := Compute(ps, s)
		allGood := !slices.Contains(failing, true)
		for _, p := range ps {
			// A pod unavailable for its own reasons (terminating pods included: they stay) holds
			// its namespace back for good.
			allGood = allGood && (p.Eligible || !p.Injected) && (p.Available || p.Updated) && !p.Terminating
		}
		if allGood && !final.Done() {
			t.Errorf("run %d: rollout of %d pods did not complete: %+v", run, n, final)
		}
	}
	if started < 1000 {
		t.Fatalf("the simulation started only %d updates: it tests nothing", started)
	}
	t.Logf("%d updates started over 500 random rollouts", started)
}

func unavailableByNamespace(ps []Pod) map[string]int {
	out := map[string]int{}
	for _, p := range ps {
		if !p.Available || p.Terminating || p.Restarting {
			out[p.Namespace]++
		}
	}
	return out
}

func countPods(ps []Pod, f func(Pod) bool) int {
	n := 0
	for _, p := range ps {
		if f(p) {
			n++
		}
	}
	return n
}

func TestComputeNamesTheNamespacesHeldBack(t *testing.T) {
	p, err := Compute(pods("No oo nooo"), Strategy{MaxUnavailable: intOrString(intstr.FromInt32(2))})
	if err != nil {
		t.Fatal(err)
	}
	// ns2's not-ready pod is free and then restarts; with ns1's update that is the budget.
	if !slices.Equal(p.Update, []int{4, 2}) || !slices.Equal(p.HeldBack, []string{"ns0"}) || p.HeldBackPods != 1 {
		t.Errorf("Compute = update %v held back %v", p.Update, p.HeldBack)
	}
}

// TestComputeWaits: every eligible Pod still to update that Compute does not pick is named
// once with why it waits, and the Pods it picks, the ones already updated, the ineligible and
// the ones never to update are not.
func TestComputeWaits(t *testing.T) {
	tests := []struct {
		name string
		pods string
		s    Strategy
		// want: one word per pod: now (picked), - (not named), or its wait reason (held: held
		// back by its namespace).
		want string
	}{
		{"budget", "ooo", Strategy{}, "now budget budget"},
		{"paused before starting", "os", Strategy{Paused: true}, "paused paused"},
		{"starting", "s o", Strategy{}, "starting now"},
		{"partition keeps the last by key", "oooo", Strategy{Partition: intOrString(intstr.FromInt32(2)), MaxUnavailable: intOrString(intstr.FromInt32(4))}, "now now partition partition"},
		{"partition, budget and ineligible", "uoxoo", Strategy{Partition: intOrString(intstr.FromInt32(2))}, "- now - budget partition"},
		{"one recreation per workload", "ee o", Strategy{MaxUnavailable: intOrString(intstr.FromInt32(3))}, "now workload-busy now"},
		{"busy workload", "Eb o", Strategy{MaxUnavailable: intOrString(intstr.FromInt32(3))}, "- workload-busy now"},
		{"held back by its namespace", "No oo", Strategy{}, "- held now budget"},
		{"never injected: remediated or left", "im", Strategy{}, "- now"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := pods(tt.pods)
			p, waits, err := ComputeWaits(ps, tt.s)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]string, len(ps))
			for i := range got {
				got[i] = "-"
			}
			for _, i := range p.Update {
				got[i] = "now"
			}
			for _, w := range waits {
				if got[w.Pod] != "-" {
					t.Fatalf("pod %d named twice: %s and %+v", w.Pod, got[w.Pod], w)
				}
				got[w.Pod] = strings.ReplaceAll(string(w.Reason), " ", "-")
				if w.HeldBack {
					got[w.Pod] = "held"
				}
			}
			if s := strings.Join(got, " "); s != tt.want {
				t.Errorf("ComputeWaits(%q) = %s; want %s", tt.pods, s, tt.want)
			}
			if wait := countWaits(waits, func(w Wait) bool { return w.Reason != WaitPartition }); wait != p.Waiting {
				t.Errorf("%d waits besides the partition's, Plan.Waiting %d", wait, p.Waiting)
			}
		})
	}
}

func countWaits(ws []Wait, f func(Wait) bool) int {
	n := 0
	for _, w := range ws {
		if f(w) {
			n++
		}
	}
	return n
}
