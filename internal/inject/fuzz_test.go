package inject_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/inject/injecttest"
	"github.com/sidecarset/sidecarset-operator/internal/podrules"
)

// FuzzApply builds a Pod, its namespace's labels and up to three SidecarSets from the fuzzed
// bytes (the shape) and string (free text for values), and checks the engine's invariants.
// Names come from small vocabularies so that clashes, shared volumes, re-entries and stale
// records are frequent. Inputs are built afresh for every run, twice: one copy for Apply, one
// for the re-entry.
func FuzzApply(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s.shape, s.text)
	}
	f.Fuzz(func(t *testing.T, shape []byte, text string) {
		in := injecttest.Generate(t, shape, text)
		again := injecttest.Generate(t, shape, text)
		checkApplyInvariants(t, in, again)
	})
}

// fuzzSeeds are FuzzApply's seed corpus.
var fuzzSeeds = []struct {
	shape []byte
	text  string
}{
	{nil, ""},
	{[]byte{0, 0, 0, 1, 1, 2, 0, 3, 1, 1, 0, 2, 1, 1, 0, 0, 1}, "info"},
	// An earlier injection by other SidecarSets, then today's.
	{[]byte{1, 0, 1, 2, 3, 1, 1, 1, 2, 0, 1, 1, 2, 1, 0, 2, 3, 1, 0, 1, 1, 2, 2, 1, 0, 3, 1, 2, 0, 1, 1, 0, 2, 1}, "checkout"},
	// An earlier injection by today's sets, unpaused: paused sets keep what they added.
	{[]byte{2, 1, 0, 1, 1, 2, 1, 1, 3, 2, 1, 0, 1, 2, 1, 4, 1, 1, 0, 2, 1, 1, 1, 1, 0, 1, 2, 3}, "eu-west-1"},
	// A status annotation written by hand.
	{[]byte{3, 2, 1, 0, 1, 1, 2, 2, 1}, `{"set-a":{"hash":"0","containers":["proxy"],"volumes":["data"]}}`},
	{[]byte{3, 0, 0, 0}, `{"set-a":`},
	// A pod whose annotations set overrides of the sets: valid, and
	// the values recorded (TestFuzzSeedsHoldValidInputs).
	{[]byte{0x4, 0x4, 0x2, 0x2, 0x5, 0x5, 0x1, 0x0, 0x0, 0x2, 0x4, 0x0, 0x3, 0x5, 0x5, 0x4, 0x4, 0x4, 0x5, 0x0, 0x1, 0x3, 0x1, 0x5, 0x1, 0x1, 0x4, 0x2, 0x0, 0x4, 0x4, 0x3, 0x4, 0x2, 0x1, 0x0, 0x4, 0x4, 0x2, 0x5, 0x4, 0x5, 0x2, 0x4, 0x5, 0x0, 0x0, 0x2, 0x5, 0x3, 0x4, 0x1, 0x4, 0x4, 0x0, 0x3, 0x1, 0x0, 0x5, 0x3, 0x0, 0x0, 0x4, 0x5, 0x2, 0x0, 0x2, 0x4, 0x0, 0x0, 0x3, 0x0, 0x3, 0x5, 0x4, 0x1, 0x3, 0x4, 0x0, 0x0, 0x2, 0x0, 0x4, 0x1, 0x2, 0x3, 0x0, 0x3, 0x5, 0x5, 0x5, 0x5, 0x1, 0x2, 0x5, 0x4, 0x3, 0x0, 0x3, 0x0, 0x2, 0x0, 0x4, 0x1, 0x2, 0x1, 0x3, 0x4, 0x2, 0x1, 0x0, 0x1, 0x2, 0x1, 0x1, 0x2, 0x2, 0x1, 0x2, 0x3, 0x1, 0x2, 0x4, 0x5, 0x4, 0x3, 0x0, 0x1, 0x2, 0x4, 0x0, 0x1, 0x3, 0x4, 0x4, 0x3, 0x5, 0x0, 0x0, 0x0, 0x4, 0x0, 0x4, 0x2, 0x1, 0x2, 0x0, 0x1, 0x0, 0x3, 0x4, 0x5, 0x4, 0x4, 0x0, 0x5, 0x3, 0x4, 0x2, 0x2, 0x2, 0x5, 0x4, 0x2, 0x2, 0x3, 0x1, 0x5, 0x2, 0x4, 0x0, 0x1, 0x3, 0x2, 0x2, 0x3, 0x4, 0x1, 0x5, 0x4, 0x0, 0x4, 0x4, 0x2, 0x1, 0x0, 0x5, 0x2, 0x5, 0x3, 0x5, 0x4, 0x5, 0x1, 0x1, 0x0, 0x2, 0x5, 0x3, 0x5}, "x"},
	{[]byte{7, 255, 128, 64, 32, 16, 8, 4, 2, 1, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97}, "fuzz"},
}

