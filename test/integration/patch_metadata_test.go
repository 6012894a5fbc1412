package integration

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/test/testutil"
)

// TestPatchPodMetadata: a pod created through the production admission chain carries the
// annotations its SidecarSet patches, merged and overwritten as the policies say, and only
// for the keys the operator's --patch-pod-metadata-allowed-keys allows; the pod's record
// lists what was patched.
func TestPatchPodMetadata(t *testing.T) {
	ns := newNamespace(t, nil)
	config := allowedAnnotationPrefix + "config"
	port := allowedAnnotationPrefix + "port"
	team := "team.example.com/owner" // not allowed by the suite's operator
	set := agentSet("patch-metadata", "patched")
	set.Spec.PatchPodMetadata = []appsv1alpha1.PatchPodMetadata{
		{PatchPolicy: appsv1alpha1.PatchPolicyMergePatchJSON, Annotations: map[string]string{config: `{"level":"debug"}`}},
		{PatchPolicy: appsv1alpha1.PatchPolicyOverwrite, Annotations: map[string]string{port: "2020", team: "observability"}},
	}
	createSet(t, set)

	pod := appPod(ns, "patched-0", "patched", true)
	pod.Annotations = map[string]string{config: `{"format":"json"}`, port: "8080"}
	must(t, k8s.Create(ctx, pod))

	var got corev1.Pod
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(pod), &got))
	want := map[string]string{config: `{"format":"json","level":"debug"}`, port: "2020"}
	for k, v := range want {
		if got.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, got.Annotations[k], v)
		}
	}
	if v, ok := got.Annotations[team]; ok {
		t.Errorf("annotation %s = %q: the operator does not allow that key, it must not be patched", team, v)
	}
	recs, err := inject.ParseRecords(got.Annotations)
	must(t, err)
	if rec := recs["patch-metadata"]; len(rec.Annotations) != len(want) || rec.Annotations[config] != want[config] || rec.Annotations[port] != want[port] {
		t.Errorf("record of patch-metadata lists annotations %v, want %v", rec.Annotations, want)
	}
}

// TestRollingUpdatePatchesAnnotations: a rolling update of a set whose patched annotations
// changed applies them to the running pods in place (same UID): a new value is set, a key the
// set no longer patches is removed, and a key whose value someone changed since stays theirs.
func TestRollingUpdatePatchesAnnotations(t *testing.T) {
	ns := newNamespace(t, nil)
	startFakeKubelet(t, ns, 100*time.Millisecond)
	kept, changed, dropped := allowedAnnotationPrefix+"kept", allowedAnnotationPrefix+"changed", allowedAnnotationPrefix+"dropped"
	set := rollingSet("roll-meta", "roll-meta")
	set.Spec.PatchPodMetadata = []appsv1alpha1.PatchPodMetadata{{PatchPolicy: appsv1alpha1.PatchPolicyOverwrite,
		Annotations: map[string]string{kept: "1", changed: "1", dropped: "1"}}}
	set = createSet(t, set)
	pods := rolloutPods(t, ns, "roll-meta", 2)
	waitForCounts(t, set, counts{2, 2, 2, 2})
	// Someone takes over the dropped key on the first pod.
	must(t, testutil.Edit(ctx, k8s, pods[0].DeepCopy(), func(edited *corev1.Pod) { edited.Annotations[dropped] = "mine" }))
	before := getPod(t, pods[1])

	setImages(t, set, func(s *appsv1alpha1.SidecarSet) {
		s.Spec.PatchPodMetadata[0].Annotations = map[string]string{kept: "1", changed: "2"}
	})
	rollingCondition(t, set, "Complete", "2 of 2 matched pods carry hash")
	for i, p := range pods {
		after := getPod(t, p)
		if i == 1 && after.UID != before.UID {
			t.Errorf("pod %s was recreated", p.Name)
		}
		wantDropped := map[int]string{0: "mine"}[i]
		if after.Annotations[kept] != "1" || after.Annotations[changed] != "2" || after.Annotations[dropped] != wantDropped {
			t.Errorf("pod %s annotations %s=%q %s=%q %s=%q, want 1, 2 and %q", p.Name, kept, after.Annotations[kept],
				changed, after.Annotations[changed], dropped, after.Annotations[dropped], wantDropped)
		}
	}
}
