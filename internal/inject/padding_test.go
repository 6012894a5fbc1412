package inject_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/apis/core/v1/helper/qos"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/podrules"
)

// storedQOS is the QoS class the API server gives a pod: its pod-level resources as stored
// (defaulted from its containers), read by Kubernetes' own QoS code.
func storedQOS(t *testing.T, pod *corev1.Pod) corev1.PodQOSClass {
	t.Helper()
	stored, err := podrules.PodLevelDefaulted(pod)
	if err != nil {
		t.Fatal(err)
	}
	p := pod.DeepCopy()
	p.Spec.Resources = stored
	return qos.ComputePodQOS(p)
}

// TestPaddingKeepsTheQoSClass: under podResources: Pad, every pod-level budget shape (Guaranteed
// written out or by default, Burstable by requests or by limits, ephemeral storage) keeps its
// QoS class whatever its sidecars (regular or native; requests, limits, both or neither), the
// padded pod passes the API server's pod-level checks, and injecting the injected pod again
// changes nothing.
func TestPaddingKeepsTheQoSClass(t *testing.T) {
	budgets := []struct {
		name  string
		level corev1.ResourceRequirements
		app   corev1.ResourceRequirements
		want  corev1.PodQOSClass
	}{
		{"guaranteed", corev1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "1Gi"), Limits: rl("cpu", "1", "memory", "1Gi")},
			corev1.ResourceRequirements{}, corev1.PodQOSGuaranteed},
		{"guaranteed by default", corev1.ResourceRequirements{Limits: rl("cpu", "2", "memory", "2Gi")}, corev1.ResourceRequirements{}, corev1.PodQOSGuaranteed},
		{"burstable by requests", corev1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "1Gi")},
			corev1.ResourceRequirements{Requests: rl("cpu", "500m")}, corev1.PodQOSBurstable},
		{"burstable by limits", corev1.ResourceRequirements{Limits: rl("cpu", "2", "memory", "2Gi")},
			corev1.ResourceRequirements{Requests: rl("cpu", "500m", "memory", "256Mi")}, corev1.PodQOSBurstable},
		{"memory only", corev1.ResourceRequirements{Requests: rl("memory", "1Gi"), Limits: rl("memory", "1Gi")},
			corev1.ResourceRequirements{}, corev1.PodQOSBurstable},
		{"guaranteed, the app's own requests", corev1.ResourceRequirements{Limits: rl("cpu", "1", "memory", "1Gi")},
			corev1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "1Gi")}, corev1.PodQOSGuaranteed},
	}
	sidecars := []struct {
		name      string
		resources corev1.ResourceRequirements
	}{
		{"requests", corev1.ResourceRequirements{Requests: rl("cpu", "100m", "memory", "64Mi", "ephemeral-storage", "100Mi")}},
		{"limits", corev1.ResourceRequirements{Limits: rl("cpu", "200m", "memory", "128Mi")}},
		{"both", corev1.ResourceRequirements{Requests: rl("cpu", "100m", "memory", "64Mi"), Limits: rl("cpu", "300m", "memory", "128Mi")}},
		{"neither", corev1.ResourceRequirements{}},
	}
	for _, b := range budgets {
		for _, sc := range sidecars {
			for _, native := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/native=%v", b.name, sc.name, native), func(t *testing.T) {
					container := appsv1alpha1.SidecarContainer{Container: corev1.Container{Name: "agent", Image: "registry.example/agent:1", Resources: sc.resources}}
					set := &appsv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "agent"}, Spec: appsv1alpha1.SidecarSetSpec{
						PodResources: appsv1alpha1.PodResourcesPad,
						Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}},
					}}
					if native {
						container.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
						set.Spec.InitContainers = []appsv1alpha1.SidecarContainer{container}
					} else {
						set.Spec.Containers = []appsv1alpha1.SidecarContainer{container}
					}
					pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "shop",
						Labels: map[string]string{"app": "shop", appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue}},
						Spec: corev1.PodSpec{Resources: b.level.DeepCopy(), Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1", Resources: b.app}}}}
					if got, errs := storedQOS(t, pod), podrules.PodResourceErrors(pod); got != b.want || len(errs) > 0 {
						t.Fatalf("the pod without sidecars is %s (%v), want %s and valid: the case is wrong", got, errs, b.want)
					}
					sets := compile(t, set)
					res, err := inject.Apply(inject.Input{Pod: pod, Sets: sets})
					if err != nil {
						t.Fatalf("refused: %v", err)
					}
					injected := res.Pod()
					if got := storedQOS(t, injected); got != b.want {
						t.Errorf("padded pod is %s, want %s\nbudget %v\nsidecars %v", got, b.want, injected.Spec.Resources, sc.resources)
					}
					if errs := podrules.PodResourceErrors(injected); len(errs) > 0 {
						t.Errorf("the padded pod breaks the API server's pod-level checks: %v\nbudget %v", errs, injected.Spec.Resources)
					}
					again, err := inject.Apply(inject.Input{Pod: injected, Sets: sets})
					if err != nil {
						t.Fatalf("injecting the injected pod again: %v", err)
					}
					if again.Changed() {
						t.Errorf("injecting the injected pod again changed it: %v", again.Patch())
					}
				})
			}
		}
	}
}

