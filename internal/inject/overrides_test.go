package inject_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

const cpuAnnotation = "proxy.example.com/cpu"

// proxySet lets pods set its proxy's CPU request (at most 1) and its LOG_LEVEL.
func proxySet(image string) *appsv1alpha1.SidecarSet {
	s := webSet("proxy", corev1.Container{Name: "proxy", Image: image,
		Env: []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
		}})
	s.Spec.Overrides = []appsv1alpha1.Override{
		{Annotation: cpuAnnotation, Container: "proxy", Field: appsv1alpha1.OverrideRequestsCPU,
			Rule: "amount.compareTo(quantity('1')) <= 0", Message: "at most 1 CPU"},
		{Annotation: "proxy.example.com/log-level", Container: "proxy", Field: appsv1alpha1.OverrideEnv, EnvName: "LOG_LEVEL"},
	}
	return s
}

func proxyOf(t *testing.T, pod *corev1.Pod) *corev1.Container {
	t.Helper()
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == "proxy" {
			return &pod.Spec.Containers[i]
		}
	}
	t.Fatalf("the pod has no proxy container: %v", containerNames(pod.Spec.Containers))
	return nil
}

// injectWithCPU injects proxySet(image) into a web pod annotated with cpu.
func injectWithCPU(t *testing.T, set *appsv1alpha1.SidecarSet, cpu string) *corev1.Pod {
	t.Helper()
	pod := webPod(corev1.Container{Name: "app", Image: "app:1"})
	pod.Annotations = map[string]string{cpuAnnotation: cpu}
	res, err := inject.Apply(inject.Input{Pod: pod, Sets: compile(t, set)})
	if err != nil {
		t.Fatal(err)
	}
	return res.Pod()
}

