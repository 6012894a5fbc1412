package rollout_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/rollout"
	"github.com/sidecarset/sidecarset-operator/internal/rollout/podtest"
)

// TestFootprint: what a set's sidecars in a Pod request and limit counts the containers the set
// declares and the Pod's record lists, native sidecars included, and nothing else.
func TestFootprint(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	res := func(cpu, mem string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")},
		}
	}
	set := podtest.Set(t, "mesh", nil, func(s *appsv1alpha1.SidecarSet) {
		s.Spec.InitContainers = []appsv1alpha1.SidecarContainer{
			{Container: corev1.Container{Name: "proxy", Image: "registry.example/proxy:1", RestartPolicy: &always}},
			{Container: corev1.Container{Name: "setup", Image: "registry.example/setup:1"}},
		}
	})
	record := func(hash string, containers, initContainers []string) podtest.Opt {
		return func(p *corev1.Pod) {
			podtest.SetAnnotation(p, appsv1alpha1.StatusAnnotation,
				inject.Records{"mesh": {Hash: hash, Containers: containers, InitContainers: initContainers}}.Encode())
		}
	}
	spec := func(p *corev1.Pod) {
		p.Spec.Containers = []corev1.Container{{Name: "app", Resources: res("4", "8Gi")}, {Name: "mesh", Resources: res("100m", "64Mi")}}
		p.Spec.InitContainers = []corev1.Container{{Name: "setup", Resources: res("2", "1Gi")}, {Name: "proxy", RestartPolicy: &always, Resources: res("250m", "128Mi")}}
	}
	both := rollout.Footprint{
		Requests: rollout.Amounts{CPU: 350, Memory: 192 << 20},
		Limits:   rollout.Amounts{Memory: 192 << 20, EphemeralStorage: 2 << 30},
		// The proxy's part.
		NativeRequests: rollout.Amounts{CPU: 250, Memory: 128 << 20},
		NativeLimits:   rollout.Amounts{Memory: 128 << 20, EphemeralStorage: 1 << 30},
	}
	meshOnly := rollout.Footprint{Requests: rollout.Amounts{CPU: 100, Memory: 64 << 20}, Limits: rollout.Amounts{Memory: 64 << 20, EphemeralStorage: 1 << 30}}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want rollout.Footprint
	}{
		{"regular and native sidecars; the plain init container and the app left out",
			podtest.Pod(spec, record(set.Hash, []string{"mesh"}, []string{"proxy", "setup"})), both},
		{"an outdated pod counts what it runs", podtest.Pod(spec, record("0000000000000000", []string{"mesh"}, []string{"proxy", "setup"})), both},
		{"the pod's own proxy, which the record does not list", podtest.Pod(spec, record(set.Hash, []string{"mesh"}, []string{"setup"})), meshOnly},
		{"an outdated pod's own proxy", podtest.Pod(spec, record("0000000000000000", []string{"mesh"}, nil)), meshOnly},
		{"a record naming the app container does not make it count",
			podtest.Pod(spec, record(set.Hash, []string{"mesh", "app"}, []string{"proxy", "setup"})), both},
		{"not injected", podtest.Pod(spec), rollout.Footprint{}},
		{"injected, no resources", podtest.Pod(record(set.Hash, []string{"mesh"}, nil), func(p *corev1.Pod) {
			p.Spec.Containers = []corev1.Container{{Name: "app"}, {Name: "mesh"}}
		}), rollout.Footprint{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, selected := rollout.Classify(set, tt.pod, func(string) map[string]string { return nil }, podtest.Scope)
			if !selected {
				t.Fatal("not selected")
			}
			if s.Footprint != tt.want {
				t.Errorf("footprint %+v, want %+v", s.Footprint, tt.want)
			}
		})
	}
}
