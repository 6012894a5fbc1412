package inject_test

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// TestLimitRanges: a sidecar that breaks a per-container bound of the namespace's LimitRange
// is refused naming the set, the field and the LimitRange. Values it leaves unset are judged
// as the LimitRange's defaults fill them (the LimitRange as the API server stores it: its
// default limit is its max); the pod's own containers are not judged.
func TestLimitRanges(t *testing.T) {
	list := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	bounds := corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "bounds"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
		{Type: corev1.LimitTypePod, Max: list("memory", "64Mi")}, // per pod: not a per-container bound
		{Type: corev1.LimitTypeContainer,
			Min:                  list("cpu", "10m"),
			Max:                  list("memory", "256Mi", "cpu", "1"),
			MaxLimitRequestRatio: list("cpu", "4")},
	}}}
	for _, tc := range []struct {
		name      string
		resources corev1.ResourceRequirements
		computed  bool   // the cpu limit comes from a resourcesPolicy (cpu * 2.0 of the app's 500m)
		want      string // "" admitted; else the field, then a part of the message
		why       string
	}{
		{name: "within every bound", resources: corev1.ResourceRequirements{Requests: list("cpu", "100m"), Limits: list("cpu", "200m", "memory", "128Mi")}},
		{name: "nothing set: the defaults are the namespace's", resources: corev1.ResourceRequirements{}},
		{name: "memory limit above the maximum", resources: corev1.ResourceRequirements{Limits: list("memory", "512Mi")},
			want: "spec.containers[0].resources.limits[memory]", why: "the maximum memory per container is 256Mi, the sidecar's limits are 512Mi"},
		{name: "a request defaulted from a limit above the maximum is named by the limit", resources: corev1.ResourceRequirements{Limits: list("cpu", "2")},
			want: "spec.containers[0].resources.limits[cpu]", why: "the maximum cpu per container is 1"},
		{name: "cpu request below the minimum", resources: corev1.ResourceRequirements{Requests: list("cpu", "5m")},
			want: "spec.containers[0].resources.requests[cpu]", why: "the minimum cpu per container is 10m, the sidecar's requests are 5m"},
		{name: "limit over request above the ratio", resources: corev1.ResourceRequirements{Requests: list("cpu", "100m"), Limits: list("cpu", "500m")},
			want: "spec.containers[0].resources.limits[cpu]", why: "the highest cpu limit-to-request ratio per container is 4, the sidecar's is 500m to 100m"},
		{name: "a request alone gets the default limit, above the ratio", resources: corev1.ResourceRequirements{Requests: list("cpu", "100m")},
			want: "spec.containers[0].resources.limits[cpu]", why: "the highest cpu limit-to-request ratio per container is 4, the sidecar's is 1 to 100m (its limit is the default of LimitRange bounds)"},
		{name: "a computed limit names its expression", computed: true,
			want: "spec.containers[0].resourcesPolicy.resourcesExpr.limits[cpu]", why: "the maximum cpu per container is 1, the sidecar's limits are 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := webSet("mesh", corev1.Container{Name: "proxy", Image: "proxy:1", Resources: tc.resources})
			if tc.computed {
				set.Spec.Containers[0].ResourcesPolicy = &appsv1alpha1.ResourcesPolicy{ResourcesExpr: appsv1alpha1.ResourcesExpr{
					Limits: map[corev1.ResourceName]appsv1alpha1.ResourceExpression{corev1.ResourceCPU: "cpu * 2.5"}}}
			}
			// The app's own container breaks the LimitRange too: that is the API server's to say.
			app := corev1.Container{Name: "app", Image: "app:1", Resources: corev1.ResourceRequirements{Limits: list("cpu", "500m", "memory", "1Gi")}}
			_, err := inject.Apply(inject.Input{Pod: webPod(app), Sets: compile(t, set), LimitRanges: []corev1.LimitRange{bounds}})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var refused *inject.RefusedError
			if !errors.As(err, &refused) {
				t.Fatalf("got %v, want a refusal", err)
			}
			if refused.SidecarSet != "mesh" || refused.Field != tc.want || !strings.Contains(refused.Detail, tc.why) || !strings.Contains(refused.Detail, "LimitRange bounds of namespace shop") {
				t.Errorf("refusal %q at %s (set %q), want %s with %q", refused.Detail, refused.Field, refused.SidecarSet, tc.want, tc.why)
			}
		})
	}
}