// TestOverrideValues: what a pod's annotation may set, and the refusals naming the annotation,
// the set and the rule's message.
func TestOverrideValues(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		wantCPU     string // the proxy's CPU request
		wantEnv     string // its LOG_LEVEL
		wantRefusal []string
	}{
		{name: "no annotation", wantCPU: "100m", wantEnv: "info"},
		{name: "both", annotations: map[string]string{cpuAnnotation: "500m", "proxy.example.com/log-level": "debug"}, wantCPU: "500m", wantEnv: "debug"},
		{name: "at the rule's bound", annotations: map[string]string{cpuAnnotation: "1000m"}, wantCPU: "1", wantEnv: "info"},
		{name: "above the rule's bound", annotations: map[string]string{cpuAnnotation: "1500m"},
			wantRefusal: []string{`SidecarSet "proxy"`, "spec.overrides[0]", cpuAnnotation, `"1500m"`, "at most 1 CPU"}},
		{name: "not a quantity", annotations: map[string]string{cpuAnnotation: "one"},
			wantRefusal: []string{cpuAnnotation, "not a Kubernetes quantity"}},
		{name: "zero", annotations: map[string]string{cpuAnnotation: "0"},
			wantRefusal: []string{cpuAnnotation, "above zero"}},
		{name: "too long", annotations: map[string]string{"proxy.example.com/log-level": strings.Repeat("x", inject.MaxOverrideValueLength+1)},
			wantRefusal: []string{"proxy.example.com/log-level", "longer than"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := webPod(corev1.Container{Name: "app", Image: "app:1"})
			pod.Annotations = tt.annotations
			in := inject.Input{Pod: pod, Sets: compile(t, proxySet("proxy:1"))}
			before := snapshotInput(in)
			res, err := inject.Apply(in)
			before.assertUnchanged(t, in)
			if tt.wantRefusal != nil {
				refused := requireRefused(t, err)
				for _, want := range tt.wantRefusal {
					if !strings.Contains(refused.Error(), want) {
						t.Errorf("refusal %q does not say %q", refused.Error(), want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			proxy := proxyOf(t, res.Pod())
			if got := proxy.Resources.Requests.Cpu().String(); got != tt.wantCPU {
				t.Errorf("CPU request %s, want %s", got, tt.wantCPU)
			}
			if len(proxy.Env) != 1 || proxy.Env[0].Value != tt.wantEnv {
				t.Errorf("env %+v, want LOG_LEVEL=%s alone", proxy.Env, tt.wantEnv)
			}
			recs, err := inject.ParseRecords(res.Pod().Annotations)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := recs["proxy"].Overrides, tt.annotations; len(got) != len(want) || (len(want) > 0 && got[cpuAnnotation] != want[cpuAnnotation]) {
				t.Errorf("recorded overrides %v, want %v", got, want)
			}
			assertIdempotent(t, res, inject.Input{Pod: res.Pod(), Sets: in.Sets})
		})
	}
}

// TestOverrideBelowRequest: a limit override below the request, or a request override above
// the limit, is refused by name rather than left for the API server to refuse.
func TestOverrideBelowRequest(t *testing.T) {
	set := proxySet("proxy:1")
	set.Spec.Overrides[0].Rule, set.Spec.Overrides[0].Message = "", "" // any request
	set.Spec.Overrides = append(set.Spec.Overrides, appsv1alpha1.Override{Annotation: "proxy.example.com/cpu-limit", Container: "proxy",
		Field: appsv1alpha1.OverrideLimitsCPU})
	for _, tt := range []struct {
		annotations map[string]string
		refused     string
	}{
		{map[string]string{cpuAnnotation: "2"}, cpuAnnotation + `="2"`},
		{map[string]string{"proxy.example.com/cpu-limit": "50m"}, `proxy.example.com/cpu-limit="50m"`},
		{map[string]string{cpuAnnotation: "2", "proxy.example.com/cpu-limit": "2"}, ""},
	} {
		pod := webPod(corev1.Container{Name: "app", Image: "app:1"})
		pod.Annotations = tt.annotations
		_, err := inject.Apply(inject.Input{Pod: pod, Sets: compile(t, set)})
		if tt.refused == "" {
			if err != nil {
				t.Errorf("%v: %v", tt.annotations, err)
			}
			continue
		}
		refused := requireRefused(t, err)
		if !strings.Contains(refused.Error(), tt.refused) || !strings.Contains(refused.Error(), "above its limit") {
			t.Errorf("%v: refusal %q, want it to name %s and the limit", tt.annotations, refused.Error(), tt.refused)
		}
	}
}

// TestOverridesKeptByUpdateInPlace: a rollout of a new image keeps the pod's overridden CPU
// request; a change of the pod's annotation since injection is not applied by the update
// (it takes effect when the pod is recreated); a changed declared request is resized to
// while the overridden one stays.
func TestOverridesKeptByUpdateInPlace(t *testing.T) {
	pod := injectWithCPU(t, proxySet("proxy:1"), "500m")
	pod.ResourceVersion = "3"
	for _, tt := range []struct {
		name       string
		annotation string // the pod's annotation at the time of the update
		change     func(s *appsv1alpha1.SidecarSet)
		wantCPU    string
	}{
		{"image", "500m", func(s *appsv1alpha1.SidecarSet) {}, "500m"},
		{"image, annotation changed since", "800m", func(s *appsv1alpha1.SidecarSet) {}, "500m"},
		{"image, annotation removed since", "", func(s *appsv1alpha1.SidecarSet) {}, "500m"},
		{"declared request changed", "500m", func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("200m")
		}, "500m"},
		{"override no longer offered", "500m", func(s *appsv1alpha1.SidecarSet) { s.Spec.Overrides = s.Spec.Overrides[1:] }, "100m"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			running := pod.DeepCopy()
			if tt.annotation == "" {
				delete(running.Annotations, cpuAnnotation)
			} else {
				running.Annotations[cpuAnnotation] = tt.annotation
			}
			set := proxySet("proxy:2")
			tt.change(set)
			sets := compile(t, set)
			u, err := inject.UpdateInPlace(inject.Input{Pod: running, Sets: sets}, "proxy", nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(u.Blocked) > 0 || len(u.Images) != 1 || u.Images[0].To != "proxy:2" {
				t.Fatalf("images %+v, blocked %q; want the image updated", u.Images, u.Blocked)
			}
			updated := patchedPod(t, running, append(u.ResizePatch(), u.Patch()[1:]...))
			if got := proxyOf(t, updated).Resources.Requests.Cpu().String(); got != tt.wantCPU {
				t.Errorf("CPU request after the update %s, want %s", got, tt.wantCPU)
			}
			if hash, _ := inject.InjectedHash(updated.Annotations, "proxy"); hash != sets[0].Hash {
				t.Errorf("record hash %q, want the set's %q", hash, sets[0].Hash)
			}
			recs, err := inject.ParseRecords(updated.Annotations)
			if err != nil {
				t.Fatal(err)
			}
			if want := tt.wantCPU != "100m"; (recs["proxy"].Overrides[cpuAnnotation] == "500m") != want {
				t.Errorf("recorded overrides %v; want the 500m kept: %v", recs["proxy"].Overrides, want)
			}
		})
	}
}

// TestForgedRecordedOverride: a record whose override value is no quantity (anyone creating
// a pod writes its record) blocks the update with the refusal, naming the annotation.
func TestForgedRecordedOverride(t *testing.T) {
	pod := injectWithCPU(t, proxySet("proxy:1"), "500m")
	pod.Annotations[appsv1alpha1.StatusAnnotation] = strings.Replace(pod.Annotations[appsv1alpha1.StatusAnnotation], `"500m"`, `"lots"`, 1)
	u, err := inject.UpdateInPlace(inject.Input{Pod: pod, Sets: compile(t, proxySet("proxy:2"))}, "proxy", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(u.Blocked) != 1 || !strings.Contains(u.Blocked[0], cpuAnnotation) || !strings.Contains(u.Blocked[0], "not a Kubernetes quantity") {
		t.Errorf("Blocked = %q, want the refusal of %s=lots", u.Blocked, cpuAnnotation)
	}
}
