package inject_test

import (
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// TestForgedRecordNeverTouchesAnnotationOutsideAllowList: the operator allows sets to patch
// example.com/* only. A pod's author (who writes the pod's record at CREATE, and may edit it
// later: there is no UPDATE webhook) adds to the record a patched annotation under a key the
// allow-list does not name, with the value the pod holds (another admission plugin's, e.g. a
// mesh's status annotation or a cost-centre label a policy stops users from editing). The
// in-place update then removes that annotation with the operator's identity: the strip of
// recorded annotations (stripAnnotations, patchedAnnotationEdits) never consults the
// allow-list. Expected: only keys the allow-list names are ever patched or removed.
func TestForgedRecordNeverTouchesAnnotationOutsideAllowList(t *testing.T) {
	allowed, err := inject.ParseKeyAllowList([]string{"example.com/*"})
	if err != nil {
		t.Fatal(err)
	}
	const protected = "policy.corp.example/cost-center"
	pod := webPod(corev1.Container{Name: "app", Image: "app:1"})
	res, err := inject.Apply(inject.Input{Pod: pod, Sets: compile(t, patchSet(appsv1alpha1.PatchPolicyOverwrite, map[string]string{"example.com/a": "1"})),
		AllowedAnnotations: &allowed})
	if err != nil {
		t.Fatal(err)
	}
	running := res.Pod()
	running.ResourceVersion = "7"
	running.Annotations[protected] = "cc-1234" // written by someone else than the pod's author
	rec := running.Annotations[appsv1alpha1.StatusAnnotation]
	forged := strings.Replace(rec, `"example.com/a":"1"`, `"example.com/a":"1","`+protected+`":"cc-1234"`, 1)
	if forged == rec {
		t.Fatalf("record %s has no patched annotations", rec)
	}
	running.Annotations[appsv1alpha1.StatusAnnotation] = forged

	next := patchSet(appsv1alpha1.PatchPolicyOverwrite, map[string]string{"example.com/a": "1"})
	next.Spec.Containers[0].Image = "agent:2"
	u, err := inject.UpdateInPlace(inject.Input{Pod: running, Sets: compile(t, next), AllowedAnnotations: &allowed}, "agent", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range u.Patch() {
		if strings.HasPrefix(op.Path, "/metadata/annotations/") && strings.Contains(op.Path, "policy.corp.example") {
			t.Errorf("the rollout's patch %s %s touches an annotation the allow-list (example.com/*) does not name; record %s", op.Operation, op.Path, forged)
		}
	}
	// Admission too: a CREATE with such a record strips the pod's own value.
	fresh := webPod(corev1.Container{Name: "app", Image: "app:1"})
	fresh.Annotations = map[string]string{protected: "cc-1234",
		appsv1alpha1.StatusAnnotation: `{"agent":{"hash":"0000000000000000","annotations":{"` + protected + `":"cc-1234"}}}`}
	res2, err := inject.Apply(inject.Input{Pod: fresh, Sets: compile(t, next), AllowedAnnotations: &allowed})
	if err != nil {
		t.Fatalf("admission refused a pod for a record it does not act on: %v", err)
	}
	if v, kept := res2.Pod().Annotations[protected]; !kept || v != "cc-1234" {
		t.Errorf("admission removed or changed %s, a key outside the allow-list, because a forged record listed it", protected)
	}
	if !strings.Contains(strings.Join(res2.Warnings, "\n"), strconv.Quote(protected)) {
		t.Errorf("admission warnings %q do not name %s, the key the record may not list", res2.Warnings, protected)
	}
}