// checkApplyInvariants applies the engine to in and checks what must hold for any input;
// again is an identical, independent input used for the re-entry.
func checkApplyInvariants(t *testing.T, in, again inject.Input) {
	t.Helper()
	before := snapshotInput(in)
	res, err := inject.Apply(in)
	if err != nil {
		_ = requireRefused(t, err) // the check is what matters here
		before.assertUnchanged(t, in)
		return
	}
	out := res.Pod()
	own := ownContent(t, in.Pod, in.Sets)
	assertOwnContentKept(t, in.Pod, out, own)
	assertUniqueNames(t, out)
	assertEverythingAddedIsRecorded(t, res, out, own)
	assertPatchMatchesPod(t, in.Pod, res)
	assertValidStaysValid(t, in, out)
	assertIdempotent(t, res, again)
	assertOverridesRecorded(t, res, out)
	before.assertUnchanged(t, in)
}

// assertOverridesRecorded: every value a record says was applied is the pod's annotation.
func assertOverridesRecorded(t *testing.T, res *inject.Result, out *corev1.Pod) {
	t.Helper()
	for name, rec := range res.Records {
		for a, v := range rec.Overrides {
			if got, ok := out.Annotations[a]; !ok || got != v {
				t.Errorf("SidecarSet %q records override %s=%q; the pod's annotation is %q", name, a, v, got)
			}
		}
	}
}

// owned is the content of the Pod's own, as opposed to what an earlier injection added
// according to the status annotation.
type owned struct {
	containers, initContainers, volumes, pullSecrets sets.Set[string]
}

// The status annotation proves an earlier injection only for what a known SidecarSet of that
// name declares in the same list; anything else it lists (a forged or stale entry) is the Pod's.
func ownContent(t *testing.T, pod *corev1.Pod, known []*inject.CompiledSet) owned {
	t.Helper()
	recs, err := inject.ParseRecords(pod.Annotations)
	if err != nil {
		t.Fatalf("Apply accepted a status annotation ParseRecords refuses: %v", err)
	}
	injected := owned{sets.New[string](), sets.New[string](), sets.New[string](), sets.New[string]()}
	for _, set := range known {
		r, ok := recs[set.Name()]
		if !ok {
			continue
		}
		spec := &set.Set.Spec
		declared := func(names []string, has func(string) bool) []string {
			return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return !has(n) })
		}
		injected.containers.Insert(declared(r.Containers, func(n string) bool {
			return slices.ContainsFunc(spec.Containers, func(c appsv1alpha1.SidecarContainer) bool { return c.Name == n })
		})...)
		injected.initContainers.Insert(declared(r.InitContainers, func(n string) bool {
			return slices.ContainsFunc(spec.InitContainers, func(c appsv1alpha1.SidecarContainer) bool { return c.Name == n })
		})...)
		injected.volumes.Insert(declared(r.Volumes, func(n string) bool {
			return slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == n })
		})...)
		injected.pullSecrets.Insert(declared(r.ImagePullSecrets, func(n string) bool {
			return slices.ContainsFunc(spec.ImagePullSecrets, func(l corev1.LocalObjectReference) bool { return l.Name == n })
		})...)
	}
	o := owned{sets.New[string](), sets.New[string](), sets.New[string](), sets.New[string]()}
	for _, c := range pod.Spec.Containers {
		if !injected.containers.Has(c.Name) {
			o.containers.Insert(c.Name)
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if !injected.initContainers.Has(c.Name) {
			o.initContainers.Insert(c.Name)
		}
	}
	for _, v := range pod.Spec.Volumes {
		if !injected.volumes.Has(v.Name) {
			o.volumes.Insert(v.Name)
		}
	}
	for _, s := range pod.Spec.ImagePullSecrets {
		if !injected.pullSecrets.Has(s.Name) {
			o.pullSecrets.Insert(s.Name)
		}
	}
	return o
}

