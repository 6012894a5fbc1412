package inject

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestDefaultedRequestsHint: the refusal explains a pod-level request the API server may have
// filled in before injection only where the pod sets a limit for that resource.
func TestDefaultedRequestsHint(t *testing.T) {
	limits := &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
	for _, tc := range []struct {
		name     string
		podLevel *corev1.ResourceRequirements
		field    string
		want     bool
	}{
		{"a cpu request beside a cpu limit", limits, "spec.resources.requests[cpu]", true},
		{"a memory request without a memory limit", limits, "spec.resources.requests[memory]", false},
		{"a limit", limits, "spec.resources.limits[cpu]", false},
		{"no pod-level resources", nil, "spec.resources.requests[cpu]", false},
	} {
		got := defaultedRequestsHint(tc.podLevel, tc.field)
		if (got != "") != tc.want || tc.want && !strings.Contains(got, "Kubernetes 1.34 to 1.36") {
			t.Errorf("%s: hint %q, want one: %v", tc.name, got, tc.want)
		}
	}
}
