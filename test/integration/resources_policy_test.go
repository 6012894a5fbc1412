package integration

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/test/builders"
)

// TestResourcesPolicyFollowsAppResize: a sidecar whose resourcesPolicy computes its resources
// gets them from the app container when the pod is created; when the app container is resized
// in place (pods/resize), the rollout resizes the sidecar to match through pods/resize, in the
// same pod, and leaves the other pods alone.
func TestResourcesPolicyFollowsAppResize(t *testing.T) {
	needsKubernetes(t, 33, "in-place resize (pods/resize)")
	ns := newNamespace(t, nil)
	startFakeKubelet(t, ns, 50*time.Millisecond)
	set := builders.SidecarSet("follow", builders.Selecting("follow"), builders.Rolling(),
		builders.WithContainers(corev1.Container{Name: "follow-proxy", Image: "registry.example/proxy:1"}))
	set.Spec.Containers[0].ResourcesPolicy = &appsv1alpha1.ResourcesPolicy{ResourcesExpr: appsv1alpha1.ResourcesExpr{
		Requests: map[corev1.ResourceName]appsv1alpha1.ResourceExpression{corev1.ResourceCPU: "max(cpu * 0.5, quantity('50m'))"},
		Limits:   map[corev1.ResourceName]appsv1alpha1.ResourceExpression{corev1.ResourceMemory: "memory / 2.0"},
	}}
	createSet(t, set)
	var pods []*corev1.Pod
	for i := range 2 {
		pod := appPod(ns, fmt.Sprintf("follow-%d", i), "follow", true)
		pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		}
		must(t, k8s.Create(ctx, pod))
		pods = append(pods, pod)
	}
	waitForCounts(t, set, counts{2, 2, 2, 2})
	before := getPod(t, pods[0])
	if got := sidecarResources(t, before); got != "requests cpu=100m memory=128Mi, limits memory=128Mi" {
		t.Fatalf("the injected sidecar has %s, want what the policy computes from the app container", got)
	}

	// The app container is resized in place, as a vertical autoscaler would.
	resize, err := json.Marshal([]map[string]any{{"op": "replace", "path": "/spec/containers/0/resources", "value": corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("400m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
	}}})
	must(t, err)
	must(t, k8s.SubResource("resize").Patch(ctx, before, client.RawPatch(types.JSONPatchType, resize)))

	eventually(t, "the sidecar to follow the app container's resize", func() (bool, string) {
		got := sidecarResources(t, getPod(t, pods[0]))
		// The memory request follows the computed limit, as the API server defaults it in a
		// pod created now.
		return got == "requests cpu=200m memory=256Mi, limits memory=256Mi", got
	})
	waitForEvent(t, "Pod", ns, pods[0].Name, "SidecarUpdated", "follow-proxy: resources")
	after := getPod(t, pods[0])
	if after.UID != before.UID || after.Spec.Containers[1].Image != "registry.example/proxy:1" {
		t.Errorf("the pod was recreated or its sidecar's image changed: uid %s -> %s, image %s", before.UID, after.UID, after.Spec.Containers[1].Image)
	}
	rollingCondition(t, set, "Complete", "2 of 2 matched pods carry hash")
	if got := sidecarResources(t, getPod(t, pods[1])); got != "requests cpu=100m memory=128Mi, limits memory=128Mi" {
		t.Errorf("the pod whose app container was not resized has a sidecar with %s", got)
	}
}

// sidecarResources is "requests cpu=... memory=..., limits ..." of the pod's second container.
func sidecarResources(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	if len(pod.Spec.Containers) < 2 {
		t.Fatalf("pod %s has no sidecar: %v", pod.Name, containerNames(pod.Spec.Containers))
	}
	r := pod.Spec.Containers[1].Resources
	return fmt.Sprintf("requests cpu=%s memory=%s, limits memory=%s", r.Requests.Cpu(), r.Requests.Memory(), r.Limits.Memory())
}

// TestResourcesPolicyUnderTheAdmissionChain: the policy computes from the app container as the
// production chain admits it (LimitRanger's defaults are in before the webhook runs), and a pod
// whose pod-level resources leave no room for the computed request is refused by the webhook,
// naming the set and the expression, while one that leaves room is stored valid.
func TestResourcesPolicyUnderTheAdmissionChain(t *testing.T) {
	ns := limitRangeNamespace(t) // memory: default request 64Mi, limit 128Mi
	set := builders.SidecarSet("computed", builders.Selecting("computed"),
		builders.WithContainers(corev1.Container{Name: "computed-proxy", Image: "registry.example/proxy:1"}))
	set.Spec.Containers[0].ResourcesPolicy = &appsv1alpha1.ResourcesPolicy{ResourcesExpr: appsv1alpha1.ResourcesExpr{
		Requests: map[corev1.ResourceName]appsv1alpha1.ResourceExpression{corev1.ResourceCPU: "cpu * 0.5"},
		Limits:   map[corev1.ResourceName]appsv1alpha1.ResourceExpression{corev1.ResourceMemory: "memory / 2.0"},
	}}
	createSet(t, set)

	defaulted := appPod(ns, "defaulted", "computed", true)
	defaulted.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("300m")}
	must(t, k8s.Create(ctx, defaulted))
	// The app's memory limit is the LimitRange's 128Mi, so the sidecar's is 64Mi.
	if got := sidecarResources(t, getPod(t, defaulted)); got != "requests cpu=150m memory=64Mi, limits memory=64Mi" {
		t.Errorf("the sidecar of a pod the LimitRange defaults has %s, want what the policy computes from the defaulted app", got)
	}

	needsKubernetes(t, 34, "pod-level resources (spec.resources, on by default)")
	needsGate(t, "PodLevelResources", "pod-level resources (spec.resources)")
	budget := func(name, appCPU string) *corev1.Pod {
		pod := appPod(ns, name, "computed", true)
		pod.Spec.Resources = &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		}
		pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(appCPU), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
		}
		return pod
	}
	fits := budget("fits", "300m") // 300m + 150m of 500m
	must(t, k8s.Create(ctx, fits))
	if got := sidecarResources(t, getPod(t, fits)); got != "requests cpu=150m memory=64Mi, limits memory=64Mi" {
		t.Errorf("the sidecar of the pod that fits has %s", got)
	}
	over := budget("over", "400m") // 400m + 200m of 500m
	err := k8s.Create(ctx, over)
	if err == nil {
		t.Fatal("a pod whose pod-level resources the computed request exceeds was admitted")
	}
	if !contains(err.Error(), `SidecarSet "computed"`, "resourcesPolicy.resourcesExpr.requests[cpu]", "spec.resources.requests[cpu]") {
		t.Errorf("the refusal does not name the set, the expression and the pod's budget: %v", err)
	}
}
