package eventcatalog

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarset/sidecarset-operator/test/testutil"
)

// TestCatalogDocumented: docs/operations.md's events table holds every reason of the catalog
// with its type and the kind it is about, and no other.
func TestCatalogDocumented(t *testing.T) {
	rows := map[string]string{}
	for _, row := range testutil.DocTable(t, "docs/operations.md", "| reason | type | about | written when |") {
		rows[row[0]] = row[1] + " " + row[2]
	}
	for _, e := range Events {
		if want := e.Type + " " + e.Regarding; rows[e.Reason] != want {
			t.Errorf("docs/operations.md says %s is %q; the catalog says %q", e.Reason, rows[e.Reason], want)
		}
		delete(rows, e.Reason)
	}
	for r := range rows {
		t.Errorf("docs/operations.md lists event %s, which the catalog does not hold", r)
	}
}

// TestTypes: a reason's type is the catalog's; one it does not hold is a Warning, so that it is
// seen; reasons are unique.
func TestTypes(t *testing.T) {
	seen := map[string]bool{}
	for _, e := range Events {
		if seen[e.Reason] {
			t.Errorf("%s is in the catalog twice", e.Reason)
		}
		seen[e.Reason] = true
		if e.Type != corev1.EventTypeNormal && e.Type != corev1.EventTypeWarning {
			t.Errorf("%s has type %q", e.Reason, e.Type)
		}
	}
	if Type("RollingUpdateProgressing") != corev1.EventTypeNormal || Type("PodRefused") != corev1.EventTypeWarning || Type("Unheard") != corev1.EventTypeWarning || Known("Unheard") {
		t.Error("Type or Known disagree with the catalog")
	}
}
