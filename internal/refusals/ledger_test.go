package refusals

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// TestLedgerEpisodesAndEvents: refusals of one set gather into one entry (count, the latest
// reason and message, the namespaces and workloads most recent first); each write takes what
// is pending once; an event is due at most once per EventInterval and counts the refusals since
// the last one; a refusal after the quiet period starts a new entry.
func TestLedgerEpisodesAndEvents(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	l := &Ledger{Replica: "op-a", Quiet: 10 * time.Minute, now: func() time.Time { return now }}
	set := &appsv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "mesh"}}
	l.Refused(set, inject.ReasonPortClash, "port clash", "shop", "shop/ReplicaSet/web-1")
	l.Refused(set, inject.ReasonContainerClash, "name clash", "blog", "")
	w := l.pending()
	if len(w) != 1 {
		t.Fatalf("pending %+v; want one write", w)
	}
	st := w[0].status
	if st.Count != 2 || st.Reason != "ContainerClash" || st.Message != "name clash" || strings.Join(st.Namespaces, ",") != "blog,shop" ||
		strings.Join(st.Workloads, ",") != "shop/ReplicaSet/web-1" || st.Replica != "op-a" {
		t.Fatalf("entry %+v", st)
	}
	if !strings.Contains(w[0].event, "refused 2 pod(s)") {
		t.Fatalf("event %q; want it to count 2 refusals", w[0].event)
	}
	if again := l.pending(); len(again) != 0 {
		t.Fatalf("pending again %+v; want nothing new", again)
	}

	now = now.Add(10 * time.Second)
	l.Refused(set, inject.ReasonPortClash, "port clash", "shop", "")
	if w = l.pending(); len(w) != 1 || w[0].event != "" || w[0].status.Count != 3 {
		t.Fatalf("pending %+v; want the entry (count 3) and no event within a minute of the last", w)
	}
	now = now.Add(EventInterval)
	l.Refused(set, inject.ReasonPortClash, "port clash", "shop", "")
	if w = l.pending(); len(w) != 1 || !strings.Contains(w[0].event, "refused 2 pod(s)") {
		t.Fatalf("pending %+v; want an event counting the 2 refusals since the last", w)
	}

	edited := set.DeepCopy()
	edited.Generation = 2
	l.Refused(edited, inject.ReasonPortClash, "port clash", "shop", "")
	if w = l.pending(); len(w) != 1 || w[0].status.Count != 1 || w[0].status.Generation != 2 {
		t.Fatalf("pending %+v; want a new entry under the edited spec", w)
	}

	now = now.Add(11 * time.Minute)
	l.Refused(set, inject.ReasonLimitRange, "too big", "ops", "")
	if w = l.pending(); len(w) != 1 || w[0].status.Count != 1 || !w[0].status.Since.Equal(&metav1.Time{Time: now}) ||
		strings.Join(w[0].status.Namespaces, ",") != "ops" {
		t.Fatalf("pending %+v; want a new entry after the quiet period", w)
	}
}