// TestUpdateInPlaceRepadsThePodLevelResources: when a padding set's sidecar requests and
// limits change, the in-place resize carries the pod's pod-level resources padded for the new
// ones (the pod's own budget plus the new padding: what injecting the original pod with the new
// set gives), for Guaranteed and Burstable pods, and the record follows; the updated pod
// injected again changes nothing.
func TestUpdateInPlaceRepadsThePodLevelResources(t *testing.T) {
	for _, level := range []corev1.ResourceRequirements{
		{Requests: rl("cpu", "1", "memory", "1Gi"), Limits: rl("cpu", "1", "memory", "1Gi")},
		{Requests: rl("cpu", "500m", "memory", "512Mi"), Limits: rl("memory", "1Gi")},
	} {
		set := func(cpu, memory string) *appsv1alpha1.SidecarSet {
			s := webSet("agent", corev1.Container{Name: "agent", Image: "registry.example/agent:1",
				Resources: corev1.ResourceRequirements{Requests: rl("cpu", cpu, "memory", memory), Limits: rl("memory", memory)}})
			s.Spec.PodResources = appsv1alpha1.PodResourcesPad
			return s
		}
		original := webPod(corev1.Container{Name: "app", Image: "app:1"})
		original.Spec.Resources = level.DeepCopy()
		res, err := inject.Apply(inject.Input{Pod: original, Sets: compile(t, set("100m", "64Mi"))})
		if err != nil {
			t.Fatal(err)
		}
		pod := res.Pod()
		pod.ResourceVersion = "7"
		newer := compile(t, set("300m", "128Mi"))
		u, err := inject.UpdateInPlace(inject.Input{Pod: pod, Sets: newer}, "agent", nil)
		if err != nil || len(u.Blocked) > 0 {
			t.Fatalf("update: %v, blocked %q", err, u.Blocked)
		}
		fresh, err := inject.Apply(inject.Input{Pod: original, Sets: newer})
		if err != nil {
			t.Fatal(err)
		}
		want := fresh.Pod()
		if u.PodResources == nil || !equality.Semantic.DeepEqual(u.PodResources, want.Spec.Resources) {
			t.Errorf("budget %v: the resize sets pod-level resources %v, want %v", level, u.PodResources, want.Spec.Resources)
		}
		updated := patchedPod(t, patchedPod(t, pod, u.ResizePatch()), u.Patch())
		if got, wantRec := updated.Annotations[appsv1alpha1.StatusAnnotation], want.Annotations[appsv1alpha1.StatusAnnotation]; got != wantRec {
			t.Errorf("record after the update %s, want %s", got, wantRec)
		}
		again, err := inject.Apply(inject.Input{Pod: updated, Sets: newer})
		if err != nil || again.Changed() {
			t.Errorf("injecting the updated pod again: %v, changes %v", err, again.Patch())
		}
	}
}

