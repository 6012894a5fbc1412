package inject_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// TestForgedRecordedOverrideIsCheckedOnPolicyResize: a set lets pods override its
// proxy's memory limit up to 1Gi (rule) and computes the proxy's CPU from the app's
// (resourcesPolicy). The pod's author (who may UPDATE the pod's annotations; there is no
// UPDATE webhook) edits the record's "overrides" to 64Gi. The pod is at the set's current hash,
// so UpdateInPlace takes the resourcesPolicy path (withPolicyResize -> policyResizes), which
// must run the override's rule on the recorded value: otherwise the rollout would resize the
// sidecar to 64Gi with the operator's pods/resize permission. The pod is not updatable, and
// the reason names the recorded value and the override.
// docs/guarantees.md: "Overridden values it lists are used only for the overrides the set
// declares, and only as the pod's author could have set them by annotation".
func TestForgedRecordedOverrideIsCheckedOnPolicyResize(t *testing.T) {
	const key = "mesh.example.com/proxy-memory-limit"
	set := webSet("mesh", corev1.Container{Name: "proxy", Image: "proxy:1",
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}}})
	set.Spec.Containers[0].ResourcesPolicy = &appsv1alpha1.ResourcesPolicy{ResourcesExpr: appsv1alpha1.ResourcesExpr{
		Requests: map[corev1.ResourceName]appsv1alpha1.ResourceExpression{corev1.ResourceCPU: "cpu * 0.25"},
	}}
	set.Spec.Overrides = []appsv1alpha1.Override{{Annotation: key, Container: "proxy", Field: appsv1alpha1.OverrideLimitsMemory,
		Rule: "amount.compareTo(quantity('1Gi')) <= 0", Message: "at most 1Gi"}}
	cpu := func(v string) corev1.ResourceRequirements {
		q := resource.MustParse(v)
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q}, Limits: corev1.ResourceList{corev1.ResourceCPU: q}}
	}
	sets := compile(t, set)

	// Control: the annotation itself is refused at admission.
	bad := webPod(corev1.Container{Name: "app", Image: "app:1", Resources: cpu("800m")})
	bad.Annotations = map[string]string{key: "64Gi"}
	if _, err := inject.Apply(inject.Input{Pod: bad, Sets: sets}); err == nil {
		t.Fatal("control: the rule should refuse 64Gi at admission")
	}

	pod := webPod(corev1.Container{Name: "app", Image: "app:1", Resources: cpu("800m")})
	pod.Annotations = map[string]string{key: "512Mi"}
	res, err := inject.Apply(inject.Input{Pod: pod, Sets: sets})
	if err != nil {
		t.Fatal(err)
	}
	running := res.Pod()
	running.ResourceVersion = "7"
	// The pod's author edits the record (and may leave the annotation as it was).
	rec := running.Annotations[appsv1alpha1.StatusAnnotation]
	forged := strings.Replace(rec, `"512Mi"`, `"64Gi"`, 1)
	if forged == rec {
		t.Fatalf("record %s does not carry the override", rec)
	}
	running.Annotations[appsv1alpha1.StatusAnnotation] = forged
	// The app is resized in place (or the record alone is changed: NeedsPolicyResize is true
	// as soon as the forged value differs from the sidecar's).
	if !inject.NeedsPolicyResize(sets[0], running) {
		t.Log("NeedsPolicyResize: false")
	} else {
		t.Log("NeedsPolicyResize: true (the rollout plans this pod for a resize)")
	}
	u, err := inject.UpdateInPlace(inject.Input{Pod: running, Sets: sets}, "mesh", sets[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range u.Resources {
		if m := r.To.Limits.Memory(); m.Cmp(resource.MustParse("1Gi")) > 0 {
			t.Fatalf("record %s forged by the pod's author: the in-place update resizes %s to limits.memory=%s (the rule allows at most 1Gi; blocked %q)", forged, r.Name, m, u.Blocked)
		}
	}
	if len(u.Blocked) == 0 || !strings.Contains(strings.Join(u.Blocked, "\n"), key+`="64Gi"`) || u.Recreatable {
		t.Fatalf("blocked %q (recreatable %v): want the pod not updatable, naming %s=\"64Gi\"", u.Blocked, u.Recreatable, key)
	}
	if u.ResizePatch() != nil || u.Patch() != nil {
		t.Fatalf("a blocked update patches: resize %v, patch %v", u.ResizePatch(), u.Patch())
	}
}
