package integration

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// TestPolicyModeWebhookTakesEitherRouteMark: with the pod webhook registered as policy mode
// registers it, a pod reaches the webhook when it carries the route label (as the policies
// mark it now, with the annotation), or the route annotation alone (as the policies of 0.1.0
// mark it while an upgrade replaces them); the webhook injects it and it is stored without
// either mark. A pod with neither mark is not sent to the webhook.
func TestPolicyModeWebhookTakesEitherRouteMark(t *testing.T) {
	needsKubernetes(t, policyModeMinor, "policy mode (MutatingAdmissionPolicy v1)")
	registerPolicyModeWebhook(t)
	createSet(t, agentSet("policy-routed", "policy-routed"))
	ns := newNamespace(t, nil)

	byLabel := appPod(ns, "by-label", "policy-routed", true)
	byLabel.Labels[appsv1alpha1.WebhookRouteLabel] = appsv1alpha1.WebhookRouteValue
	byAnnotation := appPod(ns, "by-annotation", "policy-routed", true)
	byAnnotation.Annotations = map[string]string{appsv1alpha1.WebhookRouteAnnotation: appsv1alpha1.WebhookRouteValue}
	for _, pod := range []*corev1.Pod{byLabel, byAnnotation} {
		got, err := dryRun(t, pod)
		if err != nil {
			t.Fatalf("%s: refused: %v", pod.Name, err)
		}
		if names := containerNames(got.Spec.Containers); !cmp.Equal(names, []string{"app", "policy-routed-agent"}) {
			t.Errorf("%s: the webhook did not inject it: containers %v", pod.Name, names)
		}
		if _, ok := got.Labels[appsv1alpha1.WebhookRouteLabel]; ok {
			t.Errorf("%s: stored with the route label: labels %v", pod.Name, got.Labels)
		}
		if _, ok := got.Annotations[appsv1alpha1.WebhookRouteAnnotation]; ok {
			t.Errorf("%s: stored with the route annotation: annotations %v", pod.Name, got.Annotations)
		}
		if got.Labels["app"] != "policy-routed" || got.Labels[appsv1alpha1.InjectLabel] != appsv1alpha1.InjectLabelValue {
			t.Errorf("%s: the pod's own labels changed: %v", pod.Name, got.Labels)
		}
	}

	unmarked := appPod(ns, "unmarked", "policy-routed", true)
	got, err := dryRun(t, unmarked)
	must(t, err)
	if names := containerNames(got.Spec.Containers); !cmp.Equal(names, []string{"app"}) {
		t.Errorf("a pod without a route mark reached the webhook (no policy runs here): containers %v", names)
	}

}
