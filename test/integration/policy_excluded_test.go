package integration

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// TestPolicyLeavesExcludedNamespacesAlone: a namespace the operator is told to exclude
// (--excluded-namespaces) is never injected by the policies, as the webhook's registration
// never sends its pods to the webhook; the same set's pods elsewhere are.
func TestPolicyLeavesExcludedNamespacesAlone(t *testing.T) {
	needsKubernetes(t, policyModeMinor, "policy mode (MutatingAdmissionPolicy v1)")
	excluded := newNamespace(t, nil)
	startPolicyReconciler(t, excluded)
	registerPolicyModeWebhook(t)
	createSet(t, agentSet("policy-excluded", "policy-excluded"))
	served := appPod(newNamespace(t, nil), "served", "policy-excluded", true)
	served.Labels[noWebhookLabel] = "true"
	left := appPod(excluded, "left", "policy-excluded", true)
	left.Labels[noWebhookLabel] = "true"
	eventually(t, "the policy to inject the pod of a namespace it serves", func() (bool, string) {
		got, err := dryRun(t, served)
		if err != nil {
			return false, err.Error()
		}
		names := containerNames(got.Spec.Containers)
		return cmp.Equal(names, []string{"app", "policy-excluded-agent"}), fmt.Sprintf("containers %v", names)
	})
	got, err := dryRun(t, left)
	must(t, err)
	if names := containerNames(got.Spec.Containers); !cmp.Equal(names, []string{"app"}) {
		t.Errorf("the policy injected a pod of the excluded namespace %s: containers %v", excluded, names)
	}
	if v, ok := got.Annotations[appsv1alpha1.WebhookRouteAnnotation]; ok {
		t.Errorf("the policy routed a pod of the excluded namespace %s to the webhook (%s)", excluded, v)
	}
	if v, ok := got.Labels[appsv1alpha1.WebhookRouteLabel]; ok {
		t.Errorf("the policy labelled a pod of the excluded namespace %s for the webhook (%s)", excluded, v)
	}
}