// rl is a resource list from name, quantity pairs.
func rl(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

// TestPaddingHoldsWhatTheAPIServerStores: budgets the pod leaves partly to the API server's
// defaulting, plain init containers, hugepages, and a set that stopped padding: the padded pod
// keeps the QoS class and the request the same pod without sidecars is stored with, passes the
// API server's pod-level checks, and injecting it again changes nothing.
func TestPaddingHoldsWhatTheAPIServerStores(t *testing.T) {
	app := func(res corev1.ResourceRequirements) corev1.Container {
		return corev1.Container{Name: "app", Image: "app:1", Resources: res}
	}
	for _, tc := range []struct {
		name    string
		level   corev1.ResourceRequirements
		app     corev1.Container
		sidecar corev1.ResourceRequirements
		init    *corev1.ResourceRequirements // a plain init container of the set
		minCPU  string                       // the stored pod-level cpu request is at least this
	}{
		{name: "a plain init container is not taken back", level: corev1.ResourceRequirements{Requests: rl("cpu", "1")},
			app: app(corev1.ResourceRequirements{Requests: rl("cpu", "1")}), sidecar: corev1.ResourceRequirements{Requests: rl("cpu", "100m")},
			init: &corev1.ResourceRequirements{Requests: rl("cpu", "300m")}, minCPU: "1100m"},
		{name: "a memory limit defaulted from the app keeps the pod Guaranteed",
			level:   corev1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "1Gi"), Limits: rl("cpu", "1")},
			app:     app(corev1.ResourceRequirements{Limits: rl("memory", "1Gi")}),
			sidecar: corev1.ResourceRequirements{Requests: rl("cpu", "100m", "memory", "64Mi"), Limits: rl("cpu", "100m", "memory", "128Mi")},
			minCPU:  "1100m"},
		{name: "hugepages only", level: corev1.ResourceRequirements{Limits: rl("hugepages-2Mi", "1Gi")},
			app:     app(corev1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "1Gi", "hugepages-2Mi", "512Mi"), Limits: rl("cpu", "1", "memory", "1Gi", "hugepages-2Mi", "512Mi")}),
			sidecar: corev1.ResourceRequirements{Requests: rl("hugepages-2Mi", "2Mi"), Limits: rl("hugepages-2Mi", "2Mi")}},
		{name: "a request the pod left to its limit does not collapse", level: corev1.ResourceRequirements{Limits: rl("cpu", "2")},
			app: app(corev1.ResourceRequirements{}), sidecar: corev1.ResourceRequirements{Requests: rl("cpu", "100m")}, minCPU: "2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := webSet("agent", corev1.Container{Name: "agent", Image: "agent:1", Resources: tc.sidecar})
			set.Spec.PodResources = appsv1alpha1.PodResourcesPad
			if tc.init != nil {
				set.Spec.InitContainers = []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "setup", Image: "setup:1", Resources: *tc.init}}}
			}
			pod := webPod(tc.app)
			pod.Spec.Resources = tc.level.DeepCopy()
			sets := compile(t, set)
			res, err := inject.Apply(inject.Input{Pod: pod, Sets: sets})
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			injected := res.Pod()
			if before, after := storedQOS(t, pod), storedQOS(t, injected); before != after {
				t.Errorf("QoS %s, %s before padding; budget %v", after, before, injected.Spec.Resources)
			}
			if errs := podrules.PodResourceErrors(injected); len(errs) > 0 {
				t.Errorf("the padded pod breaks the API server's pod-level checks: %v", errs)
			}
			if tc.minCPU != "" {
				stored, err := podrules.PodLevelDefaulted(injected)
				if err != nil {
					t.Fatal(err)
				}
				if got := stored.Requests[corev1.ResourceCPU]; got.Cmp(resource.MustParse(tc.minCPU)) < 0 {
					t.Errorf("stored cpu request %s, want at least %s", got.String(), tc.minCPU)
				}
			}
			again, err := inject.Apply(inject.Input{Pod: injected, Sets: sets})
			if err != nil || again.Changed() {
				t.Fatalf("injecting the injected pod again: %v, changes %v", err, again.Patch())
			}
			// An image-only update is not blocked, and leaves the budget.
			set.Spec.Containers[0].Image = "agent:2"
			injected.ResourceVersion = "7"
			u, err := inject.UpdateInPlace(inject.Input{Pod: injected, Sets: compile(t, set)}, "agent", nil)
			if err != nil || len(u.Blocked) > 0 || u.PodResources != nil {
				t.Errorf("image update: %v, blocked %q, pod-level resources %v", err, u.Blocked, u.PodResources)
			}
			// A set that stops padding leaves the padded budget as the pod's own.
			set.Spec.Containers[0].Image = "agent:1"
			set.Spec.PodResources = appsv1alpha1.PodResourcesRefuse
			refusing, err := inject.Apply(inject.Input{Pod: injected, Sets: compile(t, set)})
			if err != nil {
				t.Fatalf("a set that stopped padding refuses the padded pod: %v", err)
			}
			if got := refusing.Pod().Spec.Resources; !equality.Semantic.DeepEqual(got, injected.Spec.Resources) {
				t.Errorf("a set that stopped padding changed the budget %v to %v", injected.Spec.Resources, got)
			}
		})
	}
}

