package integration

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/sidecarset/sidecarset-operator/internal/podrules"
)

// TestProjectedTokenSetIsAcceptedAndInjected: a SidecarSet that mounts a projected
// ServiceAccount token into its sidecar (Istio's istio-token) is valid, although Kubernetes
// refuses such a volume in a pod that names no ServiceAccount: the ServiceAccount admission
// plugin names the namespace's default one in every pod before validation. The set is created
// (our validating webhook accepts it), and a pod that names no ServiceAccount is injected with
// the token volume and admitted through the production chain.
func TestProjectedTokenSetIsAcceptedAndInjected(t *testing.T) {
	ns := newNamespace(t, nil)
	set := agentSet("sa-token", "mesh")
	set.Spec.Volumes = append(set.Spec.Volumes, corev1.Volume{Name: "istio-token", VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
			Audience: "istio-ca", ExpirationSeconds: ptr.To[int64](43200), Path: "istio-token"}}}}}})
	agent := &set.Spec.Containers[0]
	agent.VolumeMounts = append(agent.VolumeMounts, corev1.VolumeMount{Name: "istio-token", MountPath: "/var/run/secrets/tokens"})
	createSet(t, set)

	pod := appPod(ns, "mesh-0", "mesh", true)
	must(t, k8s.Create(ctx, pod))
	got := getPod(t, pod)
	if !slices.Contains(containerNames(got.Spec.Containers), agent.Name) ||
		!slices.ContainsFunc(got.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "istio-token" && v.Projected != nil }) {
		t.Errorf("the pod was not injected with the sidecar and its token volume: containers %v, volumes %v",
			containerNames(got.Spec.Containers), got.Spec.Volumes)
	}
	if got.Spec.ServiceAccountName != podrules.DefaultServiceAccount {
		t.Errorf("serviceAccountName = %q, want the ServiceAccount plugin's %q", got.Spec.ServiceAccountName, podrules.DefaultServiceAccount)
	}
}
