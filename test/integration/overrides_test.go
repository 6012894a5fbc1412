package integration

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// TestOverrides: through the production admission chain, a pod's annotation sets the CPU
// request of its sidecar within the set's rule, a value the rule refuses denies the pod with
// the annotation, the set and the rule's message named, and a rolling update of the sidecar's
// image keeps the pod's overridden request (same pod).
func TestOverrides(t *testing.T) {
	ns := newNamespace(t, nil)
	startFakeKubelet(t, ns, 100*time.Millisecond)
	const key = "agent.example.com/cpu"
	set := rollingSet("overrides", "overridden")
	set.Spec.Overrides = []appsv1alpha1.Override{{Annotation: key, Container: "overrides-agent", Field: appsv1alpha1.OverrideRequestsCPU,
		Rule: "amount.compareTo(quantity('100m')) <= 0", Message: "at most 100m, the agent's limit"}}

	bad := set.DeepCopy()
	bad.Name = "overrides-bad-rule"
	bad.Spec.Overrides[0].Rule = "amount <= 100"
	if err := k8s.Create(ctx, bad); err == nil || !strings.Contains(err.Error(), "spec.overrides[0].rule") {
		deleteIgnoreNotFound(t, bad)
		t.Fatalf("creating a set whose rule does not type-check: %v, want a refusal naming spec.overrides[0].rule", err)
	}
	set = createSet(t, set)

	pod := appPod(ns, "overridden-0", "overridden", true)
	pod.Annotations = map[string]string{key: "50m"}
	must(t, k8s.Create(ctx, pod))
	got := getPod(t, pod)
	if cpu := sidecar(t, got, "overrides-agent").Resources.Requests.Cpu().String(); cpu != "50m" {
		t.Errorf("the sidecar's CPU request is %s, want the pod's 50m", cpu)
	}
	recs, err := inject.ParseRecords(got.Annotations)
	must(t, err)
	if v := recs["overrides"].Overrides[key]; v != "50m" {
		t.Errorf("the pod's record of the set has overrides %v, want %s=50m", recs["overrides"].Overrides, key)
	}

	greedy := appPod(ns, "overridden-1", "overridden", true)
	greedy.Annotations = map[string]string{key: "2"}
	err = k8s.Create(ctx, greedy)
	if err == nil {
		t.Fatal("a pod asking for 2 CPUs was admitted; the set allows at most 100m")
	}
	for _, want := range []string{key, `SidecarSet "overrides"`, "at most 100m, the agent's limit"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("denial %q does not name %q", err.Error(), want)
		}
	}

	// The annotation changed on the running pod: the update keeps the recorded value.
	// A merge patch: the fake kubelet writes the pod's status meanwhile.
	edited := getPod(t, pod)
	base := edited.DeepCopy()
	edited.Annotations[key] = "80m"
	must(t, k8s.Patch(ctx, edited, client.MergeFrom(base)))
	setImages(t, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "registry.example/agent:2.0" })
	rollingCondition(t, set, "Complete", "1 of 1 matched pods carry hash")
	after := getPod(t, pod)
	if after.UID != got.UID {
		t.Errorf("the pod was recreated")
	}
	agent := sidecar(t, after, "overrides-agent")
	if agent.Image != "registry.example/agent:2.0" || agent.Resources.Requests.Cpu().String() != "50m" {
		t.Errorf("after the rolling update the sidecar runs %s with a CPU request of %s, want agent:2.0 with the pod's 50m",
			agent.Image, agent.Resources.Requests.Cpu())
	}
}

func sidecar(t *testing.T, pod *corev1.Pod, name string) *corev1.Container {
	t.Helper()
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	t.Fatalf("pod %s has no container %s: %v", pod.Name, name, containerNames(pod.Spec.Containers))
	return nil
}
