package inject_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"

	jsonpatchapply "github.com/evanphx/json-patch/v5"
	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/diff"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/inject/injecttest"
	"github.com/sidecarset/sidecarset-operator/test/builders"
)

// mustJSON marshals v; the objects here are plain API structs, so a failure is a test bug.
func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshaling %T: %v", v, err)
	}
	return raw
}

// patchedPod applies ops to the JSON of pod, as the API server applies an admission patch,
// and decodes the outcome.
func patchedPod(t testing.TB, pod *corev1.Pod, ops []jsonpatch.Operation) *corev1.Pod {
	t.Helper()
	patch, err := jsonpatchapply.DecodePatch(mustJSON(t, ops))
	if err != nil {
		t.Fatalf("decoding the engine's patch %s: %v", mustJSON(t, ops), err)
	}
	out, err := patch.Apply(mustJSON(t, pod))
	if err != nil {
		t.Fatalf("applying the engine's patch %s to the input pod: %v", mustJSON(t, ops), err)
	}
	var got corev1.Pod
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("decoding the patched pod: %v", err)
	}
	return &got
}

// canonicalJSON is v's JSON decoded and encoded again, so that equal JSON values compare
// equal as bytes (a string that is not valid UTF-8 is written "\ufffd" by json.Marshal, but
// as the character itself once it went through a JSON patch).
func canonicalJSON(t testing.TB, v any) string {
	t.Helper()
	var generic any
	if err := json.Unmarshal(mustJSON(t, v), &generic); err != nil {
		t.Fatalf("decoding the JSON of %T: %v", v, err)
	}
	return string(mustJSON(t, generic))
}

// podsDiff is empty when both Pods serialize to the same JSON (the form the API server
// stores), and a unified diff otherwise.
func podsDiff(t testing.TB, want, got *corev1.Pod) string {
	t.Helper()
	if canonicalJSON(t, want) == canonicalJSON(t, got) {
		return ""
	}
	return diff.Diff(want, got)
}

// assertPatchMatchesPod checks that Patch and PatchFrom, applied to the input Pod's JSON, gives Pod.
func assertPatchMatchesPod(t testing.TB, input *corev1.Pod, res *inject.Result) {
	t.Helper()
	if d := podsDiff(t, res.Pod(), patchedPod(t, input, res.Patch())); d != "" {
		t.Errorf("Patch() applied to the input pod differs from Pod() (-Pod() +patched):\n%s", d)
	}
	ops, err := res.PatchFrom(admittedOf(t, mustJSON(t, input)))
	if err != nil {
		t.Fatalf("PatchFrom(the input pod's JSON): %v", err)
	}
	if d := podsDiff(t, res.Pod(), patchedPod(t, input, ops)); d != "" {
		t.Errorf("PatchFrom() applied to the input pod differs from Pod() (-Pod() +patched):\n%s", d)
	}
}

// assertIdempotent applies the engine to its own output, with sets compiled afresh in again,
// and checks that nothing changes.
func assertIdempotent(t testing.TB, first *inject.Result, again inject.Input) {
	t.Helper()
	want := first.Pod()
	again.Pod = want
	second, err := inject.Apply(again)
	if err != nil {
		t.Fatalf("Apply(Result.Pod()) failed: %v", err)
	}
	if second.Changed() {
		t.Errorf("Apply(Result.Pod()).Changed() = true, want false")
	}
	if ops := second.Patch(); len(ops) != 0 {
		t.Errorf("Apply(Result.Pod()).Patch() = %s, want no operations", mustJSON(t, ops))
	}
	if d := podsDiff(t, want, second.Pod()); d != "" {
		t.Errorf("Apply(Result.Pod()).Pod() differs from Result.Pod() (-first +second):\n%s", d)
	}
	if !reflect.DeepEqual(first.Records, second.Records) {
		t.Errorf("records changed on re-entry:\nfirst:  %s\nsecond: %s", first.Records.Encode(), second.Records.Encode())
	}
}

