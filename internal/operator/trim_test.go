package operator

import (
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// cachedPodJSON is an opted-in pod as the informer receives it: two app containers and a
// sidecar, each requesting cpu and limited as given, and their statuses.
func cachedPodJSON(tb testing.TB, cpu string) []byte {
	tb.Helper()
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("256Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("512Mi")},
	}
	var containers []corev1.Container
	var statuses []corev1.ContainerStatus
	for _, name := range []string{"api", "worker", "log-agent"} {
		containers = append(containers, corev1.Container{Name: name, Image: "registry.example/" + name + ":4.2.1", Resources: res,
			Env: []corev1.EnvVar{{Name: "APP_NAME", Value: name}}, Args: []string{"--port", "8080"}})
		statuses = append(statuses, corev1.ContainerStatus{Name: name, Image: "registry.example/" + name + ":4.2.1", Ready: true,
			ImageID: "registry.example/" + name + "@sha256:0123456789abcdef", ContainerID: "containerd://" + name})
	}
	raw, err := json.Marshal(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "checkout-6f9c8d7b5-x7k2p", Namespace: "shop", UID: "3f6c0f4e-8a57-4d0c-9a55-2f7a1c1e9b10",
			Labels:      map[string]string{"app": "checkout", appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue},
			Annotations: map[string]string{appsv1alpha1.StatusAnnotation: `{"log-agent":{"hash":"0123456789abcdef","containers":["log-agent"]}}`}},
		Spec:   corev1.PodSpec{NodeName: "node-1", Containers: containers},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: statuses, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return raw
}

// BenchmarkTrimmedPodMemory reports the heap the pod cache keeps per opted-in pod after the
// cache transform, which keeps the containers' requests and limits (the rollout reads them to
// follow an app container's resize for a resourcesPolicy): for pods of one workload, which share
// them, and for pods that each carry their own (the interner's bound is passed, so most are
// kept by their pods alone), and with them dropped, as a baseline.
func BenchmarkTrimmedPodMemory(b *testing.B) {
	const n = 10000
	same := cachedPodJSON(b, "250m")
	for _, variant := range []string{"one-workload", "every-pod-its-own", "dropped"} {
		raws := make([][]byte, n)
		for i := range raws {
			raws[i] = same
			if variant == "every-pod-its-own" {
				raws[i] = cachedPodJSON(b, fmt.Sprintf("%dm", 100000+i))
			}
		}
		b.Run(variant, func(b *testing.B) {
			for b.Loop() {
				sharedResources = &resourcesInterner{max: 4096}
				kept := make([]any, n)
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				for i := range kept {
					var pod corev1.Pod
					if err := json.Unmarshal(raws[i], &pod); err != nil {
						b.Fatal(err)
					}
					trimmed, _ := trimPod(&pod)
					if variant == "dropped" {
						for j := range trimmed.(*corev1.Pod).Spec.Containers {
							trimmed.(*corev1.Pod).Spec.Containers[j].Resources = corev1.ResourceRequirements{}
						}
					}
					kept[i] = trimmed
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/pod")
				runtime.KeepAlive(kept)
			}
		})
	}
}

// TestTrimmedPodsShareResources: pods whose containers carry equal requests and limits share
// one copy in the cache, different ones do not, and past its bound the interner keeps nothing
// more.
func TestTrimmedPodsShareResources(t *testing.T) {
	defer func(old *resourcesInterner) { sharedResources = old }(sharedResources)
	sharedResources = &resourcesInterner{max: 2}
	trimmed := func(cpu string) *corev1.Pod {
		var pod corev1.Pod
		if err := json.Unmarshal(cachedPodJSON(t, cpu), &pod); err != nil {
			t.Fatal(err)
		}
		out, _ := trimPod(&pod)
		return out.(*corev1.Pod)
	}
	requests := func(p *corev1.Pod) uintptr { return reflect.ValueOf(p.Spec.Containers[0].Resources.Requests).Pointer() }
	a, b, c := trimmed("250m"), trimmed("250m"), trimmed("300m")
	if requests(a) != requests(b) {
		t.Error("two pods with the same requests keep two copies")
	}
	if requests(a) == requests(c) || c.Spec.Containers[0].Resources.Requests.Cpu().String() != "300m" {
		t.Errorf("a pod with other requests shares them: %s", c.Spec.Containers[0].Resources.Requests.Cpu())
	}
	if d, e := trimmed("400m"), trimmed("400m"); requests(d) == requests(e) || len(sharedResources.seen) != 2 {
		t.Errorf("past its bound of 2 the interner holds %d entries and shares %v", len(sharedResources.seen), requests(d) == requests(e))
	}
	if got := resourcesKey(a.Spec.Containers[0].Resources); got != "cpu=250m,memory=256Mi,|cpu=1,memory=512Mi,|" {
		t.Errorf("resourcesKey = %q", got)
	}
}

// TestTrimmedPodsKeepWhatStatusReadsOfARestart: status says a pod waits for its old sidecar
// to stop when the kubelet still runs that container while the spec names a new image, with
// the pod's grace period; the cache's trimmed pod must keep both, or status and the rollout
// condition never see the wait (explain, which reads the whole pod, would).
func TestTrimmedPodsKeepWhatStatusReadsOfARestart(t *testing.T) {
	var pod corev1.Pod
	if err := json.Unmarshal(cachedPodJSON(t, "250m"), &pod); err != nil {
		t.Fatal(err)
	}
	grace := int64(10)
	pod.Spec.TerminationGracePeriodSeconds = &grace
	pod.Status.ContainerStatuses[2].State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.Now()}
	out, _ := trimPod(&pod)
	trimmed := out.(*corev1.Pod)
	if g := trimmed.Spec.TerminationGracePeriodSeconds; g == nil || *g != 10 {
		t.Errorf("terminationGracePeriodSeconds %v, want 10", g)
	}
	if trimmed.Status.ContainerStatuses[2].State.Running == nil {
		t.Error("the running container's state is dropped")
	}
	if trimmed.Status.ContainerStatuses[0].State.Running != nil {
		t.Error("a container with no running state is marked running")
	}
}
