package inject_test

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/inject/injecttest"
)

// TestApplyRefusedFields checks the structured part of each golden refusal: the webhook and
// the explain command read SidecarSet and Field, not the message.
func TestApplyRefusedFields(t *testing.T) {
	want := map[string]inject.RefusedError{
		"conflict-app-container":      {SidecarSet: "log-agent", Field: "spec.containers[0].name"},
		"conflict-app-init-container": {SidecarSet: "mesh-proxy", Field: "spec.initContainers[0].name"},
		"conflict-two-sets-container": {SidecarSet: "log-shipper", Field: "spec.containers[0].name"},
		"conflict-volume-definition":  {SidecarSet: "cert-reloader", Field: "spec.volumes[0].name"},
		"conflict-two-sets-volume":    {SidecarSet: "metrics-exporter", Field: "spec.volumes[0].name"},
		"malformed-annotation":        {Field: "metadata.annotations[sidecarset.io/status]"},
	}
	seen := 0
	for _, c := range injecttest.LoadCases(t, testdataDir) {
		w, ok := want[c.Name]
		if !ok {
			continue
		}
		seen++
		t.Run(c.Name, func(t *testing.T) {
			_, err := inject.Apply(c.Input(t))
			if err == nil {
				t.Fatalf("Apply() succeeded, want a refusal")
			}
			got := requireRefused(t, err)
			if got.SidecarSet != w.SidecarSet || got.Field != w.Field || got.Detail == "" {
				t.Errorf("RefusedError{SidecarSet: %q, Field: %q, Detail: %q}, want SidecarSet %q, Field %q and a detail",
					got.SidecarSet, got.Field, got.Detail, w.SidecarSet, w.Field)
			}
		})
	}
	if seen != len(want) {
		t.Errorf("found %d of the %d refusal cases in %s", seen, len(want), testdataDir)
	}
}

