//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// TestTwoReplicasFeedOneRefusingStatus: two operator replicas, each serving the pod webhook in
// turn, refuse pods whose container clashes with a set's sidecar. Each writes its own entry of
// the set's status.refusals (server-side apply, one field manager per replica), neither
// overwrites the other's, and the leader's Refusing condition counts both.
func TestTwoReplicasFeedOneRefusingStatus(t *testing.T) {
	ns := newNamespace(t, "refusing", nil)
	set := createAgentSet(t, "e2e-refuser", "refused")
	refuse := func(n int, via string) {
		t.Helper()
		for i := range n {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("via-%s-%d", via, i),
				Labels: map[string]string{"app": "refused", appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue}}, Spec: podSpec()}
			pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "e2e-refuser-agent", Image: "registry.example/mine:1"})
			if err := createAfterStop(t, pod); err == nil || !strings.Contains(err.Error(), `SidecarSet "e2e-refuser"`) {
				t.Fatalf("pod %s: %v; want it refused naming the set", pod.Name, err)
			}
		}
	}
	entries := func(want map[string]int64) func() (bool, string) {
		return func() (bool, string) {
			var cur appsv1alpha1.SidecarSet
			must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), &cur))
			got := map[string]int64{}
			for _, r := range cur.Status.Refusals {
				got[r.Replica] = r.Count
			}
			return fmt.Sprint(got) == fmt.Sprint(want), fmt.Sprintf("status.refusals %v", got)
		}
	}

	refuse(2, "operator-0") // operator-0 serves alone
	eventually(t, converge, "operator-0's entry", entries(map[string]int64{"operator-0": 2}))

	must(t, startOperator("operator-1"))
	stopOperator(t, "operator-0", "TERM") // operator-1 serves alone, and takes the lease
	t.Cleanup(func() {
		must(t, startOperator("operator-0"))
		if err := run("operator-stop", "operator-1"); err != nil {
			t.Error(err)
		}
	})
	refuse(3, "operator-1")
	eventually(t, converge, "both replicas' entries, side by side", entries(map[string]int64{"operator-0": 2, "operator-1": 3}))
	eventually(t, converge, "the new leader's Refusing condition to count both", func() (bool, string) {
		var cur appsv1alpha1.SidecarSet
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), &cur))
		c := meta.FindStatusCondition(cur.Status.Conditions, appsv1alpha1.ConditionRefusing)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "ContainerClash" && strings.Contains(c.Message, "refused 5 pod(s)") &&
			strings.Contains(c.Message, ns), fmt.Sprintf("Refusing %+v", c)
	})
}
