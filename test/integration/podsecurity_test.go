package integration

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
)

// restricted makes a container meet the restricted Pod Security Standard.
func restricted(c *corev1.Container) {
	c.SecurityContext = &corev1.SecurityContext{
		RunAsNonRoot: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// TestPodSecurityStaysEffectiveOnInjectedPods injects a privileged sidecar into a pod of a
// namespace that enforces the restricted standard: PodSecurity admission refuses the pod,
// naming the sidecar, and the SidecarSet gets an event saying it is the cause.
func TestPodSecurityStaysEffectiveOnInjectedPods(t *testing.T) {
	ns := newNamespace(t, map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	set := agentSet("privileged-agent", "psa")
	set.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	createSet(t, set)

	// The pod as written meets the standard: without the label it is admitted.
	pod := appPod(ns, "psa-0", "psa", false)
	restricted(&pod.Spec.Containers[0])
	must(t, k8s.Create(ctx, pod))

	injected := appPod(ns, "psa-1", "psa", true)
	restricted(&injected.Spec.Containers[0])
	err := k8s.Create(ctx, injected)
	if !apierrors.IsForbidden(err) || !contains(err.Error(), "violates PodSecurity", `"privileged-agent-agent"`) {
		t.Fatalf("creating the opted-in pod: %v; want PodSecurity's refusal naming the sidecar container", err)
	}
	waitForSetEvent(t, set, "ViolatesPodSecurity", "a pod of namespace "+ns, "privileged")
}