// assertOwnContentKept checks that the Pod's own containers, init containers, volumes and
// pull secrets are all still there, unchanged and in their order.
func assertOwnContentKept(t *testing.T, in, out *corev1.Pod, own owned) {
	t.Helper()
	keep := func(kind string, names sets.Set[string], before, after []corev1.Container) {
		want := slices.DeleteFunc(slices.Clone(before), func(c corev1.Container) bool { return !names.Has(c.Name) })
		got := slices.DeleteFunc(slices.Clone(after), func(c corev1.Container) bool { return !names.Has(c.Name) })
		if !sameJSONList(t, want, got) {
			t.Errorf("the pod's own %s changed: before %s, after %s", kind, mustJSON(t, want), mustJSON(t, got))
		}
	}
	keep("containers", own.containers, in.Spec.Containers, out.Spec.Containers)
	keep("init containers", own.initContainers, in.Spec.InitContainers, out.Spec.InitContainers)

	wantVolumes := slices.DeleteFunc(slices.Clone(in.Spec.Volumes), func(v corev1.Volume) bool { return !own.volumes.Has(v.Name) })
	gotVolumes := slices.DeleteFunc(slices.Clone(out.Spec.Volumes), func(v corev1.Volume) bool { return !own.volumes.Has(v.Name) })
	if !sameJSONList(t, wantVolumes, gotVolumes) {
		t.Errorf("the pod's own volumes changed: before %s, after %s", mustJSON(t, wantVolumes), mustJSON(t, gotVolumes))
	}
	wantSecrets := slices.DeleteFunc(slices.Clone(in.Spec.ImagePullSecrets), func(r corev1.LocalObjectReference) bool { return !own.pullSecrets.Has(r.Name) })
	gotSecrets := slices.DeleteFunc(slices.Clone(out.Spec.ImagePullSecrets), func(r corev1.LocalObjectReference) bool { return !own.pullSecrets.Has(r.Name) })
	if !slices.Equal(wantSecrets, gotSecrets) {
		t.Errorf("the pod's own image pull secrets changed: before %v, after %v", wantSecrets, gotSecrets)
	}
}

// sameJSONList reports whether two lists hold the same JSON values; nil and empty are the
// same (the API server does not tell them apart).
func sameJSONList[T any](t *testing.T, a, b []T) bool {
	t.Helper()
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return canonicalJSON(t, a) == canonicalJSON(t, b)
}

// assertUniqueNames checks that container names are unique across containers and init
// containers, and that volume and pull secret names are unique.
func assertUniqueNames(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	unique := func(kind string, names []string) {
		seen := sets.New[string]()
		for _, n := range names {
			if seen.Has(n) {
				t.Errorf("%s name %q appears twice in %v", kind, n, names)
			}
			seen.Insert(n)
		}
	}
	unique("container", append(containerNames(pod.Spec.InitContainers), containerNames(pod.Spec.Containers)...))
	var volumes, secrets []string
	for _, v := range pod.Spec.Volumes {
		volumes = append(volumes, v.Name)
	}
	for _, s := range pod.Spec.ImagePullSecrets {
		secrets = append(secrets, s.Name)
	}
	unique("volume", volumes)
	unique("image pull secret", secrets)
}

