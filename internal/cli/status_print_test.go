package cli

import (
	"bytes"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// TestStatusSaysRefusingFirst: `kubectl sidecarset status` puts a refusing set's Refusing
// condition right under its name, before the counts; a set that stopped refusing says nothing
// of it there.
func TestStatusSaysRefusingFirst(t *testing.T) {
	for _, tc := range []struct {
		status metav1.ConditionStatus
		want   bool
	}{{metav1.ConditionTrue, true}, {metav1.ConditionFalse, false}} {
		set := &appsv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "mesh"}}
		set.Status.Conditions = []metav1.Condition{{Type: appsv1alpha1.ConditionRefusing, Status: tc.status, Reason: "PortClash",
			Message: "The pod webhook refused 3 pod(s)"}}
		var out bytes.Buffer
		if err := printStatus(&out, set); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(out.String(), "\n")
		first := len(lines) > 1 && strings.HasPrefix(lines[1], "REFUSING PODS:") && strings.Contains(lines[1], "refused 3 pod(s)") && strings.Contains(lines[1], "PortClash")
		if first != tc.want {
			t.Errorf("Refusing %s: second line %q; want the refusal there: %v", tc.status, lines[1], tc.want)
		}
	}
}
