//go:build e2e

package realnode

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// TestResourcesPolicyOnRealNode: a sidecar whose resourcesPolicy computes its resources from
// the app container's starts with them on the real node; when the app container is resized in
// place (pods/resize, as a vertical autoscaler does), the kubelet applies it, the rollout
// resizes the sidecar to match, and the kubelet applies that too: no container restarts and
// the pod stays.
func TestResourcesPolicyOnRealNode(t *testing.T) {
	ns := newNamespace(t, "realnode-computed")
	set := &appsv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "realnode-computed"},
		Spec: appsv1alpha1.SidecarSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "computed"}},
			Containers: []appsv1alpha1.SidecarContainer{{Container: probed("agent", image("agent:v1")),
				ResourcesPolicy: &appsv1alpha1.ResourcesPolicy{ResourcesExpr: appsv1alpha1.ResourcesExpr{
					Requests: map[corev1.ResourceName]appsv1alpha1.ResourceExpression{corev1.ResourceCPU: "cpu * 0.5"},
					Limits:   map[corev1.ResourceName]appsv1alpha1.ResourceExpression{corev1.ResourceMemory: "memory / 2.0"},
				}}}},
			UpdateStrategy: appsv1alpha1.UpdateStrategy{Type: appsv1alpha1.RollingUpdate, MaxUnavailable: ptr.To(intstr.FromInt32(1))},
		},
	}
	createSet(t, set)
	newDeployment(t, ns, "computed", 1)
	// The Deployment controller writes the new Deployment too (its revision annotation): retry on a
	// conflict.
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var dep appsv1.Deployment
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "computed"}, &dep); err != nil {
			return err
		}
		dep.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
		}
		return k8s.Update(ctx, &dep)
	}))
	sidecarHas := func(p *corev1.Pod, cpu, memory string) (bool, string) {
		st := status(p, "agent")
		if st.Resources == nil {
			return false, fmt.Sprintf("pod %s: the kubelet reports no resources of agent yet", p.Name)
		}
		return st.Resources.Requests.Cpu().Equal(resource.MustParse(cpu)) && st.Resources.Limits.Memory().Equal(resource.MustParse(memory)),
			fmt.Sprintf("pod %s: agent requests cpu %s, limits memory %s", p.Name, st.Resources.Requests.Cpu(), st.Resources.Limits.Memory())
	}
	var pod corev1.Pod
	eventually(t, converge, "the new pod to run its sidecar with the computed resources", func() (bool, string) {
		pods := podsOf(t, ns, "computed")
		if len(pods) != 1 || pods[0].Spec.Containers[0].Resources.Requests.Cpu().String() != "100m" || !ready(&pods[0]) {
			return false, fmt.Sprintf("%d pods, not yet one Ready pod of the sized template", len(pods))
		}
		pod = pods[0]
		return sidecarHas(&pod, "50m", "64Mi")
	})
	before := snapshots(t, ns, "computed", "app", "agent")[pod.Name]

	start := time.Now()
	resize, err := json.Marshal([]map[string]any{{"op": "replace", "path": "/spec/containers/0/resources", "value": corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("300m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
	}}})
	must(t, err)
	must(t, k8s.SubResource("resize").Patch(ctx, &pod, client.RawPatch(types.JSONPatchType, resize)))
	eventually(t, converge, "the kubelet to report the sidecar resized to follow the app", func() (bool, string) {
		var p corev1.Pod
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(&pod), &p))
		return sidecarHas(&p, "150m", "128Mi")
	})
	t.Logf("app resized to 300m/256Mi; the sidecar followed to 150m/128Mi in %s", time.Since(start).Round(100*time.Millisecond))
	after := snapshots(t, ns, "computed", "app", "agent")[pod.Name]
	for _, c := range []string{"app", "agent"} {
		if after.uid != before.uid || after.ids[c] != before.ids[c] || after.restart[c] != before.restart[c] {
			t.Errorf("container %s restarted or the pod was replaced by the resizes: %+v, was %+v", c, after, before)
		}
	}
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
