package podrules

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// TestNativeSidecar: only restartPolicy Always makes an init container a native sidecar; an
// unset policy (one that runs to completion) and any other value do not.
func TestNativeSidecar(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy *corev1.ContainerRestartPolicy
		want   bool
	}{
		{name: "Always", policy: ptr.To(corev1.ContainerRestartPolicyAlways), want: true},
		{name: "unset", policy: nil},
		{name: "OnFailure", policy: ptr.To(corev1.ContainerRestartPolicyOnFailure)},
		{name: "Never", policy: ptr.To(corev1.ContainerRestartPolicyNever)},
		{name: "empty", policy: ptr.To(corev1.ContainerRestartPolicy(""))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &corev1.Container{Name: "proxy", RestartPolicy: tc.policy}
			if got := NativeSidecar(c); got != tc.want {
				t.Errorf("NativeSidecar(restartPolicy %v) = %v, want %v", ptr.Deref(tc.policy, "<unset>"), got, tc.want)
			}
		})
	}
	if NativeSidecar(nil) {
		t.Error("NativeSidecar(nil) = true")
	}
}
