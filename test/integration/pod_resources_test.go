package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/podrules"
)

// podBudgetSet is a SidecarSet whose sidecar requests 200m of CPU.
func podBudgetSet(name, app string) *appsv1alpha1.SidecarSet {
	return &appsv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1alpha1.SidecarSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			Containers: []appsv1alpha1.SidecarContainer{{Container: corev1.Container{
				Name: "mesh-proxy", Image: "registry.example/proxy:1.22",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
				},
			}}},
		},
	}
}

// budgetPod is an opted-in pod with pod-level resources (spec.resources: 500m of CPU and 1Gi
// requested, 1Gi limit) and one app container requesting appCPU.
func budgetPod(ns, name, app, appCPU string) *corev1.Pod {
	pod := appPod(ns, name, app, true)
	pod.Spec.Resources = &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
	}
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(appCPU)}
	return pod
}

// TestPodLevelResourcesAsTheAPIServerChecksThem: the engine's model of pod-level resources
// (podrules.PodResourceErrors) agrees with the API server on pods of several shapes, native
// sidecars and pod limits without requests (requests then defaulted from the containers')
// included; and what the engine makes of a pod with a budget is what the API server admits:
// injected where the sidecar fits, refused (naming the set and the sidecar's request) where the
// API server would refuse the injected pod with a message naming neither.
func TestPodLevelResourcesAsTheAPIServerChecksThem(t *testing.T) {
	needsKubernetes(t, 34, "pod-level resources (spec.resources, on by default)")
	needsGate(t, "PodLevelResources", "pod-level resources (spec.resources)")
	ns := newNamespace(t, nil)
	cpu := func(q string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}
	}
	shape := func(name string, podLevel corev1.ResourceRequirements, native bool, sidecar corev1.ResourceRequirements) *corev1.Pod {
		pod := appPod(ns, name, "budget", false) // not opted in: the webhook is not called
		pod.Spec.Resources = &podLevel
		pod.Spec.Containers[0].Resources.Requests = cpu("400m")
		c := corev1.Container{Name: "sidecar", Image: "registry.example/proxy:1.22", Resources: sidecar}
		if native {
			c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
			pod.Spec.InitContainers = []corev1.Container{c}
		} else {
			pod.Spec.Containers = append(pod.Spec.Containers, c)
		}
		return pod
	}
	for _, pod := range []*corev1.Pod{
		shape("fits", corev1.ResourceRequirements{Requests: cpu("1")}, false, corev1.ResourceRequirements{Requests: cpu("500m")}),
		shape("over-requests", corev1.ResourceRequirements{Requests: cpu("500m")}, false, corev1.ResourceRequirements{Requests: cpu("200m")}),
		shape("native-over-requests", corev1.ResourceRequirements{Requests: cpu("500m")}, true, corev1.ResourceRequirements{Requests: cpu("200m")}),
		shape("native-fits", corev1.ResourceRequirements{Requests: cpu("1")}, true, corev1.ResourceRequirements{Requests: cpu("200m")}),
		shape("limit-from-request", corev1.ResourceRequirements{Requests: cpu("500m")}, false, corev1.ResourceRequirements{Limits: cpu("200m")}),
		shape("over-pod-limit", corev1.ResourceRequirements{Limits: cpu("1")}, false, corev1.ResourceRequirements{Limits: cpu("2")}),
		shape("pod-limit-only-fits", corev1.ResourceRequirements{Limits: cpu("1")}, false, corev1.ResourceRequirements{Requests: cpu("200m")}),
		shape("pod-limit-only-over", corev1.ResourceRequirements{Limits: cpu("1")}, false, corev1.ResourceRequirements{Requests: cpu("700m")}),
	} {
		t.Run(pod.Name, func(t *testing.T) {
			model := podrules.PodResourceErrors(pod)
			_, err := dryRun(t, pod)
			if err != nil && !apierrors.IsInvalid(err) {
				t.Fatalf("dry-run create: %v", err)
			}
			if (len(model) == 0) != (err == nil) || err != nil && !strings.Contains(err.Error(), "spec.resources") {
				t.Errorf("the engine's model says %v, the API server %v", model, err)
			}
		})
	}

	t.Run("engine", func(t *testing.T) {
		set, err := inject.Compile(podBudgetSet("budget", "budget"))
		must(t, err)
		fits := budgetPod(ns, "fits", "budget", "200m")
		res, err := inject.Apply(inject.Input{Pod: fits, Sets: []*inject.CompiledSet{set}})
		if err != nil || len(res.Injected) != 1 {
			t.Fatalf("a sidecar that fits the pod's budget: injected %v, error %v", res, err)
		}
		out := res.Pod()
		delete(out.Labels, appsv1alpha1.InjectLabel) // what the API server checks is the engine's output
		if _, err := dryRun(t, out); err != nil {
			t.Errorf("the API server refused the injected pod: %v", err)
		}

		over := budgetPod(ns, "over", "budget", "400m")
		if _, err := inject.Apply(inject.Input{Pod: over, Sets: []*inject.CompiledSet{set}}); err == nil ||
			!contains(err.Error(), `SidecarSet "budget"`, "spec.containers[0].resources.requests[cpu]", "spec.resources.requests[cpu]") {
			t.Errorf("a sidecar over the pod's budget: %v, want a refusal naming the set, the sidecar's request and the pod's field", err)
		}
		// What the API server says of that pod injected anyway: it names neither.
		injected := over.DeepCopy()
		delete(injected.Labels, appsv1alpha1.InjectLabel)
		injected.Spec.Containers = append(injected.Spec.Containers, set.Set.Spec.Containers[0].Container)
		if _, err := dryRun(t, injected); err == nil || !contains(err.Error(), "spec.resources.requests[cpu]") || contains(err.Error(), "budget") {
			t.Errorf("the API server on the injected pod: %v, want its own refusal of spec.resources.requests[cpu]", err)
		}
	})
}

