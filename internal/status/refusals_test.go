package status

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// TestRefusingCondition: the Refusing condition sums what the replicas wrote, names the
// latest refusal's reason and message, the namespaces and workloads, drops entries older than
// the quiet period, turns False once none is left, and is absent for a set that never refused.
func TestRefusingCondition(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) metav1.Time { return metav1.NewTime(now.Add(-ago)) }
	a := appsv1alpha1.ReplicaRefusals{Replica: "op-a", Count: 3, Since: at(5 * time.Minute), Last: at(2 * time.Minute), Reason: "PortClash",
		Message: "port 8080 clash", Namespaces: []string{"shop"}, Workloads: []string{"shop/ReplicaSet/web-1"}}
	b := appsv1alpha1.ReplicaRefusals{Replica: "op-b", Count: 2, Since: at(4 * time.Minute), Last: at(time.Minute), Reason: "ContainerClash",
		Message: "name clash", Namespaces: []string{"blog", "shop"}}
	old := appsv1alpha1.ReplicaRefusals{Replica: "op-c", Count: 9, Since: at(time.Hour), Last: at(30 * time.Minute), Reason: "LimitRange", Message: "old"}
	wasTrue := []metav1.Condition{{Type: appsv1alpha1.ConditionRefusing, Status: metav1.ConditionTrue, Reason: "PortClash", LastTransitionTime: at(time.Hour)}}
	for _, tc := range []struct {
		name      string
		refusals  []appsv1alpha1.ReplicaRefusals
		previous  []metav1.Condition
		kept      int
		status    string // "" when the condition must be absent
		reason    string
		message   []string
		sinceHour bool // the transition time is the previous one
	}{
		{"never refused", nil, nil, 0, "", "", nil, false},
		{"two replicas", []appsv1alpha1.ReplicaRefusals{a, b, old}, nil, 2, "True", "ContainerClash",
			[]string{"refused 5 pod(s)", "name clash", "namespaces: shop, blog", "workloads: shop/ReplicaSet/web-1"}, false},
		{"still refusing", []appsv1alpha1.ReplicaRefusals{a}, wasTrue, 1, "True", "PortClash", []string{"refused 3 pod(s)"}, true},
		{"quiet again", []appsv1alpha1.ReplicaRefusals{old}, wasTrue, 0, "False", NoRecentRefusals, []string{"no pod"}, false},
		{"the spec changed since", []appsv1alpha1.ReplicaRefusals{func() appsv1alpha1.ReplicaRefusals { r := a; r.Generation = 2; return r }()}, wasTrue,
			0, "False", NoRecentRefusals, []string{"since its spec last changed"}, false},
		{"refused under this spec", []appsv1alpha1.ReplicaRefusals{func() appsv1alpha1.ReplicaRefusals { r := a; r.Generation = 3; return r }()}, nil,
			1, "True", "PortClash", []string{"refused 3 pod(s)"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conditions := []metav1.Condition{{Type: appsv1alpha1.ConditionPodsUpdated, Status: metav1.ConditionTrue, Reason: "NoMatchedPods",
				Message: "No pod matches: a pod needs the label"}}
			kept, next := WithRefusals(&conditions, tc.previous, tc.refusals, 3, now, 10*time.Minute)
			if len(kept) != tc.kept {
				t.Fatalf("kept %d entries, want %d", len(kept), tc.kept)
			}
			c := meta.FindStatusCondition(conditions, appsv1alpha1.ConditionRefusing)
			if tc.status == "" {
				if c != nil || next != 0 {
					t.Fatalf("condition %+v, recheck in %v; want none", c, next)
				}
				return
			}
			if c == nil || string(c.Status) != tc.status || c.Reason != tc.reason || c.ObservedGeneration != 3 {
				t.Fatalf("condition %+v; want %s %s", c, tc.status, tc.reason)
			}
			for _, part := range tc.message {
				if !strings.Contains(c.Message, part) {
					t.Errorf("message %q lacks %q", c.Message, part)
				}
			}
			if wantHour := at(time.Hour); tc.sinceHour != c.LastTransitionTime.Equal(&wantHour) {
				t.Errorf("transition time %v; kept from before: %v", c.LastTransitionTime, tc.sinceHour)
			}
			noMatch := meta.FindStatusCondition(conditions, appsv1alpha1.ConditionPodsUpdated).Message
			if refusing := tc.status == "True"; refusing == strings.HasPrefix(noMatch, "No pod matches") || refusing != strings.Contains(noMatch, "refused") {
				t.Errorf("PodsUpdated says %q while Refusing is %s: a set whose pods were refused must not say that no pod matches", noMatch, tc.status)
			}
			if tc.status == "True" && (next <= 0 || next > 10*time.Minute) {
				t.Errorf("recheck in %v; want within the quiet period", next)
			}
		})
	}
}
