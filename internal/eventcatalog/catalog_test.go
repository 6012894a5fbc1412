package eventcatalog

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

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
		if want := e.Type + " " + e.Regarding; rows[string(e.Reason)] != want {
			t.Errorf("docs/operations.md says %s is %q; the catalog says %q", e.Reason, rows[string(e.Reason)], want)
		}
		delete(rows, string(e.Reason))
	}
	for r := range rows {
		t.Errorf("docs/operations.md lists event %s, which the catalog does not hold", r)
	}
}

// TestTypes: a reason's type is the catalog's; one it does not hold is a Warning, so that it is
// seen; reasons are unique.
func TestTypes(t *testing.T) {
	seen := map[Reason]bool{}
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

// TestRecorder: the one recorder writes the catalog's type for a reason, and nothing for a dry
// run or without a recorder.
func TestRecorder(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "a"}}
	fake := events.NewFakeRecorder(4)
	Recorder{To: fake}.Record(pod, SidecarUpdated, "Update", "updated %s", "log-agent")
	Recorder{To: fake}.Record(pod, PodNotUpdatable, "Update", "cannot")
	Recorder{To: fake, DryRun: true}.Record(pod, PodRefused, "Inject", "dry")
	Recorder{}.Record(pod, PodRefused, "Inject", "none")
	close(fake.Events)
	var got []string
	for e := range fake.Events {
		got = append(got, e)
	}
	want := []string{"Normal SidecarUpdated updated log-agent", "Warning PodNotUpdatable cannot"}
	if !slices.Equal(got, want) {
		t.Errorf("recorded %q, want %q", got, want)
	}
}
