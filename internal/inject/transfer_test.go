package inject_test

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/third_party/forked/golang/expansion"

	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// kubeletEnv is what a container sees: its env expanded in order, as the kubelet does
// (pkg/kubelet/kuberuntime makeEnvironmentVariables). A valueFrom var stands for its source,
// which is the same in every container of the pod; serviceEnv stands for service links.
func kubeletEnv(env []corev1.EnvVar, serviceEnv map[string]string) map[string]string {
	seen := map[string]string{}
	for _, v := range env {
		if v.ValueFrom != nil {
			seen[v.Name] = fmt.Sprintf("<source of %s: %v>", v.Name, v.ValueFrom)
			continue
		}
		seen[v.Name] = expansion.Expand(v.Value, expansion.MappingFuncFor(seen, serviceEnv))
	}
	return seen
}

// TestTransferEnvGivesWhatTheAppSees transfers a var into a sidecar that defines variables of
// its own, and checks that the sidecar's kubelet computes the value the app's kubelet does.
func TestTransferEnvGivesWhatTheAppSees(t *testing.T) {
	services := map[string]string{"DB_SERVICE_HOST": "10.0.0.7"}
	cm := &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "port"}}
	tests := []struct {
		name string
		app  []corev1.EnvVar
	}{
		{"literal", []corev1.EnvVar{{Name: "V", Value: "plain"}}},
		{"reference to a literal", []corev1.EnvVar{{Name: "HOST", Value: "api"}, {Name: "V", Value: "http://$(HOST)/"}}},
		{"chain of references", []corev1.EnvVar{{Name: "A", Value: "a"}, {Name: "B", Value: "$(A)-b"}, {Name: "V", Value: "$(B)-$(A)"}}},
		{"reference to a valueFrom var", []corev1.EnvVar{{Name: "PORT", ValueFrom: cm}, {Name: "V", Value: ":$(PORT)"}}},
		{"escaped dollar", []corev1.EnvVar{{Name: "V", Value: "cost $$5 and $$(HOST)"}}},
		{"dollar in a referenced value", []corev1.EnvVar{{Name: "P", Value: "$$(HOST)"}, {Name: "V", Value: "x$(P)"}}},
		{"undefined and service references", []corev1.EnvVar{{Name: "V", Value: "$(NOPE)@$(DB_SERVICE_HOST)"}}},
		{"reference defined later", []corev1.EnvVar{{Name: "V", Value: "$(LATER)"}, {Name: "LATER", Value: "x"}}},
		{"redefined var", []corev1.EnvVar{{Name: "HOST", Value: "one"}, {Name: "V", Value: "$(HOST)"}, {Name: "HOST", Value: "two"}}},
		{"unterminated reference", []corev1.EnvVar{{Name: "HOST", Value: "h"}, {Name: "V", Value: "$(HOST"}}},
		{"lone dollar", []corev1.EnvVar{{Name: "V", Value: "a$b$"}}},
		{"undefined name the sidecar defines", []corev1.EnvVar{{Name: "V", Value: "$(HOST)"}}},
	}
	// The sidecar defines HOST itself: a reference it resolved by name would read the wrong one.
	sidecarOwn := []corev1.EnvVar{{Name: "HOST", Value: "sidecar"}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := &corev1.Container{Name: "app", Env: tt.app}
			vars, from, free, ok := inject.AppEnvView(app, "V")
			if !ok {
				t.Fatal("AppEnvView found no V")
			}
			for k := range vars {
				if from[k] < 0 || from[k] >= len(tt.app) || tt.app[from[k]].Name != vars[k].Name {
					t.Errorf("vars[%d] (%s) said to come from app env[%d] of %+v", k, vars[k].Name, from[k], tt.app)
				}
			}
			for _, v := range vars[:len(vars)-1] {
				if v.Name == "HOST" {
					t.Skip("the value needs the app's HOST, which the sidecar defines: the engine refuses to transfer it")
				}
			}
			if slices.Contains(free, "HOST") {
				t.Skip("the value refers to a HOST the app does not define and the sidecar does: the engine refuses to transfer it")
			}
			sidecar := append(append([]corev1.EnvVar(nil), sidecarOwn...), vars...)
			want := kubeletEnv(tt.app, services)["V"]
			if got := kubeletEnv(sidecar, services)["V"]; got != want {
				t.Errorf("sidecar sees V=%q, app sees %q (transferred %+v)", got, want, vars)
			}
		})
	}
}
