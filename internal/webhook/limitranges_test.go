package webhook

import (
	"context"
	"errors"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPodInjectorLimitRanges: the handler reads the namespace's LimitRanges for a set whose
// sidecar declares no resources (LimitRanger gives it the defaults, and holds it to the
// bounds), and decodes what a per-pod bound adds up: the app containers' resources and the
// pod-level resources, which the pod's lazy decoding otherwise skips.
func TestPodInjectorLimitRanges(t *testing.T) {
	q := resource.MustParse
	memory := func(request, limit string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: q(request)},
			Limits: corev1.ResourceList{corev1.ResourceMemory: q(limit)}}
	}
	// The log agent declares no resources: the LimitRange gives it 256Mi, and a pod at most 1Gi.
	bounds := corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "bounds"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
		{Type: corev1.LimitTypeContainer, Default: corev1.ResourceList{corev1.ResourceMemory: q("256Mi")},
			DefaultRequest: corev1.ResourceList{corev1.ResourceMemory: q("256Mi")}},
		{Type: corev1.LimitTypePod, Max: corev1.ResourceList{corev1.ResourceMemory: q("1Gi")}},
	}}}
	for _, tc := range []struct {
		name        string
		apps        []corev1.ResourceRequirements
		podLevel    *corev1.ResourceRequirements
		lrs         []corev1.LimitRange
		lookupErr   error
		code        int32  // http.StatusOK: allowed, and patched
		msg         string // a part of a refusal's message
		wantLookups int
	}{
		{name: "the defaulted sidecar takes the pod over the per-pod max", apps: []corev1.ResourceRequirements{memory("900Mi", "900Mi")},
			lrs: []corev1.LimitRange{bounds}, code: http.StatusForbidden, wantLookups: 1,
			msg: `SidecarSet "log-agent" spec.containers[0].resources.limits[memory]: with this SidecarSet's sidecars, given the namespace's LimitRange defaults, the pod breaks LimitRange bounds of namespace shop (the maximum memory per pod is 1Gi, the pod's, with the sidecars, limits are 1156Mi)`},
		{name: "the defaulted sidecar keeps the per-pod max", apps: []corev1.ResourceRequirements{memory("700Mi", "700Mi")},
			lrs: []corev1.LimitRange{bounds}, code: http.StatusOK, wantLookups: 1},
		{name: "no LimitRange", apps: []corev1.ResourceRequirements{memory("900Mi", "900Mi")}, code: http.StatusOK, wantLookups: 1},
		// The containers' limits add up to 1156Mi; the pod-level limit makes the total 1Gi.
		{name: "the pod-level resources make the pod's totals", apps: []corev1.ResourceRequirements{memory("100Mi", "450Mi"), memory("100Mi", "450Mi")},
			podLevel: &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: q("512Mi")}, Limits: corev1.ResourceList{corev1.ResourceMemory: q("1Gi")}},
			lrs:      []corev1.LimitRange{bounds}, code: http.StatusOK, wantLookups: 1},
		{name: "a failed lookup is an error, not a pass", apps: []corev1.ResourceRequirements{memory("900Mi", "900Mi")},
			lookupErr: errors.New("cache not started"), code: http.StatusInternalServerError, msg: "reading the LimitRanges of namespace shop", wantLookups: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := testInjector(t)
			lookups := 0
			h.LimitRanges = func(_ context.Context, namespace string) ([]corev1.LimitRange, error) {
				lookups++
				if namespace != "shop" {
					t.Errorf("LimitRanges of namespace %q looked up, want shop", namespace)
				}
				return tc.lrs, tc.lookupErr
			}
			pod := optedInPod("shop", nil)
			pod.Spec.Containers = nil
			for i, r := range tc.apps {
				pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "app-" + string(rune('a'+i)), Image: "registry.example/demo:1.0", Resources: r})
			}
			pod.Spec.Resources = tc.podLevel
			resp := handle(t, h, rawRequest(t, mustMarshal(t, pod), "shop"))
			if lookups != tc.wantLookups {
				t.Errorf("LimitRanges looked up %d times, want %d", lookups, tc.wantLookups)
			}
			switch {
			case tc.code == http.StatusOK:
				if !resp.Allowed || len(resp.Patches) == 0 {
					t.Errorf("want injected, got allowed %v with %d patch operations (%+v)", resp.Allowed, len(resp.Patches), resp.Result)
				}
			case resp.Allowed || resp.Result == nil || resp.Result.Code != tc.code || !contains(resp.Result.Message, tc.msg):
				t.Errorf("want %d with %q, got allowed %v, %+v", tc.code, tc.msg, resp.Allowed, resp.Result)
			}
		})
	}
}