// TestPodLimitRanges: a per-pod bound is judged on the pod's totals with the sidecars, as
// LimitRanger totals them, and only when the pod keeps it without them.
func TestPodLimitRanges(t *testing.T) {
	q := resource.MustParse
	podMax := corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "per-pod"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
		{Type: corev1.LimitTypePod, Max: corev1.ResourceList{corev1.ResourceMemory: q("512Mi")}},
	}}}
	app := func(memory string) corev1.Container {
		return corev1.Container{Name: "app", Image: "app:1", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: q(memory)}}}
	}
	for _, tc := range []struct {
		name, app, sidecar string
		native             bool
		want               string
	}{
		{name: "fits with the sidecar", app: "256Mi", sidecar: "128Mi"},
		{name: "the sidecar takes the pod over", app: "448Mi", sidecar: "128Mi", want: "spec.containers[0].resources.limits[memory]"},
		{name: "a native sidecar counts too", app: "448Mi", sidecar: "128Mi", native: true, want: "spec.initContainers[0].resources.limits[memory]"},
		{name: "over without the sidecar: the API server's to say", app: "1Gi", sidecar: "128Mi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sidecar := corev1.Container{Name: "proxy", Image: "proxy:1", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: q(tc.sidecar)}}}
			set := webSet("mesh", sidecar)
			if tc.native {
				set.Spec.Containers = nil
				sidecar.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
				set.Spec.InitContainers = []appsv1alpha1.SidecarContainer{{Container: sidecar}}
			}
			_, err := inject.Apply(inject.Input{Pod: webPod(app(tc.app)), Sets: compile(t, set), LimitRanges: []corev1.LimitRange{podMax}})
			var refused *inject.RefusedError
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "":
			case !errors.As(err, &refused):
				t.Fatalf("got %v, want a refusal", err)
			case refused.Field != tc.want || !strings.Contains(refused.Detail, "the maximum memory per pod is 512Mi, the pod's, with the sidecars, limits are 576Mi") || !strings.Contains(refused.Detail, "LimitRange per-pod of namespace shop"):
				t.Errorf("refusal %q at %s, want %s and the per-pod maximum named", refused.Detail, refused.Field, tc.want)
			}
		})
	}
}

// TestLimitRangeDefaultsInOrder: the sidecar gets the defaults of the namespace's LimitRanges
// one after the other, as LimitRanger gives them (the first that has one wins), and a refusal
// names the LimitRange whose bound breaks and the one whose default broke it.
func TestLimitRangeDefaultsInOrder(t *testing.T) {
	q := resource.MustParse
	limitRange := func(name string, item corev1.LimitRangeItem) corev1.LimitRange {
		item.Type = corev1.LimitTypeContainer
		return corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{item}}}
	}
	small := limitRange("small", corev1.LimitRangeItem{Default: corev1.ResourceList{corev1.ResourceCPU: q("500m")}})
	large := limitRange("large", corev1.LimitRangeItem{Default: corev1.ResourceList{corev1.ResourceCPU: q("2")}})
	bounds := limitRange("bounds", corev1.LimitRangeItem{Max: corev1.ResourceList{corev1.ResourceCPU: q("1")}})
	for _, tc := range []struct {
		name string
		lrs  []corev1.LimitRange
		want []string // parts of the refusal; nil when injected
	}{
		{name: "the first default wins", lrs: []corev1.LimitRange{small, large, bounds}},
		{name: "a default above another's maximum", lrs: []corev1.LimitRange{large, small, bounds}, want: []string{
			`SidecarSet "mesh" spec.containers[0].resources.limits[cpu]`, "breaks LimitRange bounds of namespace shop",
			"the maximum cpu per container is 1, the sidecar's limits are 2, the default of LimitRange large", "set the sidecar's cpu limits"}},
		// Without another default, the maximum is the limit (as the API server stores it).
		{name: "the maximum's own default", lrs: []corev1.LimitRange{bounds}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := webSet("mesh", corev1.Container{Name: "proxy", Image: "proxy:1"})
			_, err := inject.Apply(inject.Input{Pod: webPod(corev1.Container{Name: "app", Image: "app:1"}), Sets: compile(t, set), LimitRanges: tc.lrs})
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != nil && err == nil:
				t.Fatalf("injected, want a refusal with %q", tc.want)
			case tc.want != nil:
				refused := requireRefused(t, err)
				for _, part := range tc.want {
					if !strings.Contains(refused.Error(), part) {
						t.Errorf("refusal %q, want it to say %q", refused.Error(), part)
					}
				}
			}
		})
	}
}
