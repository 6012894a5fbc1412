package inject_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/inject/injecttest"
)

var update = flag.Bool("update", false, "rewrite testdata/*"+injecttest.GoldenSuffix+" from the engine's output instead of comparing")

const testdataDir = "testdata"

// TestGolden injects every testdata/<case>.yaml and compares the outcome with
// testdata/<case>.injected.yaml. The injected Pod is rendered twice, from Result.Pod and by
// applying Result.Patch to the input's JSON, and both renderings must match the golden file.
// Every successful case must also be idempotent and leave its inputs untouched.
func TestGolden(t *testing.T) {
	cases := injecttest.LoadCases(t, testdataDir)
	goldens().AssertNoOrphans(t, cases)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			in := c.Input(t)
			before := snapshotInput(in)
			res, err := inject.Apply(in)
			if err != nil {
				_ = requireRefused(t, err) // the golden file holds the message
				goldens().Compare(t, c.Name, renderGolden(t, c.Name, nil, err, nil))
				before.assertUnchanged(t, in)
				return
			}
			got := renderGolden(t, c.Name, res, nil, res.Pod())
			viaPatch := renderGolden(t, c.Name, res, nil, patchedPod(t, c.Pod, res.Patch()))
			if !bytes.Equal(got, viaPatch) {
				t.Errorf("Patch() applied to the input pod disagrees with Pod() (-Pod() +patched):\n%s",
					injecttest.YAMLDiff(got, viaPatch))
			}
			goldens().Compare(t, c.Name, got)
			assertValidStaysValid(t, in, res.Pod())
			assertIdempotent(t, res, c.Input(t))
			before.assertUnchanged(t, in)
		})
	}
}

// goldenResult is the content of a golden file: the refusal, or the injected Pod with what
// the engine reported.
type goldenResult struct {
	Error    string         `json:"error,omitempty"`
	Changed  *bool          `json:"changed,omitempty"`
	Injected []string       `json:"injected,omitempty"`
	Skipped  []goldenSkip   `json:"skipped,omitempty"`
	Warnings []string       `json:"warnings,omitempty"`
	Pod      map[string]any `json:"pod,omitempty"`
}

type goldenSkip struct {
	SidecarSet string             `json:"sidecarSet"`
	Reason     inject.MatchReason `json:"reason"`
}

func renderGolden(t testing.TB, name string, res *inject.Result, applyErr error, pod *corev1.Pod) []byte {
	t.Helper()
	var out goldenResult
	if applyErr != nil {
		out.Error = applyErr.Error()
	} else {
		changed := res.Changed()
		out.Changed = &changed
		out.Injected = res.Injected
		out.Warnings = res.Warnings
		for _, s := range res.Skipped {
			out.Skipped = append(out.Skipped, goldenSkip{SidecarSet: s.SidecarSet, Reason: s.Reason})
		}
		out.Pod = goldenPod(t, pod)
	}
	raw, err := yaml.Marshal(out)
	if err != nil {
		t.Fatalf("rendering golden output: %v", err)
	}
	header := "# Output of TestGolden for " + name + ".yaml. Regenerate with:\n" +
		"#   go test ./internal/inject -run TestGolden -update\n"
	return append([]byte(header), raw...)
}

// goldenPod is the Pod as a map, without the empty creationTimestamp and status that every
// Pod built from YAML serializes.
func goldenPod(t testing.TB, pod *corev1.Pod) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(mustJSON(t, pod), &m); err != nil {
		t.Fatalf("decoding pod JSON: %v", err)
	}
	if meta, ok := m["metadata"].(map[string]any); ok && meta["creationTimestamp"] == nil {
		delete(meta, "creationTimestamp")
	}
	if status, ok := m["status"].(map[string]any); ok && len(status) == 0 {
		delete(m, "status")
	}
	return m
}

func goldens() injecttest.Goldens {
	return injecttest.Goldens{Dir: testdataDir, Suffix: injecttest.GoldenSuffix, Update: *update,
		Regenerate: "go test ./internal/inject -run TestGolden -update"}
}