// TestPodLevelResourcesThroughTheWebhook: an opted-in pod whose pod-level resources leave room
// for the sidecar is injected and admitted; one whose budget the sidecar exceeds is refused by
// the webhook, with the message naming the set and the sidecar's request.
func TestPodLevelResourcesThroughTheWebhook(t *testing.T) {
	ns := newNamespace(t, nil)
	createSet(t, podBudgetSet("pod-budget", "budget"))

	fits := budgetPod(ns, "fits", "budget", "200m")
	must(t, k8s.Create(ctx, fits))
	if got := getPod(t, fits); len(got.Spec.Containers) != 2 {
		t.Errorf("the pod that fits was not injected: containers %v", containerNames(got.Spec.Containers))
	}
	over := budgetPod(ns, "over", "budget", "400m")
	err := k8s.Create(ctx, over)
	if err == nil {
		t.Fatal("a pod whose budget the sidecar exceeds was admitted")
	}
	if !apierrors.IsForbidden(err) || !contains(err.Error(), `SidecarSet "pod-budget"`, "spec.containers[0].resources.requests[cpu]", "spec.resources.requests[cpu]") {
		t.Errorf("refusal does not come from the webhook naming the set, the sidecar's request and the pod's field: %v", err)
	}
	var none corev1.Pod
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(over), &none); !apierrors.IsNotFound(err) {
		t.Errorf("the refused pod exists: %v", err)
	}
}

// TestPodLimitsOnlyOnEitherSideOfDefaulting: an opted-in pod that sets only a pod-level CPU
// limit (1), its app container requesting 400m, and a set whose sidecar requests 200m. Until
// 1.37 the API server fills the pod-level request in from the app containers (400m) before the
// admission webhooks run, so the sidecar does not fit in it: the webhook refuses the pod, naming
// the set, the pod's field and why the request is there, where the API server would refuse the
// injected pod naming neither. From 1.37 (PodLevelResourcesFixDefaulting) it fills the request
// in after the webhooks: the pod is injected and its request covers the sidecar's (600m).
func TestPodLimitsOnlyOnEitherSideOfDefaulting(t *testing.T) {
	needsKubernetes(t, 34, "pod-level resources (spec.resources, on by default)")
	needsGate(t, "PodLevelResources", "pod-level resources (spec.resources)")
	ns := newNamespace(t, nil)
	createSet(t, podBudgetSet("limits-only", "limits-only"))
	pod := appPod(ns, "limits-only", "limits-only", true)
	pod.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("400m")}
	err := k8s.Create(ctx, pod)
	if kubernetesMinor < 37 || gateOff("PodLevelResourcesFixDefaulting") {
		if err == nil {
			t.Fatalf("Kubernetes 1.%d (%v) filled the pod-level request in before the webhook, yet the pod was admitted: containers %v, resources %v",
				kubernetesMinor, featureGates, containerNames(getPod(t, pod).Spec.Containers), getPod(t, pod).Spec.Resources)
		}
		if !apierrors.IsForbidden(err) || !contains(err.Error(), `SidecarSet "limits-only"`, "spec.resources.requests[cpu]", "Kubernetes 1.34 to 1.36 filled the request in") {
			t.Errorf("refusal on 1.%d does not come from the webhook naming the set, the pod's field and the defaulting: %v", kubernetesMinor, err)
		}
		return
	}
	must(t, err)
	got := getPod(t, pod)
	if len(got.Spec.Containers) != 2 {
		t.Fatalf("the pod was not injected: containers %v", containerNames(got.Spec.Containers))
	}
	if req := got.Spec.Resources.Requests[corev1.ResourceCPU]; req.Cmp(resource.MustParse("600m")) != 0 {
		t.Errorf("the pod-level CPU request is %s, want 600m (the app's 400m and the sidecar's 200m, filled in after injection)", req.String())
	}
}