// TestApply covers behaviours too small for a golden file.
func TestApply(t *testing.T) {
	app := corev1.Container{Name: "app", Image: "registry.example.com/web:1.0",
		VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}
	worker := corev1.Container{Name: "worker", Image: "registry.example.com/worker:1.0"}
	dataVolume := corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	proxy := corev1.Container{Name: "proxy", Image: "ghcr.io/example/proxy:1.0"}

	tests := []struct {
		name string
		pod  func() *corev1.Pod
		sets func() []*appsv1alpha1.SidecarSet
		// Exactly one of wantRefused and check is set.
		wantRefused *inject.RefusedError
		check       func(t *testing.T, res *inject.Result, pod *corev1.Pod)
	}{
		{
			name: "sidecars naming a digest are recorded for the final-state check, in container order",
			pod: func() *corev1.Pod {
				p := webPod(app)
				p.Annotations = map[string]string{appsv1alpha1.ImagesAnnotation: "proxy=evil@sha256:" + strings.Repeat("f", 64)} // forged
				return p
			},
			sets: func() []*appsv1alpha1.SidecarSet {
				return []*appsv1alpha1.SidecarSet{webSet("proxy", corev1.Container{Name: "z-proxy", Image: "ghcr.io/example/proxy:1.0@sha256:" + strings.Repeat("a", 64)},
					corev1.Container{Name: "tagged", Image: "ghcr.io/example/agent:1.0"},
					corev1.Container{Name: "a-shipper", Image: "ghcr.io/example/shipper@sha256:" + strings.Repeat("b", 64)})}
			},
			check: func(t *testing.T, _ *inject.Result, pod *corev1.Pod) {
				want := "a-shipper=ghcr.io/example/shipper@sha256:" + strings.Repeat("b", 64) + ",z-proxy=ghcr.io/example/proxy:1.0@sha256:" + strings.Repeat("a", 64)
				if got := pod.Annotations[appsv1alpha1.ImagesAnnotation]; got != want {
					t.Errorf("%s = %q, want %q", appsv1alpha1.ImagesAnnotation, got, want)
				}
			},
		},
		{
			name: "no sidecar naming a digest: a forged record of images is removed",
			pod: func() *corev1.Pod {
				p := webPod(app)
				p.Annotations = map[string]string{appsv1alpha1.ImagesAnnotation: "proxy=evil@sha256:" + strings.Repeat("f", 64)}
				return p
			},
			sets: func() []*appsv1alpha1.SidecarSet { return []*appsv1alpha1.SidecarSet{webSet("proxy", proxy)} },
			check: func(t *testing.T, _ *inject.Result, pod *corev1.Pod) {
				if got, ok := pod.Annotations[appsv1alpha1.ImagesAnnotation]; ok {
					t.Errorf("%s = %q, want it removed", appsv1alpha1.ImagesAnnotation, got)
				}
			},
		},
		{
			name: "empty podInjectPolicy goes after the app containers",
			pod:  func() *corev1.Pod { return webPod(app, worker) },
			sets: func() []*appsv1alpha1.SidecarSet { return []*appsv1alpha1.SidecarSet{webSet("proxy", proxy)} },
			check: func(t *testing.T, _ *inject.Result, pod *corev1.Pod) {
				wantContainers(t, pod.Spec.Containers, "app", "worker", "proxy")
			},
		},
		{
			name: "before and after from several sets keep set and declaration order",
			pod:  func() *corev1.Pod { return webPod(app, worker) },
			sets: func() []*appsv1alpha1.SidecarSet {
				a := webSet("a", corev1.Container{Name: "a-1", Image: "a:1"}, corev1.Container{Name: "a-2", Image: "a:1"})
				a.Spec.Containers[0].PodInjectPolicy = appsv1alpha1.BeforeAppContainer
				b := webSet("b", corev1.Container{Name: "b-1", Image: "b:1"}, corev1.Container{Name: "b-2", Image: "b:1"})
				b.Spec.Containers[0].PodInjectPolicy = appsv1alpha1.BeforeAppContainer
				b.Spec.Containers[1].PodInjectPolicy = appsv1alpha1.BeforeAppContainer
				return []*appsv1alpha1.SidecarSet{a, b}
			},
			check: func(t *testing.T, res *inject.Result, pod *corev1.Pod) {
				wantContainers(t, pod.Spec.Containers, "a-1", "b-1", "b-2", "app", "worker", "a-2")
				if got := pod.Annotations[appsv1alpha1.DefaultContainerAnnotation]; got != "app" {
					t.Errorf("default container = %q, want app", got)
				}
			},
		},
		{
			name: "init containers after the pod's own by default",
			pod: func() *corev1.Pod {
				p := webPod(app)
				p.Spec.InitContainers = []corev1.Container{{Name: "migrate", Image: "m:1"}}
				return p
			},
			sets: func() []*appsv1alpha1.SidecarSet {
				s := webSet("certs")
				s.Spec.InitContainers = []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "fetch-certs", Image: "c:1"}}}
				return []*appsv1alpha1.SidecarSet{s}
			},
			check: func(t *testing.T, res *inject.Result, pod *corev1.Pod) {
				wantContainers(t, pod.Spec.InitContainers, "migrate", "fetch-certs")
				wantContainers(t, pod.Spec.Containers, "app")
			},
		},
		{
			name: "sidecar may mount a volume of the pod's own",
			pod: func() *corev1.Pod {
				p := webPod(app)
				p.Spec.Volumes = []corev1.Volume{dataVolume}
				return p
			},
			sets: func() []*appsv1alpha1.SidecarSet {
				c := proxy
				c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data", ReadOnly: true}}
				return []*appsv1alpha1.SidecarSet{webSet("proxy", c)}
			},
			check: func(t *testing.T, res *inject.Result, pod *corev1.Pod) {
				if len(pod.Spec.Volumes) != 1 || len(res.Records["proxy"].Volumes) != 0 {
					t.Errorf("volumes = %v, record %v: want only the pod's data volume, none recorded", pod.Spec.Volumes, res.Records["proxy"])
				}
			},
		},
		{
			name: "mount of a volume nobody defines is refused",
			pod:  func() *corev1.Pod { return webPod(app) },
			sets: func() []*appsv1alpha1.SidecarSet {
				c := proxy
				c.VolumeMounts = []corev1.VolumeMount{{Name: "certs", MountPath: "/certs"}}
				return []*appsv1alpha1.SidecarSet{webSet("proxy", c)}
			},
			wantRefused: &inject.RefusedError{SidecarSet: "proxy", Field: "spec.volumes"},
		},
		{
			name: "sidecar container named like an identical app init container is refused",
			pod: func() *corev1.Pod {
				p := webPod(app)
				p.Spec.InitContainers = []corev1.Container{proxy}
				return p
			},
			sets:        func() []*appsv1alpha1.SidecarSet { return []*appsv1alpha1.SidecarSet{webSet("proxy", proxy)} },
			wantRefused: &inject.RefusedError{SidecarSet: "proxy", Field: "spec.containers[0].name"},
		},
		{
			name: "an existing default-container annotation is kept",
			pod: func() *corev1.Pod {
				p := webPod(app, worker)
				p.Annotations = map[string]string{appsv1alpha1.DefaultContainerAnnotation: "worker"}
				return p
			},
			sets: func() []*appsv1alpha1.SidecarSet { return []*appsv1alpha1.SidecarSet{webSet("proxy", proxy)} },
			check: func(t *testing.T, _ *inject.Result, pod *corev1.Pod) {
				if got := pod.Annotations[appsv1alpha1.DefaultContainerAnnotation]; got != "worker" {
					t.Errorf("default container = %q, want worker (as the pod said)", got)
				}
			},
		},
		{
			name: "nothing matches: no annotation at all",
			pod:  func() *corev1.Pod { return webPod(app) },
			sets: func() []*appsv1alpha1.SidecarSet {
				s := webSet("proxy", proxy)
				s.Spec.Selector.MatchLabels["app"] = "api"
				return []*appsv1alpha1.SidecarSet{s}
			},
			check: func(t *testing.T, res *inject.Result, pod *corev1.Pod) {
				if res.Changed() || len(res.Patch()) != 0 || len(pod.Annotations) != 0 {
					t.Errorf("Changed() = %v, Patch() = %v, annotations %v: want no change", res.Changed(), res.Patch(), pod.Annotations)
				}
			},
		},
		{
			name: "paused set whose selector no longer matches loses what it injected",
			pod: func() *corev1.Pod {
				p := webPod(app, proxy)
				p.Annotations = map[string]string{appsv1alpha1.StatusAnnotation: `{"proxy":{"hash":"0","containers":["proxy"]}}`}
				return p
			},
			sets: func() []*appsv1alpha1.SidecarSet {
				s := webSet("proxy", proxy)
				s.Spec.Selector.MatchLabels["app"] = "api"
				s.Spec.InjectionStrategy.Paused = true
				return []*appsv1alpha1.SidecarSet{s}
			},
			check: func(t *testing.T, res *inject.Result, pod *corev1.Pod) {
				wantContainers(t, pod.Spec.Containers, "app")
				if _, ok := pod.Annotations[appsv1alpha1.StatusAnnotation]; ok {
					t.Errorf("status annotation kept: %v", pod.Annotations)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := inject.Input{Pod: tt.pod(), Sets: compile(t, tt.sets()...)}
			before := snapshotInput(in)
			res, err := inject.Apply(in)
			before.assertUnchanged(t, in)
			if tt.wantRefused != nil {
				if err == nil {
					t.Fatalf("Apply() succeeded, want a refusal")
				}
				got := requireRefused(t, err)
				if got.SidecarSet != tt.wantRefused.SidecarSet || got.Field != tt.wantRefused.Field {
					t.Errorf("refused %q at %q (%s), want %q at %q", got.SidecarSet, got.Field, got.Detail,
						tt.wantRefused.SidecarSet, tt.wantRefused.Field)
				}
				return
			}
			if err != nil {
				t.Fatalf("Apply() error = %v", err)
			}
			tt.check(t, res, res.Pod())
			assertPatchMatchesPod(t, in.Pod, res)
			assertIdempotent(t, res, inject.Input{Sets: compile(t, tt.sets()...)})
		})
	}
}

