package inject_test

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// TestDrift injects a pod, then plays another version of the engine by changing what the
// pod carries under the same record: Drift names each field this engine would render
// otherwise, and nothing for what the API server adds or for a pod at another hash.
func TestDrift(t *testing.T) {
	set := webSet("agent", corev1.Container{Name: "agent", Image: "agent:1",
		Env:          []corev1.EnvVar{{Name: "LEVEL", Value: "info"}},
		VolumeMounts: []corev1.VolumeMount{{Name: "agent-config", MountPath: "/etc/agent"}}})
	set.Spec.Volumes = []corev1.Volume{{Name: "agent-config", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	res, err := inject.Apply(inject.Input{Pod: webPod(corev1.Container{Name: "app", Image: "app:1"}), Sets: compile(t, set)})
	if err != nil {
		t.Fatal(err)
	}
	agent := func(p *corev1.Pod) *corev1.Container {
		return &p.Spec.Containers[slices.IndexFunc(p.Spec.Containers, func(c corev1.Container) bool { return c.Name == "agent" })]
	}
	for _, tt := range []struct {
		name string
		edit func(*corev1.Pod)
		want []string // substrings, one per difference, in order
	}{
		{"as injected", func(*corev1.Pod) {}, nil},
		{"defaulted by the API server", func(p *corev1.Pod) {
			agent(p).TerminationMessagePath = corev1.TerminationMessagePathDefault
			agent(p).ImagePullPolicy = corev1.PullIfNotPresent
		}, nil},
		{"an env var rendered otherwise", func(p *corev1.Pod) { agent(p).Env[0].Value = "debug" },
			[]string{"spec.containers[agent].env: differs from what this version injects"}},
		{"a volume not added", func(p *corev1.Pod) {
			p.Spec.Volumes = slices.DeleteFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "agent-config" })
		}, []string{"spec.volumes[agent-config]"}},
		{"another hash: the rollout's business", func(p *corev1.Pod) {
			agent(p).Env[0].Value = "debug"
			p.Annotations[appsv1alpha1.StatusAnnotation] = strings.Replace(p.Annotations[appsv1alpha1.StatusAnnotation],
				compile(t, set)[0].Hash, "0000000000000000", 1)
		}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pod := res.Pod()
			tt.edit(pod)
			got, err := inject.Drift(inject.Input{Pod: pod, Sets: compile(t, set)}, "agent")
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("drift %q; want %d differences %q", got, len(tt.want), tt.want)
			}
			for i := range got {
				if !strings.Contains(got[i], tt.want[i]) {
					t.Errorf("difference %d is %q; want it to contain %q", i, got[i], tt.want[i])
				}
			}
		})
	}
	pod := webPod(corev1.Container{Name: "app", Image: "app:1"})
	if _, err := inject.Drift(inject.Input{Pod: pod, Sets: compile(t, set)}, "agent"); err == nil || !strings.Contains(err.Error(), "no record") {
		t.Errorf("a pod the set never injected: error %v; want one saying the record has none of the set", err)
	}
}
