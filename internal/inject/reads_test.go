package inject_test

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/inject/injecttest"
	"github.com/sidecarset/sidecarset-operator/test/builders"
)

// TestReadsOf: a set reads of the pod what its features need and nothing more, so that a set
// using none of them costs nothing for them at admission; what the record names and what
// the sets inject are compared in full. That Apply reads nothing beyond what it declares is
// TestPodInjectorMatchesEngine's (the webhook decodes only what Reads says, and must reach the
// engine's answer from the whole pod).
func TestReadsOf(t *testing.T) {
	agent := func(edit func(*appsv1alpha1.SidecarContainer)) *appsv1alpha1.SidecarSet {
		sc := appsv1alpha1.SidecarContainer{Container: corev1.Container{Name: "agent", Image: "agent:1"}}
		if edit != nil {
			edit(&sc)
		}
		return builders.SidecarSet("agent", builders.Selecting("shop"), builders.WithSidecars(sc),
			builders.WithVolumes(corev1.Volume{Name: "agent-state"}))
	}
	podBound := corev1.LimitRange{Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypePod,
		Max: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}
	containerDefaults := corev1.LimitRange{Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
		Default: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}}}}}
	for _, c := range []struct {
		name        string
		set         *appsv1alpha1.SidecarSet
		limitRanges []corev1.LimitRange
		annotations map[string]string
		want        inject.Reads
	}{
		{name: "plain", set: agent(nil), want: inject.Reads{}},
		{name: "transferEnv", set: agent(func(sc *appsv1alpha1.SidecarContainer) {
			sc.TransferEnv = []appsv1alpha1.TransferEnvVar{{SourceContainerName: "app", EnvName: "LOG_LEVEL"}}
		}), want: inject.Reads{AppEnv: true}},
		{name: "shareVolumePolicy", set: agent(func(sc *appsv1alpha1.SidecarContainer) {
			sc.ShareVolumePolicy.Type = appsv1alpha1.ShareVolumePolicyEnabled
		}), want: inject.Reads{AppVolumeMounts: true}},
		{name: "ports", set: agent(func(sc *appsv1alpha1.SidecarContainer) {
			sc.Ports = []corev1.ContainerPort{{ContainerPort: 9090}}
		}), want: inject.Reads{Ports: true}},
		{name: "resources", set: agent(func(sc *appsv1alpha1.SidecarContainer) {
			sc.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}
		}), want: inject.Reads{PodResources: true}},
		{name: "a LimitRange's defaults", set: agent(nil), limitRanges: []corev1.LimitRange{containerDefaults},
			want: inject.Reads{PodResources: true}},
		{name: "a LimitRange's per-pod bound", set: agent(nil), limitRanges: []corev1.LimitRange{podBound},
			want: inject.Reads{PodResources: true, ContainerResources: true}},
		{name: "a record names what it injected", set: agent(nil),
			annotations: map[string]string{appsv1alpha1.StatusAnnotation: `{"old":{"hash":"1","containers":["old-agent"],"initContainers":["old-init"],"volumes":["old-data"]}}`},
			want:        inject.Reads{Compared: sets.New("old-agent", "old-init", "old-data")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := inject.ReadsOf(injecttest.Compile(t, c.set), c.limitRanges, c.annotations)
			want := c.want
			want.Compared = sets.New("agent", "agent-state").Union(c.want.Compared)
			if !got.Compared.Equal(want.Compared) {
				t.Errorf("compared in full: %v, want %v", sets.List(got.Compared), sets.List(want.Compared))
			}
			got.Compared, want.Compared = nil, nil
			if !reflect.DeepEqual(got, want) {
				t.Errorf("reads %+v, want %+v", got, want)
			}
		})
	}
}