// TestResultPodIsACopy checks that callers may modify what Pod returns (the webhook does)
// without reaching the Result, the input Pod or the SidecarSets.
func TestResultPodIsACopy(t *testing.T) {
	sidecar := corev1.Container{Name: "proxy", Image: "ghcr.io/example/proxy:1.0",
		Env:          []corev1.EnvVar{{Name: "MODE", Value: "sidecar"}},
		VolumeMounts: []corev1.VolumeMount{{Name: "certs", MountPath: "/certs"}}}
	set := webSet("proxy", sidecar)
	set.Spec.Volumes = []corev1.Volume{{Name: "certs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	in := inject.Input{Pod: webPod(corev1.Container{Name: "app", Image: "web:1"}), Sets: compile(t, set)}
	before := snapshotInput(in)
	res, err := inject.Apply(in)
	if err != nil {
		t.Fatalf("Apply() error = %v", err)
	}
	first := res.Pod()
	want := first.DeepCopy()

	first.Spec.Containers[1].Env[0].Value = "scribbled"
	first.Spec.Containers[1].VolumeMounts[0].MountPath = "/scribbled"
	first.Spec.Volumes[0].Name = "scribbled"
	first.Spec.Containers[0].Image = "scribbled"
	first.Annotations[appsv1alpha1.StatusAnnotation] = "scribbled"
	first.Labels["app"] = "scribbled"

	if d := podsDiff(t, want, res.Pod()); d != "" {
		t.Errorf("modifying Pod()'s result changed the next Pod() (-want +got):\n%s", d)
	}
	before.assertUnchanged(t, in)
}

func wantContainers(t *testing.T, list []corev1.Container, names ...string) {
	t.Helper()
	if got := containerNames(list); !slices.Equal(got, names) {
		t.Errorf("containers = %v, want %v", got, names)
	}
}

// TestReinvocationAfterAnotherWebhook: another mutating webhook appends its own container and
// volume after ours; when we are reinvoked, our unchanged sidecar and volume stay where they
// are and nothing is patched. A changed sidecar is removed and injected again by its
// podInjectPolicy, after every other container.
func TestReinvocationAfterAnotherWebhook(t *testing.T) {
	set := webSet("agent", corev1.Container{Name: "agent", Image: "agent:1",
		VolumeMounts: []corev1.VolumeMount{{Name: "agent-config", MountPath: "/etc/agent"}}})
	set.Spec.Volumes = []corev1.Volume{{Name: "agent-config", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	first, err := inject.Apply(inject.Input{Pod: webPod(corev1.Container{Name: "app", Image: "app:1"}), Sets: compile(t, set)})
	if err != nil {
		t.Fatal(err)
	}
	pod := first.Pod()
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "mesh-proxy", Image: "proxy:1"})
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "mesh-certs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})

	again, err := inject.Apply(inject.Input{Pod: pod, Sets: compile(t, set)})
	if err != nil {
		t.Fatal(err)
	}
	if again.Changed() || len(again.Patch()) != 0 {
		t.Errorf("reinvocation changed the pod: %v", again.Patch())
	}

	set.Spec.Containers[0].Image = "agent:2"
	updated, err := inject.Apply(inject.Input{Pod: pod, Sets: compile(t, set)})
	if err != nil {
		t.Fatal(err)
	}
	got := updated.Pod()
	wantContainers(t, got.Spec.Containers, "app", "mesh-proxy", "agent")
	if got.Spec.Containers[2].Image != "agent:2" {
		t.Errorf("agent image = %s, want agent:2", got.Spec.Containers[2].Image)
	}
	assertPatchMatchesPod(t, pod, updated)
}