// TestPolicyResizeRepadsThePodLevelResources: a padding set's resourcesPolicy sidecar that
// follows an app container resized in place is resized with the pod-level resources padded for
// its new requests.
func TestPolicyResizeRepadsThePodLevelResources(t *testing.T) {
	set := webSet("agent", corev1.Container{Name: "agent", Image: "agent:1"})
	set.Spec.PodResources = appsv1alpha1.PodResourcesPad
	set.Spec.Containers[0].ResourcesPolicy = &appsv1alpha1.ResourcesPolicy{ResourcesExpr: appsv1alpha1.ResourcesExpr{
		Requests: map[corev1.ResourceName]appsv1alpha1.ResourceExpression{corev1.ResourceCPU: "cpu * 0.5"}}}
	sets := compile(t, set)
	pod := webPod(corev1.Container{Name: "app", Image: "app:1", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1")}})
	pod.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("cpu", "2")}
	res, err := inject.Apply(inject.Input{Pod: pod, Sets: sets})
	if err != nil {
		t.Fatal(err)
	}
	injected := res.Pod()
	if got := injected.Spec.Resources.Requests[corev1.ResourceCPU]; got.String() != "2500m" {
		t.Fatalf("padded cpu request %s, want 2500m", got.String())
	}
	// The app is resized to 2 CPUs: the agent follows with 1, and the pod's budget with it.
	injected.Spec.Containers[0].Resources.Requests = rl("cpu", "2")
	injected.ResourceVersion = "7"
	u, err := inject.UpdateInPlace(inject.Input{Pod: injected, Sets: sets}, "agent", nil)
	if err != nil || len(u.Blocked) > 0 || len(u.Resources) != 1 {
		t.Fatalf("policy resize: %v, blocked %q, resources %+v", err, u.Blocked, u.Resources)
	}
	if u.PodResources == nil || u.PodResources.Requests.Cpu().String() != "3" {
		t.Fatalf("pod-level resources after the resize %v, want a cpu request of 3", u.PodResources)
	}
	if errs := podrules.PodResourceErrors(patchedPod(t, injected, u.ResizePatch())); len(errs) > 0 {
		t.Errorf("the resized pod breaks the API server's pod-level checks: %v", errs)
	}
}
