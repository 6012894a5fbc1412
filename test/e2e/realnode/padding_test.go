//go:build e2e

package realnode

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// TestPaddedPodOnRealNode: a Deployment's pods set a pod-level budget their app container
// fills, and a set pads it (podResources: Pad) for its sidecar instead of refusing them: the
// kubelet runs the padded pod, Ready, with the QoS class the budget alone gives, the budget
// grown by what the record says, and the set's status counts the sidecar's requests.
func TestPaddedPodOnRealNode(t *testing.T) {
	ns := newNamespace(t, "realnode-padded")
	quantities := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	agent := probed("agent", image("agent:v1"))
	agent.Resources = corev1.ResourceRequirements{Requests: quantities("cpu", "100m", "memory", "32Mi"), Limits: quantities("memory", "64Mi")}
	set := &appsv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "realnode-padded"},
		Spec: appsv1alpha1.SidecarSetSpec{
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "padded"}},
			Containers:   []appsv1alpha1.SidecarContainer{{Container: agent}},
			PodResources: appsv1alpha1.PodResourcesPad,
		},
	}
	createSet(t, set)
	app := probed("app", image("app:v1"))
	app.Resources = corev1.ResourceRequirements{Requests: quantities("cpu", "150m", "memory", "64Mi")}
	must(t, k8s.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "padded"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "padded"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "padded", appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue}},
				Spec: corev1.PodSpec{
					HostNetwork:  true,
					NodeSelector: map[string]string{"sidecarset.io/real-node": "true"},
					// The app fills the cpu request: the sidecar fits only padded.
					Resources:                     &corev1.ResourceRequirements{Requests: quantities("cpu", "150m", "memory", "128Mi"), Limits: quantities("memory", "256Mi")},
					Containers:                    []corev1.Container{app},
					TerminationGracePeriodSeconds: ptr.To[int64](10),
				},
			},
		},
	}))
	var pod corev1.Pod
	eventually(t, converge, "the padded pod to run, Ready", func() (bool, string) {
		pods := podsOf(t, ns, "padded")
		if len(pods) != 1 || !ready(&pods[0]) {
			return false, fmt.Sprintf("%d pods, not yet one Ready", len(pods))
		}
		pod = pods[0]
		return true, ""
	})
	if got := pod.Spec.Resources.Requests.Cpu().String(); got != "250m" {
		t.Errorf("pod-level cpu request %s, want 250m (150m + the sidecar's 100m)", got)
	}
	if got := pod.Spec.Resources.Limits.Memory().String(); got != "320Mi" {
		t.Errorf("pod-level memory limit %s, want 320Mi (256Mi + the sidecar's 64Mi)", got)
	}
	if pod.Status.QOSClass != corev1.PodQOSBurstable {
		t.Errorf("QoS class %s, want Burstable (the budget's own)", pod.Status.QOSClass)
	}
	recs, err := inject.ParseRecords(pod.Annotations)
	must(t, err)
	if padded := recs[set.Name].Padded; padded == nil || padded.Requests.Cpu().String() != "100m" {
		t.Errorf("the record says %+v was padded, want the sidecar's cpu 100m", padded)
	}
	if st := status(&pod, "agent"); !st.Ready {
		t.Errorf("the kubelet reports the sidecar not ready: %+v", st)
	}
	waitForCounts(t, set, 1)
	eventually(t, converge, "status.sidecarResources to count the sidecar", func() (bool, string) {
		var got appsv1alpha1.SidecarSet
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), &got))
		r := got.Status.SidecarResources
		return r != nil && r.Pods == 1 && r.Requests.Cpu().String() == "100m" && r.Limits.Memory().String() == "64Mi", fmt.Sprintf("%+v", r)
	})
}
