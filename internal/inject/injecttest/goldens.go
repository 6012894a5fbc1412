package injecttest

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/diff"
	"sigs.k8s.io/yaml"
)

// Goldens are one package's golden files, one per case: Dir/<case><Suffix>.
type Goldens struct {
	// Dir holds the golden files (created under Update).
	Dir string
	// Suffix ends each golden file's name.
	Suffix string
	// Regenerate is the command that rewrites them, for the messages.
	Regenerate string
	// Update rewrites the golden files instead of comparing (the package's -update flag).
	Update bool
}

// Path is the golden file of the named case.
func (g Goldens) Path(name string) string { return filepath.Join(g.Dir, name+g.Suffix) }

// Compare compares got with the case's golden file, or rewrites the file under Update.
func (g Goldens) Compare(t testing.TB, name string, got []byte) {
	t.Helper()
	path := g.Path(name)
	if g.Update {
		if err := os.MkdirAll(g.Dir, 0o755); err != nil {
			t.Fatalf("creating %s: %v", g.Dir, err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatalf("writing golden file: %v", err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("golden file %s is missing; run: %s", path, g.Regenerate)
	}
	if err != nil {
		t.Fatalf("reading golden file: %v", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s is stale (-want +got):\n%s\nIf the change is intended, run: %s", path, YAMLDiff(want, got), g.Regenerate)
	}
}

// AssertNoOrphans fails on golden files whose case is gone: they would never be checked.
func (g Goldens) AssertNoOrphans(t testing.TB, cases []Case) {
	t.Helper()
	if g.Update {
		return
	}
	files, err := filepath.Glob(filepath.Join(g.Dir, "*"+g.Suffix))
	if err != nil {
		t.Fatalf("listing golden files: %v", err)
	}
	known := map[string]bool{}
	for _, c := range cases {
		known[g.Path(c.Name)] = true
	}
	for _, f := range files {
		if !known[f] {
			t.Errorf("golden file %s has no case %s.yaml; delete it", f, strings.TrimSuffix(filepath.Base(f), g.Suffix))
		}
	}
}

// YAMLDiff diffs two YAML documents structurally, falling back to the raw text when one of
// them is not YAML.
func YAMLDiff(a, b []byte) string {
	var av, bv any
	lines := func(s []byte) []string { return strings.Split(string(s), "\n") }
	if yaml.Unmarshal(a, &av) != nil || yaml.Unmarshal(b, &bv) != nil {
		return diff.Diff(lines(a), lines(b))
	}
	if d := diff.Diff(av, bv); strings.TrimSpace(d) != "" {
		return d
	}
	return diff.Diff(lines(a), lines(b)) // same structure, different text (comments, layout)
}