// TestPaddedPodsKeepTheirQoSClass: with podResources: Pad, pods whose pod-level budget the
// sidecars (a regular one and a native one) do not fit in are admitted under the production
// admission chain (a LimitRange gives the sidecars memory) with the budget grown by what the
// record says, and the API server gives each the QoS class it gives the same pod without
// sidecars; a Pod-type LimitRange maximum that the padded budget exceeds refuses the pod,
// naming the set.
func TestPaddedPodsKeepTheirQoSClass(t *testing.T) {
	needsKubernetes(t, 34, "pod-level resources (spec.resources, on by default)")
	needsGate(t, "PodLevelResources", "pod-level resources (spec.resources)")
	list := quantities
	// Where the LimitRange gives the app container a memory request, a pod that sets only
	// limits is Burstable: the Guaranteed-by-default case needs a namespace without one.
	ns, bare := limitRangeNamespace(t), newNamespace(t, nil)
	set := podBudgetSet("padding", "padded")
	set.Spec.PodResources = appsv1alpha1.PodResourcesPad
	set.Spec.InitContainers = []appsv1alpha1.SidecarContainer{{Container: corev1.Container{
		Name: "mesh-init-proxy", Image: "registry.example/proxy:1.22", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		Resources: corev1.ResourceRequirements{Requests: list("cpu", "50m"), Limits: list("cpu", "100m")},
	}}}
	createSet(t, set)
	for i, tc := range []struct {
		name  string
		ns    string
		level corev1.ResourceRequirements
		app   corev1.ResourceList // the app container's requests
		want  corev1.PodQOSClass
	}{
		{"guaranteed", ns, corev1.ResourceRequirements{Requests: list("cpu", "1", "memory", "1Gi"), Limits: list("cpu", "1", "memory", "1Gi")}, nil, corev1.PodQOSGuaranteed},
		{"guaranteed, requests left to default", bare, corev1.ResourceRequirements{Limits: list("cpu", "1", "memory", "1Gi")}, nil, corev1.PodQOSGuaranteed},
		{"burstable", ns, corev1.ResourceRequirements{Requests: list("cpu", "300m", "memory", "200Mi"), Limits: list("memory", "1Gi")},
			list("cpu", "300m"), corev1.PodQOSBurstable},
		{"burstable, limits only", ns, corev1.ResourceRequirements{Limits: list("cpu", "2", "memory", "1Gi")}, list("cpu", "500m"), corev1.PodQOSBurstable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := appPod(tc.ns, fmt.Sprintf("padded-%d", i), "padded", true)
			pod.Spec.Resources = tc.level.DeepCopy()
			pod.Spec.Containers[0].Resources.Requests = tc.app
			plain := pod.DeepCopy()
			plain.Name += "-plain"
			delete(plain.Labels, appsv1alpha1.InjectLabel)
			must(t, k8s.Create(ctx, plain))
			if plain.Status.QOSClass != tc.want {
				t.Fatalf("the pod without sidecars is %s, want %s: the case is wrong", plain.Status.QOSClass, tc.want)
			}
			must(t, k8s.Create(ctx, pod))
			if len(pod.Spec.Containers) != 2 || len(pod.Spec.InitContainers) != 1 {
				t.Fatalf("not injected: %v", containerNames(pod.Spec.Containers))
			}
			if pod.Status.QOSClass != plain.Status.QOSClass {
				t.Errorf("padded pod is %s, the same pod without sidecars %s; budget %v", pod.Status.QOSClass, plain.Status.QOSClass, pod.Spec.Resources)
			}
			recs, err := inject.ParseRecords(pod.Annotations)
			must(t, err)
			padded := recs[set.Name].Padded
			if padded == nil {
				t.Fatalf("the record says nothing was padded: %+v", recs[set.Name])
			}
			// What the record says was added is the difference, where the pod set the field.
			for _, l := range []struct {
				kind          string
				before, after corev1.ResourceList
				added, stored corev1.ResourceList
			}{{"requests", tc.level.Requests, pod.Spec.Resources.Requests, padded.Requests, plain.Spec.Resources.Requests},
				{"limits", tc.level.Limits, pod.Spec.Resources.Limits, padded.Limits, plain.Spec.Resources.Limits}} {
				for name, was := range l.before {
					sum := was.DeepCopy()
					sum.Add(l.added[name])
					if got := l.after[name]; got.Cmp(sum) != 0 {
						added := l.added[name]
						t.Errorf("%s[%s] = %s, want %s + the recorded %s", l.kind, name, got.String(), was.String(), added.String())
					}
				}
			}
		})
	}

	// A Pod maximum the padded budget exceeds: refused, naming the set.
	must(t, k8s.Create(ctx, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pod-max"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypePod, Max: list("cpu", "1100m")}}}}))
	eventually(t, "the Pod maximum to refuse the padded pod, naming the set", func() (bool, string) {
		pod := appPod(ns, "padded-over", "padded", true)
		pod.Spec.Resources = &corev1.ResourceRequirements{Requests: list("cpu", "1"), Limits: list("cpu", "1")}
		err := k8s.Create(ctx, pod)
		if err == nil {
			must(t, k8s.Delete(ctx, pod))
		}
		return err != nil && contains(err.Error(), `SidecarSet "padding"`), fmt.Sprint(err)
	})
}

// TestPaddedPodsAreResizedWithTheirBudget: a rolling update that changes a padding set's
// sidecar requests resizes a padded pod's pod-level resources with the sidecar's, to what
// injecting the pod afresh gives, where the API server resizes pod-level resources in place
// (InPlacePodLevelResourcesVerticalScaling); elsewhere the resize is refused, the pod keeps its
// resources, and its PodNotUpdatable event says why and what to do.
func TestPaddedPodsAreResizedWithTheirBudget(t *testing.T) {
	needsKubernetes(t, 34, "pod-level resources (spec.resources, on by default)")
	needsGate(t, "PodLevelResources", "pod-level resources (spec.resources)")
	ns := newNamespace(t, nil)
	startFakeKubelet(t, ns, 50*time.Millisecond)
	set := podBudgetSet("padding-resize", "padded-resize")
	set.Spec.PodResources = appsv1alpha1.PodResourcesPad
	set.Spec.UpdateStrategy.Type = appsv1alpha1.RollingUpdate
	createSet(t, set)
	pod := budgetPod(ns, "padded-resize-0", "padded-resize", "400m")
	must(t, k8s.Create(ctx, pod))
	if got := pod.Spec.Resources.Requests[corev1.ResourceCPU]; got.String() != "700m" {
		t.Fatalf("padded cpu request %s, want 700m", got.String())
	}
	waitForCounts(t, set, counts{1, 1, 1, 1})
	before := getPod(t, pod)

	setImages(t, set, func(s *appsv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("300m")
	})
	if kubernetesMinor >= 36 && !gateOff("InPlacePodLevelResourcesVerticalScaling") {
		rollingCondition(t, set, "Complete", "1 of 1 matched pods carry hash")
		after := getPod(t, pod)
		if got := after.Spec.Resources.Requests[corev1.ResourceCPU]; got.String() != "800m" || after.UID != before.UID {
			t.Errorf("after the resize: pod-level cpu request %s (want 800m), same pod %v", got.String(), after.UID == before.UID)
		}
		recs, err := inject.ParseRecords(after.Annotations)
		must(t, err)
		if padded := recs[set.Name].Padded; padded == nil || padded.Requests.Cpu().String() != "300m" {
			t.Errorf("the record says %+v was padded, want cpu 300m", padded)
		}
		return
	}
	waitForEvent(t, "Pod", ns, pod.Name, "PodNotUpdatable", "the API server refused the in-place resize", "podResources: Pad", "InPlacePodLevelResourcesVerticalScaling")
	if after := getPod(t, pod); !equality.Semantic.DeepEqual(after.Spec.Resources, before.Spec.Resources) {
		t.Errorf("the pod-level resources changed: %v -> %v", before.Spec.Resources, after.Spec.Resources)
	}
}

// quantities is a resource list from name, quantity pairs.
func quantities(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}