// assertEverythingAddedIsRecorded checks the status annotation: it equals Result.Records,
// whatever is not the Pod's own is listed in it (or the next re-entry could not strip it),
// and what the SidecarSets injected this time is really in the Pod.
func assertEverythingAddedIsRecorded(t *testing.T, res *inject.Result, out *corev1.Pod, own owned) {
	t.Helper()
	recs, err := inject.ParseRecords(out.Annotations)
	if err != nil {
		t.Fatalf("the injected pod's status annotation does not parse: %v", err)
	}
	if len(res.Records) > 0 && recs.Encode() != res.Records.Encode() {
		t.Errorf("status annotation %s, want Result.Records %s", recs.Encode(), res.Records.Encode())
	}
	recorded := owned{sets.New[string](), sets.New[string](), sets.New[string](), sets.New[string]()}
	for _, r := range recs {
		recorded.containers.Insert(r.Containers...)
		recorded.initContainers.Insert(r.InitContainers...)
		recorded.volumes.Insert(r.Volumes...)
		recorded.pullSecrets.Insert(r.ImagePullSecrets...)
	}
	check := func(kind string, names []string, own, recorded sets.Set[string]) {
		for _, n := range names {
			if !own.Has(n) && !recorded.Has(n) {
				t.Errorf("%s %q is neither the pod's own nor recorded in %s", kind, n, recs.Encode())
			}
		}
	}
	var volumes, secrets []string
	for _, v := range out.Spec.Volumes {
		volumes = append(volumes, v.Name)
	}
	for _, s := range out.Spec.ImagePullSecrets {
		secrets = append(secrets, s.Name)
	}
	check("container", containerNames(out.Spec.Containers), own.containers, recorded.containers)
	check("init container", containerNames(out.Spec.InitContainers), own.initContainers, recorded.initContainers)
	check("volume", volumes, own.volumes, recorded.volumes)
	check("image pull secret", secrets, own.pullSecrets, recorded.pullSecrets)

	present := func(kind string, names, in []string) {
		for _, n := range names {
			if !slices.Contains(in, n) {
				t.Errorf("%s %q is recorded as injected but missing from the pod", kind, n)
			}
		}
	}
	for _, set := range res.Injected {
		r := res.Records[set]
		present("container", r.Containers, containerNames(out.Spec.Containers))
		present("init container", r.InitContainers, containerNames(out.Spec.InitContainers))
		present("volume", r.Volumes, volumes)
		present("image pull secret", r.ImagePullSecrets, secrets)
	}
}

// assertValidStaysValid checks the engine's promise that a valid SidecarSet never breaks a
// valid pod: when the API server would accept the pod (Kubernetes' own pod validation, through
// internal/podrules) and every set passes the validating webhook's rules, the injected pod is
// accepted too.
func assertValidStaysValid(t *testing.T, in inject.Input, out *corev1.Pod) {
	t.Helper()
	if !injecttest.ValidInput(in) {
		return
	}
	if errs := podrules.ValidateCreate(out); len(errs) > 0 {
		t.Errorf("a valid pod became invalid by injection: %v", errs.ToAggregate())
	}
}

// TestFuzzSeedsHoldValidInputs keeps assertValidStaysValid from passing vacuously: some seeds
// must build a valid pod and valid sets that Apply accepts.
func TestFuzzSeedsHoldValidInputs(t *testing.T) {
	valid, overridden := 0, 0
	for _, s := range fuzzSeeds {
		in := injecttest.Generate(t, s.shape, s.text)
		if res, err := inject.Apply(in); err == nil && injecttest.ValidInput(in) {
			valid++
			for _, rec := range res.Records {
				if len(rec.Overrides) > 0 {
					overridden++
					break
				}
			}
		}
	}
	if valid == 0 {
		t.Errorf("none of the %d seeds builds a valid pod and valid SidecarSets that Apply accepts", len(fuzzSeeds))
	}
	if overridden == 0 {
		t.Errorf("none of the valid seeds has overrides applied")
	}
	t.Logf("%d of %d seeds are valid inputs", valid, len(fuzzSeeds))
}
