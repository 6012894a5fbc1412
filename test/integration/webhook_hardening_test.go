package integration

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// TestMirrorPodsAreNeverInjected: a mirror pod (the API object the kubelet creates for a
// static pod, which it runs from the manifest on its node) is admitted unchanged and counted as
// excluded, while the same pod without the mirror annotation is injected. An admin may create
// a pod with the annotation (the API server restricts mirror pods only for nodes, through
// NodeRestriction), so it goes through the real admission chain here.
func TestMirrorPodsAreNeverInjected(t *testing.T) {
	ns := newNamespace(t, nil)
	set := sidecarSet("mirror", "static")
	// A mirror pod may not reference a ConfigMap: with the sample's config volume, injecting it
	// gets it refused by the ServiceAccount plugin rather than stored with sidecars.
	set.Spec.Volumes[0].VolumeSource = corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	createSet(t, set)
	skipped := func() float64 {
		return metricSum(t, "sidecarset_pod_admissions_total", "result", "skipped", "reason", "MirrorPod")
	}
	before := skipped()

	mirror := appPod(ns, "static-0", "static", true)
	mirror.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "3c9a1f2e"}
	mirror.Spec.NodeName = "node-1" // the API server requires it of mirror pods
	must(t, k8s.Create(ctx, mirror))
	got := getPod(t, mirror)
	if names := containerNames(got.Spec.Containers); !slices.Equal(names, []string{"app"}) || got.Annotations[appsv1alpha1.StatusAnnotation] != "" {
		t.Errorf("mirror pod was injected: containers %v, annotations %v", names, got.Annotations)
	}
	if moved := skipped() - before; moved != 1 {
		t.Errorf(`admissions{result="skipped",reason="MirrorPod"} moved by %v, want 1`, moved)
	}

	// The same pod, not a mirror pod, is injected: the set does select it.
	plain := appPod(ns, "static-1", "static", true)
	must(t, k8s.Create(ctx, plain))
	if names := containerNames(getPod(t, plain).Spec.Containers); !slices.Equal(names, []string{"app", "mirror-agent"}) {
		t.Errorf("containers of the plain pod = %v, want [app mirror-agent]", names)
	}
	eventually(t, "status to count the mirror pod as excluded", func() (bool, string) {
		var s appsv1alpha1.SidecarSet
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(set), &s); err != nil {
			return false, err.Error()
		}
		return s.Status.MatchedPods == 1 && s.Status.ExcludedPods == 1,
			fmt.Sprintf("matched %d, excluded %d", s.Status.MatchedPods, s.Status.ExcludedPods)
	})
}
