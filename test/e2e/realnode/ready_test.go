//go:build e2e

package realnode

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset-operator/test/builders"
	"github.com/sidecarset/sidecarset-operator/test/testutil"
)

// TestReadyMeansServing: with the operator scaled to zero, opted-in pods are refused
// (failurePolicy Fail, no server to call); scaled back to one while pods are created ten times a
// second, every creation sent once its replica reports Ready is admitted with its sidecar. The
// replica's readiness (its webhook server presenting the current certificate, its caches
// synced) is what a Deployment's rollout and `make deploy` wait for; here the API server calls
// the replica directly, not through its Service, so nothing but the check itself keeps Ready
// from being said too early.
func TestReadyMeansServing(t *testing.T) {
	ns := newNamespace(t, "ready")
	createSet(t, builders.SidecarSet("ready-agent", builders.Selecting("ready"), builders.WithImage(image("agent:v1"))))
	t.Cleanup(func() {
		scaleOperator(t, 1)
		eventually(t, 3*converge, "the operator to serve again", operatorServing)
	})

	scaleOperator(t, 0)
	eventually(t, 2*converge, "the operator's pods to be gone", func() (bool, string) {
		pods := operatorPods(t)
		return len(pods) == 0, "pods left: " + podNames(pods)
	})
	load := startAdmissions(t, ns, "ready", "ready-agent", 100*time.Millisecond)
	start := time.Now()
	time.Sleep(2 * time.Second)
	scaleOperator(t, 1)
	var readyAt time.Time
	eventually(t, 3*converge, "a replica to report Ready", func() (bool, string) {
		for _, p := range operatorPods(t) {
			if testutil.ReadyStatus(p.Status) == corev1.ConditionTrue {
				readyAt = time.Now()
				return true, ""
			}
		}
		return false, "no replica Ready"
	})
	time.Sleep(5 * time.Second)
	load.halt()

	before, after := load.tally(start), load.tally(readyAt)
	before.Sent -= after.Sent
	before.Failed -= after.Failed
	t.Logf("%d creations before the replica reported Ready (%d refused: no replica to call), %d after it (%d failed, %d without the sidecar)",
		before.Sent, before.Failed, after.Sent, after.Failed, after.WithoutSidecar)
	if before.Failed == 0 {
		t.Errorf("no creation failed while the operator had no replica: the pods did not reach the webhook, so the test shows nothing")
	}
	if after.Failed != 0 || after.WithoutSidecar != 0 {
		t.Errorf("after the replica reported Ready %d of %d creations failed (first: %v) and %d came back without the sidecar; want 0 and 0",
			after.Failed, after.Sent, after.FirstFailure, after.WithoutSidecar)
	}
	if after.Sent < 30 {
		t.Errorf("only %d creations were sent after the replica reported Ready; want at least 30", after.Sent)
	}
}

func scaleOperator(t *testing.T, replicas int32) {
	t.Helper()
	dep := &appsv1.Deployment{}
	dep.Namespace, dep.Name = operatorNamespace, operatorName
	must(t, testutil.Edit(ctx, k8s, dep, func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To(replicas) }))
}

func operatorPods(t *testing.T) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	must(t, k8s.List(ctx, &pods, client.InNamespace(operatorNamespace), client.MatchingLabels{"control-plane": "controller-manager"}))
	return pods.Items
}

func podNames(pods []corev1.Pod) string {
	var s string
	for _, p := range pods {
		s += p.Name + " "
	}
	return s
}
