package inject_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// TestOverrideWinsOverResourcesPolicy: a sidecar whose cpu limit a resourcesPolicy computes
// from the app's takes the pod's override instead, at injection and when the app container
// is resized in place; the resources the override leaves alone still follow the app.
func TestOverrideWinsOverResourcesPolicy(t *testing.T) {
	const key = "mesh.example.com/proxy-cpu-limit"
	set := webSet("mesh", corev1.Container{Name: "proxy", Image: "proxy:1"})
	set.Spec.Containers[0].ResourcesPolicy = &appsv1alpha1.ResourcesPolicy{ResourcesExpr: appsv1alpha1.ResourcesExpr{
		Requests: map[corev1.ResourceName]appsv1alpha1.ResourceExpression{corev1.ResourceCPU: "cpu * 0.25"},
		Limits:   map[corev1.ResourceName]appsv1alpha1.ResourceExpression{corev1.ResourceCPU: "cpu * 0.5"},
	}}
	set.Spec.Overrides = []appsv1alpha1.Override{{Annotation: key, Container: "proxy", Field: appsv1alpha1.OverrideLimitsCPU}}
	appCPU := func(cpu string) corev1.ResourceRequirements {
		q := resource.MustParse(cpu)
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q}, Limits: corev1.ResourceList{corev1.ResourceCPU: q}}
	}
	pod := webPod(corev1.Container{Name: "app", Image: "app:1", Resources: appCPU("800m")})
	pod.Annotations = map[string]string{key: "300m"}
	sets := compile(t, set)
	res, err := inject.Apply(inject.Input{Pod: pod, Sets: sets})
	if err != nil {
		t.Fatal(err)
	}
	injected := res.Pod()
	proxy := injected.Spec.Containers[1].Resources
	if proxy.Limits.Cpu().String() != "300m" || proxy.Requests.Cpu().String() != "200m" {
		t.Fatalf("proxy at injection: requests %s, limits %s; want the computed 200m and the pod's 300m", proxy.Requests.Cpu(), proxy.Limits.Cpu())
	}

	// The app is resized in place to 1 cpu: the request follows it, the limit stays the pod's.
	injected.ResourceVersion = "7"
	injected.Spec.Containers[0].Resources = appCPU("1")
	u, err := inject.UpdateInPlace(inject.Input{Pod: injected, Sets: sets}, "mesh", sets[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(u.Blocked) > 0 || len(u.Resources) != 1 {
		t.Fatalf("update after the app's resize: blocked %q, resources %+v; want one resize", u.Blocked, u.Resources)
	}
	if to := u.Resources[0].To; to.Requests.Cpu().String() != "250m" || to.Limits.Cpu().String() != "300m" {
		t.Errorf("proxy resized to requests %s, limits %s; want the computed 250m and the pod's 300m", to.Requests.Cpu(), to.Limits.Cpu())
	}
}
