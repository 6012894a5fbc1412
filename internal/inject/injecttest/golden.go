// Package injecttest loads the injection engine's golden cases for tests: the engine's own
// and the admission handler's, which run the same cases through the webhook.
package injecttest

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// GoldenSuffix ends the name of a case's expected output: testdata/<case>.injected.yaml.
const GoldenSuffix = ".injected.yaml"

// Case is one testdata/<case>.yaml: a multi-document YAML file holding SidecarSets,
// at most one Namespace (whose labels the sets' namespace selectors see) and exactly one Pod.
type Case struct {
	Name      string
	Sets      []*appsv1alpha1.SidecarSet // sorted by name, as the engine expects
	Namespace *corev1.Namespace          // nil when the file has none
	Pod       *corev1.Pod
}

// AllowedAnnotations is the operator's allow-list of patched annotation keys every case is
// injected with: a case patching any other key shows it left out.
var AllowedAnnotations = []string{"logging.example.com/*", "prometheus.io/scrape", "prometheus.io/port"}

// AllowList is AllowedAnnotations parsed.
func AllowList(t testing.TB) *inject.KeyAllowList {
	t.Helper()
	allowed, err := inject.ParseKeyAllowList(AllowedAnnotations)
	if err != nil {
		t.Fatalf("allow-list: %v", err)
	}
	return &allowed
}

// Input compiles the case's SidecarSets afresh and returns the engine's input. Each call
// returns new compiled sets sharing the case's objects, which nothing may modify.
func (c Case) Input(t testing.TB) inject.Input {
	t.Helper()
	in := inject.Input{Pod: c.Pod, Sets: Compile(t, c.Sets...), AllowedAnnotations: AllowList(t)}
	if c.Namespace != nil {
		in.NamespaceLabels = c.Namespace.Labels
	}
	return in
}

// LoadCases reads every case in dir, in file name order.
func LoadCases(t testing.TB, dir string) []Case {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatalf("listing golden cases: %v", err)
	}
	var cases []Case
	for _, p := range paths {
		if strings.HasSuffix(p, GoldenSuffix) {
			continue
		}
		cases = append(cases, loadCase(t, p))
	}
	if len(cases) == 0 {
		t.Fatalf("no golden cases in %s", dir)
	}
	return cases
}

// loadCase decodes one case file strictly, so a misspelled field in testdata fails
// instead of silently testing something else.
func loadCase(t testing.TB, path string) Case {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden case: %v", err)
	}
	c := Case{Name: strings.TrimSuffix(filepath.Base(path), ".yaml")}
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
	sort.Slice(c.Sets, func(i, j int) bool { return c.Sets[i].Name < c.Sets[j].Name })
	return c
}

func (c *Case) addDocument(t testing.TB, path string, doc []byte) {
	t.Helper()
	var meta metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		t.Fatalf("%s: reading apiVersion and kind: %v", path, err)
	}
	switch meta.GroupVersionKind() {
	case appsv1alpha1.GroupVersion.WithKind("SidecarSet"):
		set := &appsv1alpha1.SidecarSet{}
		decodeStrict(t, path, doc, set)
		c.Sets = append(c.Sets, set)
	case corev1.SchemeGroupVersion.WithKind("Namespace"):
		if c.Namespace != nil {
			t.Fatalf("%s: more than one Namespace", path)
		}
		c.Namespace = &corev1.Namespace{}
		decodeStrict(t, path, doc, c.Namespace)
	case corev1.SchemeGroupVersion.WithKind("Pod"):
		if c.Pod != nil {
			t.Fatalf("%s: more than one Pod", path)
		}
		c.Pod = &corev1.Pod{}
		decodeStrict(t, path, doc, c.Pod)
	default:
		// Only an empty or comment-only document may be left unread.
		var content any
		if err := yaml.Unmarshal(doc, &content); err != nil || content != nil {
			t.Fatalf("%s: unexpected document of kind %q (apiVersion %q): %v", path, meta.Kind, meta.APIVersion, err)
		}
	}
}

func decodeStrict(t testing.TB, path string, doc []byte, into any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(doc, into); err != nil {
		t.Fatalf("%s: decoding %T: %v", path, into, err)
	}
}
