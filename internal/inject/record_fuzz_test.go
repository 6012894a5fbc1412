package inject_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// The set FuzzForgedRecord forges records of: a proxy whose memory limit a pod may override up
// to 1Gi, whose CPU request a resourcesPolicy computes, and which patches example.com/a.
const (
	forgeSet      = "mesh"
	forgeOverride = "mesh.example.com/proxy-memory-limit"
	forgeOther    = "policy.corp.example/cost-center" // outside the allow-list
)

func forgeSets(t testing.TB, image string) []*inject.CompiledSet {
	set := webSet(forgeSet, corev1.Container{Name: "proxy", Image: image,
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}}})
	set.Spec.Containers[0].ResourcesPolicy = &appsv1alpha1.ResourcesPolicy{ResourcesExpr: appsv1alpha1.ResourcesExpr{
		Requests: map[corev1.ResourceName]appsv1alpha1.ResourceExpression{corev1.ResourceCPU: "cpu * 0.25"},
	}}
	set.Spec.Overrides = []appsv1alpha1.Override{{Annotation: forgeOverride, Container: "proxy", Field: appsv1alpha1.OverrideLimitsMemory,
		Rule: "amount.compareTo(quantity('1Gi')) <= 0", Message: "at most 1Gi"}}
	set.Spec.PatchPodMetadata = []appsv1alpha1.PatchPodMetadata{{PatchPolicy: appsv1alpha1.PatchPolicyOverwrite,
		Annotations: map[string]string{"example.com/a": "1"}}}
	return compile(t, set)
}

// FuzzForgedRecord: the pod's author rewrites the pod's record (any JSON: values, keys,
// nesting, names, hashes) after injection. Whatever it says, neither admission of a pod that
// carries it nor the in-place update (images, resize, patched annotations) writes a memory
// limit the override's rule forbids, touches an annotation outside the operator's allow-list,
// or changes a container the set does not declare.
func FuzzForgedRecord(f *testing.F) {
	allowed, err := inject.ParseKeyAllowList([]string{"example.com/*"})
	if err != nil {
		f.Fatal(err)
	}
	current := forgeSets(f, "proxy:1")
	hash := current[0].Hash
	for _, seed := range []string{
		`{"mesh":{"hash":"` + hash + `","containers":["proxy"],"annotations":{"example.com/a":"1"},"overrides":{"` + forgeOverride + `":"512Mi"}}}`,
		`{"mesh":{"hash":"` + hash + `","containers":["proxy"],"overrides":{"` + forgeOverride + `":"64Gi"}}}`,
		`{"mesh":{"hash":"` + hash + `","containers":["proxy","app"],"annotations":{"` + forgeOther + `":"cc-1"}}}`,
		`{"mesh":{"hash":"0000000000000000","containers":["proxy"],"overrides":{"` + forgeOverride + `":"-1"}}}`,
		`{"mesh":{"hash":"` + hash + `","containers":["proxy"],"overrides":{"` + forgeOverride + `":"1e30"}}}`,
		`{"mesh":{"hash":"` + hash + `","containers":["proxy"],"annotations":{"sidecarset.io/status":"x"}}}`,
		`{"other":{"hash":"1","containers":["app"]}}`,
	} {
		f.Add(seed, "cc-1")
	}
	f.Fuzz(func(t *testing.T, record, other string) {
		pod := webPod(corev1.Container{Name: "app", Image: "app:1", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("800m")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("800m")}}})
		pod.Annotations = map[string]string{forgeOverride: "512Mi"}
		res, err := inject.Apply(inject.Input{Pod: pod, Sets: current, AllowedAnnotations: &allowed})
		if err != nil {
			t.Fatal(err)
		}
		running := res.Pod()
		running.ResourceVersion = "7"
		running.Annotations[forgeOther] = other
		running.Annotations[appsv1alpha1.StatusAnnotation] = record

		// Admission of a pod that carries the forged record (an exported pod, created again).
		if again, err := inject.Apply(inject.Input{Pod: running, Sets: current, AllowedAnnotations: &allowed}); err == nil {
			out := again.Pod()
			if v, ok := out.Annotations[forgeOther]; !ok || v != other {
				t.Fatalf("admission changed %s (%q to %q, kept %v) for record %s", forgeOther, other, v, ok, record)
			}
			assertMemoryWithinRule(t, "admission", out.Spec.Containers, record)
			assertAppKept(t, "admission", out.Spec.Containers, record)
		}

		// The in-place update to a new image, and the resize at the current hash.
		for _, sets := range [][]*inject.CompiledSet{forgeSets(t, "proxy:2"), current} {
			u, err := inject.UpdateInPlace(inject.Input{Pod: running, Sets: sets, AllowedAnnotations: &allowed}, forgeSet, nil)
			if err != nil {
				continue // no record of the set: nothing is written
			}
			for _, op := range append(u.ResizePatch(), u.Patch()...) {
				if key, ok := strings.CutPrefix(op.Path, "/metadata/annotations/"); ok {
					key = strings.ReplaceAll(strings.ReplaceAll(key, "~1", "/"), "~0", "~")
					if key != appsv1alpha1.StatusAnnotation && !allowed.Allows(key) {
						t.Fatalf("the update's patch %s %s touches a key outside the allow-list; record %s", op.Operation, op.Path, record)
					}
				}
			}
			var changed []corev1.Container
			for _, r := range u.Resources {
				changed = append(changed, corev1.Container{Name: r.Name, Resources: r.To})
			}
			assertMemoryWithinRule(t, "resize", changed, record)
			for _, img := range u.Images {
				if img.Name != "proxy" {
					t.Fatalf("the update changes the image of %q, which the set does not declare; record %s", img.Name, record)
				}
			}
		}
	})
}

func assertMemoryWithinRule(t *testing.T, what string, containers []corev1.Container, record string) {
	t.Helper()
	for _, c := range containers {
		if m, ok := c.Resources.Limits[corev1.ResourceMemory]; ok && c.Name == "proxy" && m.Cmp(resource.MustParse("1Gi")) > 0 {
			t.Fatalf("%s gives proxy limits.memory=%s, which the rule forbids; record %s", what, m.String(), record)
		}
	}
}

func assertAppKept(t *testing.T, what string, containers []corev1.Container, record string) {
	t.Helper()
	for _, c := range containers {
		if c.Name == "app" && c.Image != "app:1" {
			t.Fatalf("%s changed the app container to %s; record %s", what, c.Image, record)
		}
	}
	if !strings.Contains(strings.Join(containerNames(containers), ","), "app") {
		t.Fatalf("%s removed the app container; record %s", what, record)
	}
}
