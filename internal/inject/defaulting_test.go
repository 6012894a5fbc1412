package inject_test

import (
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/podrules"
)

// TestEnvDefinitionsComparedAsStored: shareVolumePolicy (a subPathExpr's variables) and
// transferEnv (the variables a value refers to) compare the app's env definitions with the
// sidecar's. The API server stores every pod defaulted (a fieldRef gets apiVersion v1), while a
// SidecarSet and an offline manifest hold what was written; the outcome must not depend on
// which form each side is in: the webhook (stored pod), the kubectl plugin (a manifest as
// written) and a re-injection of the plugin's output once stored must all inject the same.
func TestEnvDefinitionsComparedAsStored(t *testing.T) {
	podName := func(apiVersion string) corev1.EnvVar {
		return corev1.EnvVar{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: apiVersion, FieldPath: "metadata.name"}}}
	}
	build := func(podForm, setForm string) inject.Input {
		set := webSet("log-agent")
		set.Spec.Containers = []appsv1alpha1.SidecarContainer{{
			Container:         corev1.Container{Name: "log-agent", Image: "fluent-bit:3", Env: []corev1.EnvVar{podName(setForm)}},
			ShareVolumePolicy: appsv1alpha1.ShareVolumePolicy{Type: appsv1alpha1.ShareVolumePolicyEnabled},
			TransferEnv:       []appsv1alpha1.TransferEnvVar{{SourceContainerName: "app", EnvName: "LOG_PREFIX"}},
		}}
		pod := webPod(corev1.Container{Name: "app", Image: "web:1",
			Env:          []corev1.EnvVar{podName(podForm), {Name: "LOG_PREFIX", Value: "web/$(POD_NAME)"}},
			VolumeMounts: []corev1.VolumeMount{{Name: "logs", MountPath: "/var/log/app", SubPathExpr: "$(POD_NAME)"}}})
		pod.Spec.Volumes = []corev1.Volume{{Name: "logs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		return inject.Input{Pod: pod, Sets: compile(t, set)}
	}
	var want *corev1.Container
	for _, podForm := range []string{"v1", ""} {
		for _, setForm := range []string{"v1", ""} {
			t.Run(fmt.Sprintf("pod apiVersion %q, set apiVersion %q", podForm, setForm), func(t *testing.T) {
				res, err := inject.Apply(build(podForm, setForm))
				if err != nil {
					t.Fatalf("Apply: %v", err)
				}
				if rec := res.Records["log-agent"]; len(rec.NotShared) > 0 || len(res.Warnings) > 0 {
					t.Errorf("the mount was left out or the variable not transferred: notShared %q, warnings %q", rec.NotShared, res.Warnings)
				}
				out := res.Pod()
				sidecar := podrules.DefaultedContainer(&out.Spec.Containers[1], false, false)
				if want == nil {
					want = sidecar
				} else if !reflect.DeepEqual(want, sidecar) {
					t.Errorf("the sidecar differs with the other form of the same definitions:\n%s\nwant\n%s", mustJSON(t, sidecar), mustJSON(t, want))
				}
				// The output stored by the API server, injected again (an exported pod).
				again, err := inject.Apply(inject.Input{Pod: podrules.Defaulted(out), Sets: build(podForm, setForm).Sets})
				if err != nil {
					t.Fatalf("Apply of the stored output: %v", err)
				}
				if again.Changed() || !reflect.DeepEqual(again.Records, res.Records) {
					t.Errorf("re-injecting the stored output changed it: changed %v, records %s, first %s",
						again.Changed(), again.Records.Encode(), res.Records.Encode())
				}
			})
		}
	}
}
