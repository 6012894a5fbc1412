package policy_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"path/filepath"
	"slices"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/inject/injecttest"
	"github.com/sidecarset/sidecarset-operator/internal/policy"
)

var update = flag.Bool("update", false, "rewrite testdata/*"+goldenSuffix+" from Compile's output instead of comparing")

const (
	// casesDir holds the engine's golden cases: the policies are rendered from the same sets,
	// so a change to the engine's cases shows up here as a missing or orphan golden file.
	casesDir     = "../inject/testdata"
	testdataDir  = "testdata"
	goldenSuffix = ".policy.yaml"
)

// goldenOptions are the options every golden case is compiled with: the operator's namespace
// as the default manifests install it, for the newest API server (a lazily read pod; the
// rendering for older ones, without it, is TestLazyPodInjectsTheSame's).
var goldenOptions = policy.Options{Scope: inject.Scope{OperatorNamespace: "sidecarset-system"}, LazyPod: true}

// TestGolden compiles every SidecarSet of every engine golden case (the case's other sets as
// the others) and compares the rendered policies, bindings and Unsupported reasons with
// testdata/<case>.policy.yaml. The rendering is reviewed by reading the diff; that it injects
// what the engine injects is test/integration's business. Compile must also be a pure
// function: it may not touch its inputs, and the order of the others may not matter.
func TestGolden(t *testing.T) {
	cases := injecttest.LoadCases(t, casesDir)
	goldens().AssertNoOrphans(t, cases)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			before := deepCopySets(c.Sets)
			got := renderGolden(t, c.Name, compileAll(t, c.Sets, c.Sets))
			if !apiequality.Semantic.DeepEqual(before, c.Sets) {
				t.Errorf("Compile modified its input SidecarSets")
			}
			reversed := slices.Clone(c.Sets)
			slices.Reverse(reversed)
			if again := renderGolden(t, c.Name, compileAll(t, c.Sets, reversed)); !bytes.Equal(got, again) {
				t.Errorf("the order of the others changes the rendering (-sorted +reversed):\n%s", injecttest.YAMLDiff(got, again))
			}
			goldens().Compare(t, c.Name, got)
		})
	}
}

// goldenCase is the content of a golden file: what Compile renders for each set of the case,
// by the set's name.
type goldenCase struct {
	Sets map[string]goldenSet `json:"sets"`
}

type goldenSet struct {
	// Error is Compile's error; the other fields are then empty.
	Error string `json:"error,omitempty"`
	// Unsupported is "<field>: <reason>" when the policy routes every pod to the webhook.
	Unsupported string         `json:"unsupported,omitempty"`
	Policy      map[string]any `json:"policy,omitempty"`
	Binding     map[string]any `json:"binding,omitempty"`
	// Probe is the probe binding.
	Probe map[string]any `json:"probe,omitempty"`
}

// compileAll compiles each of sets with others as the other SidecarSets.
func compileAll(t testing.TB, sets, others []*appsv1alpha1.SidecarSet) goldenCase {
	t.Helper()
	out := goldenCase{Sets: map[string]goldenSet{}}
	for _, set := range sets {
		var g goldenSet
		compiled, err := policy.Compile(set, others, nil, goldenOptions)
		if err != nil {
			g.Error = err.Error()
			out.Sets[set.Name] = g
			continue
		}
		if compiled.Unsupported != nil {
			g.Unsupported = compiled.Unsupported.String()
		}
		if got := compiled.Policy.Annotations[policy.HashAnnotation]; got != compiled.Hash {
			t.Errorf("SidecarSet %q: policy annotation %s is %q, want Compiled.Hash %q", set.Name, policy.HashAnnotation, got, compiled.Hash)
		}
		g.Policy = asMap(t, compiled.Policy)
		g.Binding = asMap(t, compiled.Binding)
		g.Probe = asMap(t, compiled.Probe)
		out.Sets[set.Name] = g
	}
	return out
}

// asMap is obj as a JSON map, without the empty creationTimestamp every rendered object
// serializes.
func asMap(t testing.TB, obj any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatalf("encoding %T: %v", obj, err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("decoding %T: %v", obj, err)
	}
	if meta, ok := m["metadata"].(map[string]any); ok && meta["creationTimestamp"] == nil {
		delete(meta, "creationTimestamp")
	}
	return m
}

func renderGolden(t testing.TB, name string, out goldenCase) []byte {
	t.Helper()
	raw, err := yaml.Marshal(out)
	if err != nil {
		t.Fatalf("rendering golden output: %v", err)
	}
	header := "# Output of TestGolden for " + filepath.ToSlash(filepath.Join("internal/inject/testdata", name+".yaml")) + ". Regenerate with:\n" +
		"#   go test ./internal/policy -run TestGolden -update\n"
	return append([]byte(header), raw...)
}

func deepCopySets(sets []*appsv1alpha1.SidecarSet) []*appsv1alpha1.SidecarSet {
	out := make([]*appsv1alpha1.SidecarSet, len(sets))
	for i, s := range sets {
		out[i] = s.DeepCopy()
	}
	return out
}

func goldens() injecttest.Goldens {
	return injecttest.Goldens{Dir: testdataDir, Suffix: goldenSuffix, Update: *update,
		Regenerate: "go test ./internal/policy -run TestGolden -update"}
}
