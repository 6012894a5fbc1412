package cli

import (
	"bytes"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// TestStatusSaysRefusingFirst: `kubectl sidecarset status` puts a refusing set's Refusing
// condition right under its name, before the counts; a set that stopped refusing says nothing
// of it there.
func TestStatusSaysRefusingFirst(t *testing.T) {
	for _, tc := range []struct {
		status metav1.ConditionStatus
		want   bool
	}{{metav1.ConditionTrue, true}, {metav1.ConditionFalse, false}} {
		set := &appsv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "mesh"}}
		set.Status.Conditions = []metav1.Condition{{Type: appsv1alpha1.ConditionRefusing, Status: tc.status, Reason: "PortClash",
			Message: "The pod webhook refused 3 pod(s)"}}
		var out bytes.Buffer
		if err := printStatus(&out, set); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(out.String(), "\n")
		first := len(lines) > 1 && strings.HasPrefix(lines[1], "REFUSING PODS:") && strings.Contains(lines[1], "refused 3 pod(s)") && strings.Contains(lines[1], "PortClash")
		if first != tc.want {
			t.Errorf("Refusing %s: second line %q; want the refusal there: %v", tc.status, lines[1], tc.want)
		}
	}
}

// TestStatusSaysWhatTheSidecarsCost: the summary prints status.sidecarResources, and says when
// the set injected no pod.
func TestStatusSaysWhatTheSidecarsCost(t *testing.T) {
	for _, tc := range []struct {
		resources *appsv1alpha1.SidecarResources
		want      string
	}{
		{nil, "Sidecar resources:   <none> (no pod injected)"},
		{&appsv1alpha1.SidecarResources{Pods: 3,
			Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("192Mi"), corev1.ResourceCPU: resource.MustParse("300m")},
			Limits:   corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("3Gi")}},
			"Sidecar resources:   requests cpu 300m, memory 192Mi; limits ephemeral-storage 3Gi (in 3 pods)"},
		{&appsv1alpha1.SidecarResources{Pods: 1}, "Sidecar resources:   requests none; limits none (in 1 pods)"},
	} {
		set := &appsv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "mesh"}}
		set.Status.SidecarResources = tc.resources
		var out bytes.Buffer
		if err := printStatus(&out, set); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), tc.want+"\n") {
			t.Errorf("status:\n%s\nwant the line %q", out.String(), tc.want)
		}
	}
}
