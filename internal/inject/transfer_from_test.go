package inject_test

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// TestTransferEnvFromPodField: sourceContainerNameFrom reads the app container's name from a
// field of the pod. A pod that lacks the field, or names a container it does not have, gets
// the sidecar without the variables and one warning saying which, as a missing
// sourceContainerName does.
func TestTransferEnvFromPodField(t *testing.T) {
	app := func(name string) corev1.Container {
		return corev1.Container{Name: name, Image: "web:1", Env: []corev1.EnvVar{
			{Name: "A", Value: "a-of-" + name}, {Name: "B", Value: "b-of-" + name}}}
	}
	tests := []struct {
		name      string
		fieldPath string
		envNames  []string
		pod       func(*corev1.Pod)
		wantEnv   []string // NAME=value in the sidecar, in order
		wantWarn  string   // a fragment of the one warning; "" for none
	}{
		{name: "label names the container", fieldPath: "metadata.labels['example.com/main']", envNames: []string{"B", "A"},
			pod:     func(p *corev1.Pod) { p.Labels["example.com/main"] = "api" },
			wantEnv: []string{"B=b-of-api", "A=a-of-api"}},
		{name: "annotation names the container", fieldPath: "metadata.annotations['example.com/main']", envNames: []string{"A"},
			pod:     func(p *corev1.Pod) { p.Annotations = map[string]string{"example.com/main": "worker"} },
			wantEnv: []string{"A=a-of-worker"}},
		{name: "pod name names the container", fieldPath: "metadata.name", envNames: []string{"A"},
			pod:     func(p *corev1.Pod) { p.Name = "worker" },
			wantEnv: []string{"A=a-of-worker"}},
		{name: "label absent", fieldPath: "metadata.labels['example.com/main']", envNames: []string{"A", "B"},
			pod:      func(*corev1.Pod) {},
			wantWarn: `transferEnv of "A", "B" from the container named by the pod's metadata.labels['example.com/main']: the pod has no such label; the sidecar runs without these variables`},
		{name: "annotation absent", fieldPath: "metadata.annotations['example.com/main']", envNames: []string{"A"},
			pod:      func(p *corev1.Pod) { p.Labels["example.com/main"] = "api" },
			wantWarn: "the pod has no such annotation; the sidecar runs without the variable"},
		{name: "label empty", fieldPath: "metadata.labels['example.com/main']", envNames: []string{"A"},
			pod:      func(p *corev1.Pod) { p.Labels["example.com/main"] = "" },
			wantWarn: `from container "" (named by the pod's metadata.labels['example.com/main']): the pod has no app container of that name`},
		{name: "label names no container of the pod", fieldPath: "metadata.labels['example.com/main']", envNames: []string{"A"},
			pod:      func(p *corev1.Pod) { p.Labels["example.com/main"] = "billing" },
			wantWarn: `from container "billing" (named by the pod's metadata.labels['example.com/main']): the pod has no app container of that name`},
		{name: "pod created with generateName", fieldPath: "metadata.name", envNames: []string{"A"},
			pod:      func(p *corev1.Pod) { p.Name, p.GenerateName = "", "worker-" },
			wantWarn: "the pod has no name yet (a pod created with generateName is named after admission)"},
		{name: "label names the sidecar itself", fieldPath: "metadata.labels['example.com/main']", envNames: []string{"A"},
			pod:      func(p *corev1.Pod) { p.Labels["example.com/main"] = "agent" },
			wantWarn: `from container "agent" (named by the pod's metadata.labels['example.com/main']): the pod has no app container of that name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := webSet("agent")
			set.Spec.Containers = []appsv1alpha1.SidecarContainer{{
				Container: corev1.Container{Name: "agent", Image: "agent:1"},
				TransferEnv: []appsv1alpha1.TransferEnvVar{{EnvNames: tt.envNames,
					SourceContainerNameFrom: &appsv1alpha1.SourceContainerNameSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: tt.fieldPath}}}},
			}}
			pod := webPod(app("api"), app("worker"))
			tt.pod(pod)
			in := inject.Input{Pod: pod, Sets: compile(t, set)}
			res, err := inject.Apply(in)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			out := res.Pod()
			var got []string
			for _, e := range out.Spec.Containers[len(out.Spec.Containers)-1].Env {
				got = append(got, e.Name+"="+e.Value)
			}
			if !slices.Equal(got, tt.wantEnv) {
				t.Errorf("sidecar env %q, want %q", got, tt.wantEnv)
			}
			switch {
			case tt.wantWarn == "" && len(res.Warnings) > 0:
				t.Errorf("warnings %q, want none", res.Warnings)
			case tt.wantWarn != "" && (len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], tt.wantWarn)):
				t.Errorf("warnings %q, want one containing %q", res.Warnings, tt.wantWarn)
			case tt.wantWarn != "" && !strings.HasPrefix(res.Warnings[0], `SidecarSet "agent" container "agent": `):
				t.Errorf("warning %q does not name the SidecarSet and the container", res.Warnings[0])
			}
			assertPatchMatchesPod(t, pod, res)
			assertIdempotent(t, res, inject.Input{Pod: out, Sets: compile(t, set)})
		})
	}
}

// TestPodField reads the fields sourceContainerNameFrom may select, and nothing else.
func TestPodField(t *testing.T) {
	pod := webPod()
	pod.Labels["k"] = "from-label"
	pod.Annotations = map[string]string{"example.com/k": "from-annotation", "empty": ""}
	tests := []struct {
		path   string
		want   string
		wantOK bool
	}{
		{"metadata.name", "web-0", true},
		{"metadata.labels['k']", "from-label", true},
		{"metadata.annotations['example.com/k']", "from-annotation", true},
		{"metadata.annotations['empty']", "", true},
		{"metadata.labels['absent']", "", false},
		{"metadata.namespace", "", false},
		{"metadata.labels", "", false},
		{"spec.nodeName", "", false},
		{"metadata.uid['k']", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got, ok := inject.PodField(pod, tt.path)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("PodField(%s) = %q, %v; want %q, %v", tt.path, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
