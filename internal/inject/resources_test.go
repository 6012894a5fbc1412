package inject_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/podrules"
)

// TestPodLevelResources: a pod that sets pod-level resources (spec.resources) is refused when
// the sidecars make its containers need more than they allow, naming the set and the sidecar's
// field; a pod whose own containers are already over it is left to the API server; otherwise
// the sidecars are injected and the pod's resources left alone.
func TestPodLevelResources(t *testing.T) {
	cpu := func(q string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}
	}
	budget := func(r corev1.ResourceRequirements) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Spec.Resources = &r }
	}
	sidecar := func(name string, r corev1.ResourceRequirements) appsv1alpha1.SidecarContainer {
		return appsv1alpha1.SidecarContainer{Container: corev1.Container{Name: name, Image: name + ":1", Resources: r}}
	}
	native := func(sc appsv1alpha1.SidecarContainer) appsv1alpha1.SidecarContainer {
		sc.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		return sc
	}
	tests := []struct {
		name     string
		appReqs  string // the app container's CPU request; "" for none
		pod      func(*corev1.Pod)
		sets     map[string][]appsv1alpha1.SidecarContainer // set name -> its containers (keys "i:" are init containers)
		refused  string                                     // "<set> <field>"; "" when injected
		injected int
		lrs      []corev1.LimitRange // the namespace's
	}{
		{name: "no pod-level resources", appReqs: "900m", pod: func(*corev1.Pod) {},
			sets: map[string][]appsv1alpha1.SidecarContainer{"a": {sidecar("proxy", corev1.ResourceRequirements{Requests: cpu("500m")})}}, injected: 1},
		{name: "the sidecar fits", appReqs: "400m", pod: budget(corev1.ResourceRequirements{Requests: cpu("1")}),
			sets: map[string][]appsv1alpha1.SidecarContainer{"a": {sidecar("proxy", corev1.ResourceRequirements{Requests: cpu("500m")})}}, injected: 1},
		{name: "the sidecar requests too much", appReqs: "600m", pod: budget(corev1.ResourceRequirements{Requests: cpu("1")}),
			sets:    map[string][]appsv1alpha1.SidecarContainer{"a": {sidecar("proxy", corev1.ResourceRequirements{Requests: cpu("500m")})}},
			refused: "a spec.containers[0].resources.requests[cpu]"},
		{name: "a limit alone is a request too", appReqs: "600m", pod: budget(corev1.ResourceRequirements{Requests: cpu("1")}),
			sets:    map[string][]appsv1alpha1.SidecarContainer{"a": {sidecar("proxy", corev1.ResourceRequirements{Limits: cpu("500m")})}},
			refused: "a spec.containers[0].resources.requests[cpu]"},
		{name: "a native sidecar requests too much", appReqs: "600m", pod: budget(corev1.ResourceRequirements{Requests: cpu("1")}),
			sets:    map[string][]appsv1alpha1.SidecarContainer{"i:a": {native(sidecar("proxy", corev1.ResourceRequirements{Requests: cpu("500m")}))}},
			refused: "a spec.initContainers[0].resources.requests[cpu]"},
		{name: "a sidecar's limit above the pod's", pod: budget(corev1.ResourceRequirements{Limits: cpu("1")}),
			sets:    map[string][]appsv1alpha1.SidecarContainer{"a": {sidecar("proxy", corev1.ResourceRequirements{Limits: cpu("2")})}},
			refused: "a spec.containers[0].resources.limits[cpu]"},
		{name: "the second set tips it over", appReqs: "400m", pod: budget(corev1.ResourceRequirements{Requests: cpu("1")}),
			sets: map[string][]appsv1alpha1.SidecarContainer{
				"a": {sidecar("proxy", corev1.ResourceRequirements{Requests: cpu("400m")})},
				"b": {sidecar("metrics", corev1.ResourceRequirements{Requests: cpu("100m")}), sidecar("logs", corev1.ResourceRequirements{Requests: cpu("300m")})},
			},
			refused: "b spec.containers[0].resources.requests[cpu]"},
		{name: "the pod is over its budget without sidecars", appReqs: "2", pod: budget(corev1.ResourceRequirements{Requests: cpu("1")}),
			sets: map[string][]appsv1alpha1.SidecarContainer{"a": {sidecar("proxy", corev1.ResourceRequirements{Requests: cpu("500m")})}}, injected: 1},
		{name: "a sidecar without resources", appReqs: "1", pod: budget(corev1.ResourceRequirements{Requests: cpu("1")}),
			sets: map[string][]appsv1alpha1.SidecarContainer{"a": {sidecar("proxy", corev1.ResourceRequirements{})}}, injected: 1},
		// LimitRanger gives the sidecar the namespace's default request before the API server
		// checks the pod-level resources.
		{name: "a LimitRange's default request takes the pod over", appReqs: "800m", pod: budget(corev1.ResourceRequirements{Requests: cpu("1")}),
			sets:    map[string][]appsv1alpha1.SidecarContainer{"a": {sidecar("proxy", corev1.ResourceRequirements{})}},
			lrs:     defaultRequest(cpu("300m")),
			refused: "a spec.containers[0].resources.requests[cpu]"},
		{name: "a LimitRange's default request that fits", appReqs: "600m", pod: budget(corev1.ResourceRequirements{Requests: cpu("1")}),
			sets: map[string][]appsv1alpha1.SidecarContainer{"a": {sidecar("proxy", corev1.ResourceRequirements{})}},
			lrs:  defaultRequest(cpu("300m")), injected: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := corev1.Container{Name: "app", Image: "web:1"}
			if tt.appReqs != "" {
				app.Resources.Requests = cpu(tt.appReqs)
			}
			pod := webPod(app)
			tt.pod(pod)
			var sets []*appsv1alpha1.SidecarSet
			for _, key := range []string{"a", "b", "i:a"} {
				containers, ok := tt.sets[key]
				if !ok {
					continue
				}
				set := webSet(strings.TrimPrefix(key, "i:"))
				if strings.HasPrefix(key, "i:") {
					set.Spec.InitContainers = containers
				} else {
					set.Spec.Containers = containers
				}
				sets = append(sets, set)
			}
			in := inject.Input{Pod: pod, Sets: compile(t, sets...), LimitRanges: tt.lrs}
			before := snapshotInput(in)
			res, err := inject.Apply(in)
			before.assertUnchanged(t, in)
			if tt.refused != "" {
				if err == nil {
					t.Fatalf("injected, want a refusal: %s", tt.refused)
				}
				refused := requireRefused(t, err)
				if got := refused.SidecarSet + " " + refused.Field; got != tt.refused || !strings.Contains(refused.Detail, "spec.resources") {
					t.Errorf("refusal %v, want one at %s naming the pod's spec.resources", err, tt.refused)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if len(res.Injected) != tt.injected {
				t.Errorf("injected %v, want %d sets", res.Injected, tt.injected)
			}
			out := res.Pod()
			if want := pod.Spec.Resources; (want == nil) != (out.Spec.Resources == nil) || want != nil && want.String() != out.Spec.Resources.String() {
				t.Errorf("the pod-level resources changed: %v, want %v", out.Spec.Resources, want)
			}
			if errs := podrules.PodResourceErrors(out); len(errs) > 0 && tt.name != "the pod is over its budget without sidecars" {
				t.Errorf("the injected pod's pod-level resources are invalid: %v", errs)
			}
		})
	}
}

// defaultRequest is a namespace's LimitRange that gives every container a default request.
func defaultRequest(r corev1.ResourceList) []corev1.LimitRange {
	return []corev1.LimitRange{{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "defaults"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
		{Type: corev1.LimitTypeContainer, DefaultRequest: r},
	}}}}
}
