package inject_test

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/test/builders"
)

// partialSet compiles a set that pins agent:1 with policy Partial while its current spec runs
// agent:2 and a second sidecar, the update strategy changed by strategy.
func partialSet(t *testing.T, strategy func(*appsv1alpha1.UpdateStrategy)) *inject.CompiledSet {
	t.Helper()
	latest := builders.SidecarSet("agent", builders.Selecting("web"), builders.WithImage("registry.example/agent:2"), builders.Rolling())
	latest.Spec.InjectionStrategy.Revision = &appsv1alpha1.RevisionRef{Name: "agent-pinned", Policy: appsv1alpha1.RevisionPolicyPartial}
	if strategy != nil {
		strategy(&latest.Spec.UpdateStrategy)
	}
	pinned := latest.DeepCopy()
	pinned.Spec.Containers[0].Image = "registry.example/agent:1"
	// Only the current spec has it: the record of a pod that got it is trusted for it.
	latest.Spec.Containers = append(latest.Spec.Containers, appsv1alpha1.SidecarContainer{Container: corev1.Container{Name: "agent-logs", Image: "registry.example/logs:1"}})
	cl, err := inject.Compile(latest)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := inject.Compile(pinned)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cp.WithLatest(cl)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPick(t *testing.T) {
	share := func(p string) func(*appsv1alpha1.UpdateStrategy) {
		return func(s *appsv1alpha1.UpdateStrategy) { s.Partition = ptr.To(intstr.FromString(p)) }
	}
	canary := func(s *appsv1alpha1.UpdateStrategy) {
		share("100%")(s)
		s.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"track": "canary"}}
	}
	for _, tc := range []struct {
		name       string
		strategy   func(*appsv1alpha1.UpdateStrategy)
		labels     map[string]string
		recorded   string // "pinned", "latest" or ""
		wantPinned bool
		why        string
	}{
		{name: "no partition: every new pod gets the current spec", wantPinned: false, why: "not below the 0% share"},
		{name: "100%: every new pod gets the pinned revision", strategy: share("100%"), wantPinned: true, why: "below the 100% share"},
		{name: "a number counts as no share", strategy: func(s *appsv1alpha1.UpdateStrategy) { s.Partition = ptr.To(intstr.FromInt32(5)) }, why: "0% share"},
		{name: "paused: the pinned revision", strategy: func(s *appsv1alpha1.UpdateStrategy) { s.Paused = true }, wantPinned: true, why: "paused"},
		{name: "update selector does not match: the pinned revision", strategy: canary, wantPinned: true, why: "selector does not match"},
		{name: "update selector matches: drawn", strategy: canary, labels: map[string]string{"track": "canary"}, wantPinned: true, why: "below the 100% share"},
		{name: "a record of the pinned revision is kept", recorded: "pinned", wantPinned: true, why: "record names the pinned revision"},
		{name: "a record of the current spec is kept", strategy: share("100%"), recorded: "latest", why: "record names the current spec"},
		{name: "a record of another hash is drawn again", strategy: share("100%"), recorded: "0123456789abcdef", wantPinned: true, why: "below the 100% share"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := partialSet(t, tc.strategy)
			labels := map[string]string{"app": "web"}
			for k, v := range tc.labels {
				labels[k] = v
			}
			pod := builders.Pod("ns", "web-1", builders.WithLabels(labels))
			recorded := map[string]string{"pinned": c.Hash, "latest": c.Latest().Hash}[tc.recorded]
			if recorded == "" {
				recorded = tc.recorded
			}
			got, pick := c.Pick(pod, recorded, "uid-1")
			if pick.Pinned != tc.wantPinned || !strings.Contains(pick.Why, tc.why) {
				t.Errorf("Pick = %+v, want pinned %v because of %q", pick, tc.wantPinned, tc.why)
			}
			want := c.Latest()
			if tc.wantPinned {
				want = c
			}
			if got != want {
				t.Errorf("Pick returned the content at hash %s, want %s", got.Hash, want.Hash)
			}
		})
	}
}

// TestPickShare: over many admission requests, the share of pods drawn for the pinned
// revision is the partition's; the keys are fixed, so the outcome is too.
func TestPickShare(t *testing.T) {
	for _, p := range []int{0, 10, 30, 50, 90} {
		c := partialSet(t, func(s *appsv1alpha1.UpdateStrategy) { s.Partition = ptr.To(intstr.FromString(fmt.Sprint(p, "%"))) })
		pod := builders.Pod("ns", "", builders.WithLabels(map[string]string{"app": "web"}))
		const n = 20000
		pinned := 0
		for i := range n {
			if _, pick := c.Pick(pod, "", fmt.Sprintf("%08x-1f2e-4d3c-8b7a-%012x", i*7919, i)); pick.Pinned {
				pinned++
			}
		}
		// The standard deviation at n=20000 is at most 0.36%; 1.5% is over four of them.
		if got := float64(pinned) / n * 100; got < float64(p)-1.5 || got > float64(p)+1.5 {
			t.Errorf("partition %d%%: %.2f%% of pods drawn for the pinned revision", p, got)
		}
	}
}

// TestDraw: the same request always draws the same number, and the set's name takes part, so
// two sets draw a pod independently.
func TestDraw(t *testing.T) {
	if inject.Draw("a", "uid") != inject.Draw("a", "uid") {
		t.Error("Draw is not a function of its arguments")
	}
	same := 0
	for i := range 1000 {
		key := fmt.Sprint("uid-", i)
		if (inject.Draw("a", key) < 0.5) == (inject.Draw("b", key) < 0.5) {
			same++
		}
	}
	if same < 430 || same > 570 {
		t.Errorf("sets a and b drew the same side for %d of 1000 pods, want about 500", same)
	}
}

// TestApplyPartial: the pod's record carries the hash of the content it got, and injecting
// the injected pod again, with another admission request, keeps that content.
func TestApplyPartial(t *testing.T) {
	c := partialSet(t, func(s *appsv1alpha1.UpdateStrategy) { s.Partition = ptr.To(intstr.FromString("50%")) })
	seen := map[string]bool{}
	for i := range 40 {
		pod := builders.Pod("ns", "", builders.WithLabels(map[string]string{"app": "web"}), builders.OptedIn(),
			builders.WithContainers(corev1.Container{Name: "app", Image: "registry.example/app:1"}))
		key := fmt.Sprint("uid-", i)
		res, err := inject.Apply(inject.Input{Pod: pod, Sets: []*inject.CompiledSet{c}, Key: key})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Picks) != 1 || res.Picks[0].SidecarSet != "agent" {
			t.Fatalf("Picks = %+v, want one for agent", res.Picks)
		}
		injected := res.Pod()
		image := injected.Spec.Containers[1].Image
		want := map[bool]*inject.CompiledSet{true: c, false: c.Latest()}[res.Picks[0].Pinned]
		if image != want.Set.Spec.Containers[0].Image || res.Records["agent"].Hash != want.Hash || len(injected.Spec.Containers) != 1+len(want.Set.Spec.Containers) {
			t.Errorf("request %s: pinned=%v, but the pod runs %s and records %s", key, res.Picks[0].Pinned, image, res.Records["agent"].Hash)
		}
		seen[image] = true
		again, err := inject.Apply(inject.Input{Pod: injected, Sets: []*inject.CompiledSet{c}, Key: "another-" + key})
		if err != nil {
			t.Fatal(err)
		}
		if again.Changed() {
			t.Errorf("request %s: injecting the injected pod again changed it: %v", key, again.Patch())
		}
	}
	if len(seen) != 2 {
		t.Errorf("40 draws at 50%% gave only %v", seen)
	}
}
