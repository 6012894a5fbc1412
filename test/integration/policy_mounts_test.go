package integration

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/policy"
)

// TestPolicyModeInjectsPodsWithManyMounts: a pod whose app mounts 400 volumes, injected by a set
// that shares them (shareVolumePolicy), is stored in policy mode as in webhook mode. The policy
// does not compute the sharing for so many mounts (its cost would pass the API server's limit
// for one expression, and the policy fails closed): it routes the pod to the webhook.
func TestPolicyModeInjectsPodsWithManyMounts(t *testing.T) {
	needsKubernetes(t, policyModeMinor, "policy mode (MutatingAdmissionPolicy v1)")
	set := agentSet("policy-mounts", "policy-mounts")
	set.Spec.Containers[0].ShareVolumePolicy.Type = appsv1alpha1.ShareVolumePolicyEnabled
	set = createSet(t, set)
	pod := appPod(newNamespace(t, nil), "many-mounts", "policy-mounts", true)
	for k := range 400 {
		name := fmt.Sprintf("m-%d", k)
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: name, MountPath: "/m/" + name})
	}
	want := create(t, pod)
	if want.Pod == nil {
		t.Fatalf("webhook mode refuses the pod: %s", want.Error)
	}
	if n := len(want.Pod.Spec.Containers[1].VolumeMounts); n < 400 {
		t.Fatalf("webhook mode shares %d mounts into the sidecar, want the app's 400 and more", n)
	}

	compiled, err := policy.Compile(set, []*appsv1alpha1.SidecarSet{set}, nil, policyOptions(inject.Scope{OperatorNamespace: operatorNamespace}))
	must(t, err)
	createPolicy(t, compiled)
	registerPolicyModeWebhook(t)
	alone := pod.DeepCopy()
	alone.Labels[noWebhookLabel] = "true"
	eventually(t, "policy mode to store the webhook's pod", func() (bool, string) {
		if diff := cmp.Diff(want, create(t, pod)); diff != "" {
			return false, "policy mode differs from webhook mode (-webhook +policy):\n" + diff
		}
		return isRouted(pod, create(t, alone))
	})
}
