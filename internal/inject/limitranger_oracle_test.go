package inject_test

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/apis/core"
	k8sv1 "k8s.io/kubernetes/pkg/apis/core/v1"
	"k8s.io/kubernetes/plugin/pkg/admission/limitranger"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/podrules"
)

// limitRanger runs the API server's own LimitRanger (k8s.io/kubernetes) on pod as the
// production chain does around our webhook: defaults of every LimitRange (the mutating pass,
// which runs again after our patch), then the validating pass, then Pod validation. It is
// written here independently of the engine's use of the same plugin: plain conversion of the
// whole pod, every LimitRange as it is.
func limitRanger(t *testing.T, pod *corev1.Pod, lrs []corev1.LimitRange) (*corev1.Pod, error) {
	t.Helper()
	p := podrules.Defaulted(pod)
	var in core.Pod
	if err := k8sv1.Convert_v1_Pod_To_core_Pod(p, &in, nil); err != nil {
		t.Fatal(err)
	}
	for i := range lrs {
		if err := limitranger.PodMutateLimitFunc(&lrs[i], &in); err != nil {
			return nil, err
		}
	}
	var out corev1.Pod
	if err := k8sv1.Convert_core_Pod_To_v1_Pod(&in, &out, nil); err != nil {
		t.Fatal(err)
	}
	for i := range lrs {
		if err := limitranger.PodValidateLimitFunc(&lrs[i], &in); err != nil {
			return &out, err
		}
	}
	if errs := podrules.ValidateCreate(&out); len(errs) > 0 {
		return &out, errs.ToAggregate()
	}
	return &out, nil
}

