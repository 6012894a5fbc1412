package inject_test

import (
	"os"
	"strings"
	"testing"

	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// TestReasonsDocumented: every refusal reason of the catalog has its row in the refusal table
// of docs/concepts.md, and the table names no reason the engine does not give.
func TestReasonsDocumented(t *testing.T) {
	raw, err := os.ReadFile("../../docs/concepts.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "| reason | the webhook refused the pod because |")
	if start < 0 {
		t.Fatal("docs/concepts.md has no refusal table")
	}
	var rows []string
	for _, line := range strings.Split(doc[start:], "\n")[2:] {
		if !strings.HasPrefix(line, "| `") {
			break
		}
		rows = append(rows, strings.Trim(strings.SplitN(line, "|", 3)[1], " `"))
	}
	documented := map[string]bool{}
	for _, r := range rows {
		documented[r] = true
	}
	for _, r := range inject.Reasons {
		if !documented[string(r)] {
			t.Errorf("reason %s is not in the refusal table of docs/concepts.md", r)
		}
		delete(documented, string(r))
	}
	for r := range documented {
		t.Errorf("the refusal table of docs/concepts.md names %s, which the engine never gives", r)
	}
}
