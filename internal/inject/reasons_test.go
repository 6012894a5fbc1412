package inject_test

import (
	"testing"

	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/test/testutil"
)

// TestReasonsDocumented: every refusal reason of the catalog has its row in the refusal table
// of docs/concepts.md, and the table names no reason the engine does not give.
func TestReasonsDocumented(t *testing.T) {
	documented := map[string]bool{}
	for _, row := range testutil.DocTable(t, "docs/concepts.md", "| reason | the webhook refused the pod because |") {
		documented[row[0]] = true
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
