package integration

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// TestPolicyModeNeverInjectsMirrorPods: in policy mode a mirror pod (the kubelet's object for a
// static pod) is left as written by the set's policy, as the webhook leaves it in webhook mode.
// The same pod without the mirror annotation is injected by the policy alone.
func TestPolicyModeNeverInjectsMirrorPods(t *testing.T) {
	needsKubernetes(t, policyModeMinor, "policy mode (MutatingAdmissionPolicy v1)")
	startPolicyReconciler(t)
	registerPolicyModeWebhook(t)
	set := agentSet("policy-mirror", "policy-static")
	// A mirror pod may not reference a ConfigMap.
	set.Spec.Volumes[0].VolumeSource = corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	createSet(t, set)
	ns := newNamespace(t, nil)

	mirror := appPod(ns, "static-0", "policy-static", true)
	mirror.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "3c9a1f2e"}
	mirror.Spec.NodeName = "node-1" // the API server requires it of mirror pods
	mirrorAlone := mirror.DeepCopy()
	mirrorAlone.Labels[noWebhookLabel] = "true"
	plainAlone := appPod(ns, "static-1", "policy-static", true)
	plainAlone.Labels[noWebhookLabel] = "true"

	eventually(t, "the policy to inject the plain pod", func() (bool, string) {
		plain := create(t, plainAlone)
		if plain.Pod == nil {
			return false, "the plain pod was refused: " + plain.Error
		}
		if names := containerNames(plain.Pod.Spec.Containers); !cmp.Equal(names, []string{"app", "policy-mirror-agent"}) {
			return false, fmt.Sprintf("the policy alone gave the plain pod containers %v", names)
		}
		return true, ""
	})
	for _, pod := range []*corev1.Pod{mirrorAlone, mirror} {
		got := create(t, pod)
		if got.Pod == nil {
			t.Fatalf("mirror pod %v refused: %s", pod.Labels, got.Error)
		}
		if names := containerNames(got.Pod.Spec.Containers); !cmp.Equal(names, []string{"app"}) || !cmp.Equal(got.Pod.Annotations, pod.Annotations) {
			t.Errorf("mirror pod %v changed: containers %v, annotations %v", pod.Labels, names, got.Pod.Annotations)
		}
	}
}
