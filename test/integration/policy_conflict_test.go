package integration

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPolicyOfAStoppedSetRoutesItsPods: two SidecarSets that can select one pod inject one
// container name; the newer was stored while validation was down, so the webhook stops it and
// injects nothing of it. Its policy must not inject it either: a pod that only the stopped set
// selects is routed by the policy, and stored without its sidecar, as in webhook mode.
func TestPolicyOfAStoppedSetRoutesItsPods(t *testing.T) {
	needsKubernetes(t, policyModeMinor, "policy mode (MutatingAdmissionPolicy v1)")
	startPolicyReconciler(t)
	registerPolicyModeWebhook(t)
	// Created in one second, the two are ordered by name: the older's sorts first.
	older := agentSet("stop-a-older", "stop-a-older")
	older.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "stop"}}
	createSet(t, older)
	newer := agentSet("stop-b-newer", "stop-b-newer")
	newer.Spec.Containers[0].Name = older.Spec.Containers[0].Name
	withoutSidecarSetValidation(t, func() {
		must(t, k8s.Create(ctx, newer))
		t.Cleanup(func() { deleteIgnoreNotFound(t, newer) })
	})
	eventually(t, "the webhook to stop the newer set", func() (bool, string) {
		conflicts := op.Sets.Load().Conflicts[newer.Name]
		return len(conflicts) == 1 && conflicts[0].Stopped, fmt.Sprintf("conflicts %+v", conflicts)
	})

	// Only the newer set selects the pod (it has no tier label).
	pod := appPod(newNamespace(t, nil), "stopped", "stop-b-newer", true)
	alone := pod.DeepCopy()
	alone.Labels[noWebhookLabel] = "true"
	eventually(t, "the stopped set's policy to route its pods, and nothing to inject them", func() (bool, string) {
		got := create(t, pod)
		if got.Pod == nil {
			return false, "refused: " + got.Error
		}
		if names := containerNames(got.Pod.Spec.Containers); !cmp.Equal(names, []string{"app"}) {
			return false, fmt.Sprintf("containers %v, want app alone", names)
		}
		return isRouted(pod, create(t, alone))
	})
}
