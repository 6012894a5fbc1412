package webhook

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// This file copies, in short, the golden-case loader of internal/inject/golden_cases_test.go
// (test files of another package cannot be imported), so that the engine's golden cases also
// run through the admission handler.

// engineTestdata holds the engine's golden cases: <case>.yaml in, <case>.injected.yaml out.
const (
	engineTestdata = "../inject/testdata"
	goldenSuffix   = ".injected.yaml"
)

// goldenCase is one case file: SidecarSets, at most one Namespace and exactly one Pod.
type goldenCase struct {
	Name      string
	Sets      []*appsv1alpha1.SidecarSet
	Namespace *corev1.Namespace
	Pod       *corev1.Pod
}

// loadGoldenCases reads every case in dir, in file name order.
func loadGoldenCases(t testing.TB, dir string) []goldenCase {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatalf("listing golden cases: %v", err)
	}
	var cases []goldenCase
	for _, p := range paths {
		if !strings.HasSuffix(p, goldenSuffix) {
			cases = append(cases, loadGoldenCase(t, p))
		}
	}
	if len(cases) == 0 {
		t.Fatalf("no golden cases in %s", dir)
	}
	return cases
}

// loadGoldenCase decodes one case file strictly: a misspelled field fails instead of silently
// testing something else.
func loadGoldenCase(t testing.TB, path string) goldenCase {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden case: %v", err)
	}
	c := goldenCase{Name: strings.TrimSuffix(filepath.Base(path), ".yaml")}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: splitting YAML documents: %v", path, err)
		}
		c.addDocument(t, path, doc)
	}
	if c.Pod == nil {
		t.Fatalf("%s: no Pod document", path)
	}
	return c
}

func (c *goldenCase) addDocument(t testing.TB, path string, doc []byte) {
	t.Helper()
	var meta metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		t.Fatalf("%s: reading apiVersion and kind: %v", path, err)
	}
	var into any
	switch meta.GroupVersionKind() {
	case appsv1alpha1.GroupVersion.WithKind("SidecarSet"):
		set := &appsv1alpha1.SidecarSet{}
		c.Sets, into = append(c.Sets, set), set
	case corev1.SchemeGroupVersion.WithKind("Namespace"):
		c.Namespace, into = &corev1.Namespace{}, &c.Namespace
	case corev1.SchemeGroupVersion.WithKind("Pod"):
		if c.Pod != nil {
			t.Fatalf("%s: more than one Pod", path)
		}
		c.Pod, into = &corev1.Pod{}, &c.Pod
	default:
		// Only an empty or comment-only document may be left unread.
		var content any
		if err := yaml.Unmarshal(doc, &content); err != nil || content != nil {
			t.Fatalf("%s: unexpected document of kind %q: %v", path, meta.Kind, err)
		}
		return
	}
	if err := yaml.UnmarshalStrict(doc, into); err != nil {
		t.Fatalf("%s: decoding %s: %v", path, meta.Kind, err)
	}
}