// requireRefused fails unless err is a *RefusedError with a Reason of the catalog, and
// returns it.
func requireRefused(t testing.TB, err error) *inject.RefusedError {
	t.Helper()
	var refused *inject.RefusedError
	if !errors.As(err, &refused) {
		t.Fatalf("Apply failed with %T (%v), want only *inject.RefusedError", err, err)
	}
	if !slices.Contains(inject.Reasons, refused.Reason) {
		t.Fatalf("refusal %q has reason %q, which is not in inject.Reasons", refused.Error(), refused.Reason)
	}
	return refused
}

// inputSnapshot is a deep copy of an Input, taken before Apply to prove Apply left it alone:
// the Pod and SidecarSets may come from an informer cache.
type inputSnapshot struct {
	pod             *corev1.Pod
	sets            []*appsv1alpha1.SidecarSet
	namespaceLabels map[string]string
	limitRanges     []corev1.LimitRange
}

func snapshotInput(in inject.Input) inputSnapshot {
	s := inputSnapshot{pod: in.Pod.DeepCopy()}
	for i := range in.LimitRanges {
		s.limitRanges = append(s.limitRanges, *in.LimitRanges[i].DeepCopy())
	}
	for _, c := range in.Sets {
		s.sets = append(s.sets, c.Set.DeepCopy())
	}
	if in.NamespaceLabels != nil {
		s.namespaceLabels = map[string]string{}
		for k, v := range in.NamespaceLabels {
			s.namespaceLabels[k] = v
		}
	}
	return s
}

func (s inputSnapshot) assertUnchanged(t testing.TB, in inject.Input) {
	t.Helper()
	if !reflect.DeepEqual(s.pod, in.Pod) {
		t.Errorf("Apply mutated the input pod (-before +after):\n%s", diff.Diff(s.pod, in.Pod))
	}
	for i, c := range in.Sets {
		if !reflect.DeepEqual(s.sets[i], c.Set) {
			t.Errorf("Apply mutated SidecarSet %q (-before +after):\n%s", c.Name(), diff.Diff(s.sets[i], c.Set))
		}
	}
	if !reflect.DeepEqual(s.namespaceLabels, in.NamespaceLabels) {
		t.Errorf("Apply mutated the namespace labels: before %v, after %v", s.namespaceLabels, in.NamespaceLabels)
	}
	if len(s.limitRanges) != len(in.LimitRanges) || len(s.limitRanges) > 0 && !reflect.DeepEqual(s.limitRanges, in.LimitRanges) {
		t.Errorf("Apply mutated the LimitRanges (-before +after):\n%s", diff.Diff(s.limitRanges, in.LimitRanges))
	}
}

// compile compiles SidecarSets in the order given, failing the test on error.
func compile(t testing.TB, sets ...*appsv1alpha1.SidecarSet) []*inject.CompiledSet {
	t.Helper()
	return injecttest.Compile(t, sets...)
}

// webSet builds a SidecarSet that selects webPod (app=web), with the given containers as its
// sidecars; apiVersion and kind are set, as in a manifest.
func webSet(name string, containers ...corev1.Container) *appsv1alpha1.SidecarSet {
	return builders.SidecarSet(name, builders.Typed(), builders.Selecting("web"), builders.WithContainers(containers...))
}

// webPod builds an opted-in app=web Pod, web-0 in namespace shop, with the given containers;
// apiVersion and kind are set, as in an admission request.
func webPod(containers ...corev1.Container) *corev1.Pod {
	return builders.Pod("shop", "web-0", builders.Typed(), builders.OptedIn(), builders.WithLabels(map[string]string{"app": "web"}),
		builders.WithContainers(containers...))
}

func containerNames(list []corev1.Container) []string {
	names := make([]string, 0, len(list))
	for _, c := range list {
		names = append(names, c.Name)
	}
	return names
}

// admittedOf reads a Pod's JSON for Result.PatchFrom.
func admittedOf(t testing.TB, raw []byte) inject.Admitted {
	t.Helper()
	admitted, err := inject.AdmittedFrom(raw)
	if err != nil {
		t.Fatalf("AdmittedFrom: %v", err)
	}
	return admitted
}
