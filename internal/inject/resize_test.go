package inject_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// TestResizeRefusal: the resizes Kubernetes refuses or never applies are named before any
// patch is sent; the others are not.
func TestResizeRefusal(t *testing.T) {
	guaranteed := func(cpu, memory string) corev1.ResourceRequirements {
		l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
		return corev1.ResourceRequirements{Requests: l, Limits: l.DeepCopy()}
	}
	base := func() *appsv1alpha1.SidecarSet {
		s := webSet("agent", corev1.Container{Name: "agent", Image: "agent:1", Resources: guaranteed("100m", "64Mi")})
		s.Spec.InitContainers = []appsv1alpha1.SidecarContainer{
			{Container: corev1.Container{Name: "setup", Image: "setup:1", Resources: guaranteed("100m", "64Mi")}},
			{Container: corev1.Container{Name: "proxy", Image: "proxy:1", Resources: guaranteed("100m", "64Mi"),
				RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}},
		}
		return s
	}
	tests := []struct {
		name   string
		change func(s *appsv1alpha1.SidecarSet)
		want   string // a part of the refusal; "" for none
	}{
		{"a native sidecar, the QoS class kept", func(s *appsv1alpha1.SidecarSet) { s.Spec.InitContainers[1].Resources = guaranteed("200m", "128Mi") }, ""},
		{"a regular sidecar, the QoS class kept", func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Resources = guaranteed("50m", "32Mi") }, ""},
		{"a plain init container", func(s *appsv1alpha1.SidecarSet) { s.Spec.InitContainers[0].Resources = guaranteed("200m", "128Mi") },
			"init container setup is not a native sidecar"},
		{"Guaranteed to Burstable", func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("256Mi")
		}, "QoS class from Guaranteed to Burstable"},
		{"image only", func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "agent:2" }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := inject.Apply(inject.Input{Pod: webPod(corev1.Container{Name: "app", Image: "app:1", Resources: guaranteed("1", "1Gi")}), Sets: compile(t, base())})
			if err != nil {
				t.Fatal(err)
			}
			set := base()
			tt.change(set)
			u, err := inject.UpdateInPlace(inject.Input{Pod: res.Pod(), Sets: compile(t, set)}, "agent", nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(u.Blocked) > 0 {
				t.Fatalf("Blocked = %q", u.Blocked)
			}
			got := u.ResizeRefusal()
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("ResizeRefusal() = %q, want %q", got, tt.want)
			}
		})
	}
}