// TestLimitRangerAgreesWithTheEngine holds the engine to the API server's LimitRanger, run
// here from k8s.io/kubernetes: for each case the set is valid and the pod alone passes
// LimitRanger. Where the engine injects, LimitRanger must admit the injected pod; where it
// refuses, LimitRanger must refuse the pod the engine would inject without the namespace's
// LimitRanges, and the refusal must name the set, the sidecar's field and the LimitRange
// (docs/guarantees.md: "the engine refuses ... a sidecar outside a bound of the namespace's
// LimitRange, per container or per pod ... with a message naming the set").
func TestLimitRangerAgreesWithTheEngine(t *testing.T) {
	q := resource.MustParse
	rl := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = q(kv[i+1])
		}
		return out
	}
	lr := func(items ...corev1.LimitRangeItem) []corev1.LimitRange {
		l := corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "bounds"}, Spec: corev1.LimitRangeSpec{Limits: items}}
		k8sv1.SetObjectDefaults_LimitRange(&l) // as the API server stores it (default from max, defaultRequest from default/min)
		return []corev1.LimitRange{l}
	}
	app := corev1.Container{Name: "app", Image: "app:1", Resources: corev1.ResourceRequirements{
		Requests: rl("cpu", "200m", "memory", "256Mi"), Limits: rl("cpu", "400m", "memory", "256Mi")}}
	bigApp := corev1.Container{Name: "app", Image: "app:1", Resources: corev1.ResourceRequirements{Limits: rl("memory", "900Mi")}}
	defaultAndPodMax := lr(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Default: rl("memory", "256Mi")},
		corev1.LimitRangeItem{Type: corev1.LimitTypePod, Max: rl("memory", "1Gi")})
	for _, tc := range []struct {
		name    string
		lrs     []corev1.LimitRange
		app     corev1.Container
		sidecar corev1.ResourceRequirements
		native  bool   // the sidecar is an init container with restartPolicy Always
		field   string // the field a refusal names; "" when LimitRanger admits the injected pod
	}{
		{
			// The common "default limit + ratio" LimitRange; the sidecar sets only a request.
			name: "request only, the default limit breaks maxLimitRequestRatio",
			lrs: lr(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Default: rl("cpu", "400m"), DefaultRequest: rl("cpu", "100m"),
				MaxLimitRequestRatio: rl("cpu", "4")}),
			app: app, sidecar: corev1.ResourceRequirements{Requests: rl("cpu", "20m")},
			field: "spec.containers[0].resources.limits[cpu]",
		},
		{
			// A ratio-only LimitRange is how a namespace says "every container sets both".
			name: "request only, ratio-only LimitRange: no limit",
			lrs:  lr(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, MaxLimitRequestRatio: rl("memory", "2")}),
			app:  app, sidecar: corev1.ResourceRequirements{Requests: rl("memory", "64Mi")},
			field: "spec.containers[0].resources.limits[memory]",
		},
		{
			name: "request 0 under a ratio",
			lrs:  lr(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, MaxLimitRequestRatio: rl("cpu", "10")}),
			app:  app, sidecar: corev1.ResourceRequirements{Requests: rl("cpu", "0"), Limits: rl("cpu", "100m")},
			field: "spec.containers[0].resources.requests[cpu]",
		},
		{
			// Not a LimitRange bound but the same cause: the default limit lands below the
			// sidecar's own request, and Pod validation refuses it.
			name: "request above the namespace's default limit",
			lrs:  lr(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Default: rl("memory", "256Mi"), Max: rl("memory", "1Gi")}),
			app:  app, sidecar: corev1.ResourceRequirements{Requests: rl("memory", "512Mi")},
			field: "spec.containers[0].resources.limits[memory]",
		},
		{
			// Per pod: the sidecar's limit is the namespace's default, and the pod's total then
			// passes the per-pod max. The sidecar declares no resources at all.
			name: "defaulted sidecar takes the pod over a per-pod max",
			lrs:  defaultAndPodMax, app: bigApp,
			field: "spec.containers[0].resources.limits[memory]",
		},
		{
			name: "same, the sidecar sets a request only",
			lrs:  defaultAndPodMax, app: bigApp, sidecar: corev1.ResourceRequirements{Requests: rl("memory", "64Mi")},
			field: "spec.containers[0].resources.limits[memory]",
		},
		{
			name: "same, as a native sidecar",
			lrs:  defaultAndPodMax, app: bigApp, native: true,
			field: "spec.initContainers[0].resources.limits[memory]",
		},
		{
			name: "a minimum the sidecar's request misses",
			lrs:  lr(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Min: rl("cpu", "50m"), DefaultRequest: rl("cpu", "100m")}),
			app:  app, sidecar: corev1.ResourceRequirements{Requests: rl("cpu", "10m")},
			field: "spec.containers[0].resources.requests[cpu]",
		},
		// What LimitRanger admits, the engine injects.
		{
			name: "request and limit within the ratio",
			lrs: lr(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Default: rl("cpu", "400m"), DefaultRequest: rl("cpu", "100m"),
				MaxLimitRequestRatio: rl("cpu", "4")}),
			app: app, sidecar: corev1.ResourceRequirements{Requests: rl("cpu", "100m"), Limits: rl("cpu", "400m")},
		},
		{
			name: "no resources: the defaults keep every bound",
			lrs: lr(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Default: rl("cpu", "400m"), DefaultRequest: rl("cpu", "100m"),
				Min: rl("cpu", "50m"), Max: rl("memory", "1Gi"), MaxLimitRequestRatio: rl("cpu", "4")}),
			app: app,
		},
		{
			name: "a defaulted sidecar that keeps the per-pod max",
			lrs:  defaultAndPodMax, app: corev1.Container{Name: "app", Image: "app:1", Resources: corev1.ResourceRequirements{Limits: rl("memory", "700Mi")}},
		},
		{
			name: "a request within the default limit",
			lrs:  lr(corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Default: rl("memory", "256Mi"), Max: rl("memory", "1Gi")}),
			app:  app, sidecar: corev1.ResourceRequirements{Requests: rl("memory", "128Mi")},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := webPod(tc.app)
			// Precondition: the pod alone passes LimitRanger (its first pass runs before our webhook).
			admitted, err := limitRanger(t, pod, tc.lrs)
			if err != nil {
				t.Fatalf("precondition: the pod alone is refused by LimitRanger: %v", err)
			}
			admitted.Annotations = pod.Annotations // LimitRanger's own note is not ours
			sidecar := corev1.Container{Name: "proxy", Image: "proxy:1", Resources: tc.sidecar}
			set := webSet("mesh", sidecar)
			if tc.native {
				set.Spec.Containers = nil
				set.Spec.InitContainers = []appsv1alpha1.SidecarContainer{nativeSidecar(sidecar)}
			}
			in := inject.Input{Pod: admitted, Sets: compile(t, set), LimitRanges: tc.lrs}
			before := snapshotInput(in)
			res, err := inject.Apply(in)
			before.assertUnchanged(t, in)
			var refused *inject.RefusedError
			if errors.As(err, &refused) {
				if tc.field == "" {
					t.Fatalf("the engine refuses a pod LimitRanger admits: %v", err)
				}
				if refused.SidecarSet != "mesh" || refused.Field != tc.field || !strings.Contains(refused.Detail, "LimitRange bounds of namespace shop") {
					t.Errorf("refusal %q at %s (set %q), want set mesh, field %s and LimitRange bounds named", refused.Detail, refused.Field, refused.SidecarSet, tc.field)
				}
				// The oracle agrees: without the LimitRanges the engine injects, and
				// LimitRanger refuses what it injects.
				unchecked, err := inject.Apply(inject.Input{Pod: admitted, Sets: compile(t, set)})
				if err != nil {
					t.Fatalf("Apply without the LimitRanges: %v", err)
				}
				if _, err := limitRanger(t, unchecked.Pod(), tc.lrs); err == nil {
					t.Errorf("the engine refuses (%v) a pod LimitRanger admits", refused)
				}
				return
			}
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if _, err := limitRanger(t, res.Pod(), tc.lrs); err != nil {
				t.Errorf("the engine admits the pod, the API server then refuses it anonymously: %v", err)
			}
			if tc.field != "" {
				t.Errorf("the engine admits the pod, want a refusal at %s", tc.field)
			}
		})
	}
}

// nativeSidecar is c as a native sidecar: an init container that keeps running.
func nativeSidecar(c corev1.Container) appsv1alpha1.SidecarContainer {
	c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	return appsv1alpha1.SidecarContainer{Container: c}
}
