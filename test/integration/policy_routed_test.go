package integration

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	ourwebhook "github.com/sidecarset/sidecarset-operator/internal/webhook"
)

// TestPolicyModeWebhookTakesEitherRouteMark: in policy mode, with the set's policy in force and
// the pod webhook registered as policy mode registers it, a pod with no route mark is injected
// by the policy alone, with no webhook call. A pod carrying the route annotation alone (as the
// policies of 0.1.0 mark the pods they route, while an upgrade replaces them) or the route
// label alone (its author's) reaches the webhook; either way it is stored as the unmarked pod
// is, without either mark.
func TestPolicyModeWebhookTakesEitherRouteMark(t *testing.T) {
	needsKubernetes(t, policyModeMinor, "policy mode (MutatingAdmissionPolicy v1)")
	startPolicyReconciler(t)
	registerPolicyModeWebhook(t)
	createSet(t, agentSet("policy-routed", "policy-routed"))
	ns := newNamespace(t, nil)

	unmarked := appPod(ns, "unmarked", "policy-routed", true)
	var want *corev1.Pod
	eventually(t, "the set's policy to inject an unmarked pod with no webhook call", func() (bool, string) {
		before := webhookRequests(t, ourwebhook.PodInjectorPath)
		got, err := dryRun(t, unmarked)
		if err != nil {
			return false, err.Error()
		}
		calls := webhookRequests(t, ourwebhook.PodInjectorPath) - before
		want = got
		names := containerNames(got.Spec.Containers)
		return cmp.Equal(names, []string{"app", "policy-routed-agent"}) && calls == 0, fmt.Sprintf("containers %v, %v webhook calls", names, calls)
	})

	byLabel := appPod(ns, "unmarked", "policy-routed", true)
	byLabel.Labels[appsv1alpha1.WebhookRouteLabel] = appsv1alpha1.WebhookRouteValue
	byAnnotation := appPod(ns, "unmarked", "policy-routed", true)
	byAnnotation.Annotations = map[string]string{appsv1alpha1.WebhookRouteAnnotation: appsv1alpha1.WebhookRouteValue}
	for mark, pod := range map[string]*corev1.Pod{"label": byLabel, "annotation": byAnnotation} {
		before := webhookRequests(t, ourwebhook.PodInjectorPath)
		got, err := dryRun(t, pod)
		if err != nil {
			t.Fatalf("the route %s alone: refused: %v", mark, err)
		}
		if calls := webhookRequests(t, ourwebhook.PodInjectorPath) - before; calls < 1 {
			t.Errorf("the route %s alone: the webhook was not called", mark)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("the route %s alone: stored otherwise than the unmarked pod (-unmarked +marked):\n%s", mark, diff)
		}
	}
}
