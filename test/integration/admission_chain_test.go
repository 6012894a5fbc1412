package integration

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	ourwebhook "github.com/sidecarset/sidecarset-operator/internal/webhook"
	"github.com/sidecarset/sidecarset-operator/test/testutil"
)

// tokenPath is where the ServiceAccount admission plugin mounts the API token in every container.
const tokenPath = "/var/run/secrets/kubernetes.io/serviceaccount"

// chainSet injects a regular sidecar that asks for IfNotPresent and sets only a CPU request,
// and a native sidecar (init container, restartPolicy Always) that sets no resources at all:
// everything else is the admission chain's to fill in.
func chainSet(name, app string) *appsv1alpha1.SidecarSet {
	set := agentSet(name, app)
	set.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
	set.Spec.Containers[0].Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}}
	set.Spec.InitContainers = []appsv1alpha1.SidecarContainer{{Container: corev1.Container{
		Name: name + "-proxy", Image: "registry.example/proxy:1.4", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
	}}}
	return set
}

// limitRangeNamespace is a namespace whose LimitRange gives every container default memory
// requests and limits, and caps memory at 256Mi.
func limitRangeNamespace(t *testing.T) string {
	t.Helper()
	ns := newNamespace(t, nil)
	must(t, k8s.Create(ctx, &corev1.LimitRange{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "defaults"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type:           corev1.LimitTypeContainer,
			Default:        corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
			DefaultRequest: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
			Max:            corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		}}},
	}))
	return ns
}

// TestAdmissionChainKeepsWhatPluginsAdd creates an opted-in pod through the API server's
// production chain (ServiceAccount, LimitRanger, AlwaysPullImages, PodSecurity) and asserts on
// the stored pod that every container, sidecars regular and native included, has what the
// chain gives every container, and that the webhook was called once.
func TestAdmissionChainKeepsWhatPluginsAdd(t *testing.T) {
	ns := limitRangeNamespace(t)
	createSet(t, chainSet("chain", "chain"))

	before := webhookRequests(t, ourwebhook.PodInjectorPath)
	pod := appPod(ns, "chain-0", "chain", true)
	must(t, k8s.Create(ctx, pod))
	assertWebhookCalls(t, before, 1, "webhook calls for one pod")
	var got corev1.Pod
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(pod), &got))
	if names := containerNames(got.Spec.Containers); !slices.Equal(names, []string{"app", "chain-agent"}) {
		t.Fatalf("containers %v, want [app chain-agent]", names)
	}
	if names := containerNames(got.Spec.InitContainers); !slices.Equal(names, []string{"chain-proxy"}) {
		t.Fatalf("init containers %v, want [chain-proxy]", names)
	}
	assertChainGaveEveryContainer(t, &got)

	// Exported and created again (kubectl get -o yaml | kubectl create): the same pod, nothing
	// added twice, nothing stripped, one call.
	before = webhookRequests(t, ourwebhook.PodInjectorPath)
	again := exported(&got, "chain-1")
	must(t, k8s.Create(ctx, again))
	assertWebhookCalls(t, before, 1, "webhook calls for the re-created pod")
	var recreated corev1.Pod
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(again), &recreated))
	assertSameSpec(t, &got, &recreated)
	assertChainGaveEveryContainer(t, &recreated)
}

// TestAdmissionChainUnderReinvocation sets the pod webhook's reinvocationPolicy to IfNeeded, as
// an administrator might: the API server then calls it again with the chain's additions in the
// sidecars, and the second answer must keep them (with AlwaysPullImages, undoing its
// imagePullPolicy makes the API server refuse the pod).
func TestAdmissionChainUnderReinvocation(t *testing.T) {
	setPodWebhookReinvocation(t, admissionregistrationv1.IfNeededReinvocationPolicy)
	ns := limitRangeNamespace(t)
	createSet(t, chainSet("reinvoke", "reinvoke"))

	before := webhookRequests(t, ourwebhook.PodInjectorPath)
	pod := appPod(ns, "reinvoke-0", "reinvoke", true)
	must(t, k8s.Create(ctx, pod))
	assertWebhookCalls(t, before, 2, "webhook calls under IfNeeded")
	var got corev1.Pod
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(pod), &got))
	assertChainGaveEveryContainer(t, &got)
}

// setPodWebhookReinvocation changes the pod webhook's reinvocationPolicy for one test.
func setPodWebhookReinvocation(t *testing.T, policy admissionregistrationv1.ReinvocationPolicyType) {
	t.Helper()
	patchPodWebhook(t, func(w *admissionregistrationv1.MutatingWebhook) { w.ReinvocationPolicy = &policy })
}

// patchPodWebhook changes the pod webhook's registration for one test, and restores it after.
func patchPodWebhook(t *testing.T, change func(*admissionregistrationv1.MutatingWebhook)) {
	t.Helper()
	var list admissionregistrationv1.MutatingWebhookConfigurationList
	must(t, k8s.List(ctx, &list))
	for i := range list.Items {
		cfg := &list.Items[i]
		for j := range cfg.Webhooks {
			if cfg.Webhooks[j].Name != "inject.sidecarset.io" {
				continue
			}
			var old *admissionregistrationv1.MutatingWebhook
			must(t, testutil.Edit(ctx, k8s, cfg, func(cur *admissionregistrationv1.MutatingWebhookConfiguration) {
				old = cur.Webhooks[j].DeepCopy()
				change(&cur.Webhooks[j])
			}))
			name, index := cfg.Name, j
			t.Cleanup(func() {
				cur := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}}
				must(t, testutil.Edit(ctx, k8s, cur, func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
					c.Webhooks[index] = *old
				}))
			})
			return
		}
	}
	t.Fatal("no mutating webhook named inject.sidecarset.io is registered")
}

// assertChainGaveEveryContainer checks the stored pod: every container and init container has
// the API token mounted once, the LimitRange's memory defaults, and imagePullPolicy Always.
func assertChainGaveEveryContainer(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	all := append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...)
	for _, c := range all {
		mounts := 0
		for _, m := range c.VolumeMounts {
			if m.MountPath == tokenPath {
				mounts++
			}
		}
		if mounts != 1 {
			t.Errorf("container %q mounts the service account token %d times, want 1: %v", c.Name, mounts, c.VolumeMounts)
		}
		if c.ImagePullPolicy != corev1.PullAlways {
			t.Errorf("container %q imagePullPolicy %s, want Always (AlwaysPullImages)", c.Name, c.ImagePullPolicy)
		}
		limit, request := c.Resources.Limits[corev1.ResourceMemory], c.Resources.Requests[corev1.ResourceMemory]
		if limit.String() != "128Mi" || request.String() != "64Mi" {
			t.Errorf("container %q memory request/limit %s/%s, want the LimitRange defaults 64Mi/128Mi", c.Name, request.String(), limit.String())
		}
	}
}

// exported is the pod as `kubectl get -o yaml` would give it, renamed, ready to be created again.
func exported(pod *corev1.Pod, name string) *corev1.Pod {
	out := pod.DeepCopy()
	out.ObjectMeta = metav1.ObjectMeta{Namespace: pod.Namespace, Name: name, Labels: pod.Labels, Annotations: pod.Annotations}
	out.Spec.NodeName = ""
	out.Status = corev1.PodStatus{}
	return out
}

// assertSameSpec compares two pods' containers, init containers and volumes by content.
func assertSameSpec(t *testing.T, want, got *corev1.Pod) {
	t.Helper()
	if w, g := jsonOf(t, want.Spec.Containers), jsonOf(t, got.Spec.Containers); w != g {
		t.Errorf("containers differ:\nwant %s\ngot  %s", w, g)
	}
	if w, g := jsonOf(t, want.Spec.InitContainers), jsonOf(t, got.Spec.InitContainers); w != g {
		t.Errorf("init containers differ:\nwant %s\ngot  %s", w, g)
	}
	if w, g := jsonOf(t, want.Spec.Volumes), jsonOf(t, got.Spec.Volumes); w != g {
		t.Errorf("volumes differ:\nwant %s\ngot  %s", w, g)
	}
	if w, g := want.Annotations[appsv1alpha1.StatusAnnotation], got.Annotations[appsv1alpha1.StatusAnnotation]; w != g {
		t.Errorf("status annotation %s, want %s", g, w)
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	must(t, err)
	return string(raw)
}

// assertWebhookCalls checks that the pod webhook answered want requests since before. The
// server counts a request once its answer is written, which can be just after the API server
// has used it, so the count is awaited before it is compared.
func assertWebhookCalls(t *testing.T, before float64, want int, what string) {
	t.Helper()
	var calls float64
	eventually(t, what, func() (bool, string) {
		calls = webhookRequests(t, ourwebhook.PodInjectorPath) - before
		return calls >= float64(want), fmt.Sprintf("%v calls", calls)
	})
	if calls != float64(want) {
		t.Errorf("%s: %v, want %d", what, calls, want)
	}
}

// TestLimitRangeRefusalNamesTheSet: a sidecar above the namespace's LimitRange maximum is
// refused by the webhook, naming the set, the sidecar's field and the LimitRange, where the API
// server's LimitRanger would name neither; the same set injects where no LimitRange bounds it.
func TestLimitRangeRefusalNamesTheSet(t *testing.T) {
	bounded := limitRangeNamespace(t) // memory at most 256Mi per container
	free := newNamespace(t, nil)
	set := chainSet("greedy", "greedy")
	set.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")}
	createSet(t, set)

	eventually(t, "the webhook to see the LimitRange", func() (bool, string) {
		err := k8s.Create(ctx, appPod(bounded, "greedy-0", "greedy", true))
		if err == nil {
			return false, "the pod was admitted"
		}
		return contains(err.Error(), `SidecarSet "greedy"`, "spec.containers[0].resources.limits[memory]", "LimitRange defaults of namespace "+bounded,
			"the maximum memory per container is 256Mi, the sidecar's limits are 512Mi"), err.Error()
	})
	pod := appPod(free, "greedy-1", "greedy", true)
	must(t, k8s.Create(ctx, pod))
	if got := getPod(t, pod); len(got.Spec.Containers) != 2 {
		t.Errorf("the pod in a namespace without a LimitRange was not injected: %v", containerNames(got.Spec.Containers))
	}
}

// TestPodLimitRangeRefusalNamesTheSet: a sidecar that takes the pod over its namespace's
// per-pod maximum is refused by the webhook naming the set and the sidecar's field.
func TestPodLimitRangeRefusalNamesTheSet(t *testing.T) {
	ns := newNamespace(t, nil)
	must(t, k8s.Create(ctx, &corev1.LimitRange{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "per-pod"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type: corev1.LimitTypePod, Max: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
		}}},
	}))
	set := chainSet("pod-greedy", "pod-greedy")
	set.Spec.InitContainers = nil
	set.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}
	createSet(t, set)
	pod := func(name, memory string) *corev1.Pod {
		p := appPod(ns, name, "pod-greedy", true)
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memory)}
		return p
	}
	eventually(t, "the webhook to see the LimitRange", func() (bool, string) {
		err := k8s.Create(ctx, pod("over", "448Mi"))
		if err == nil {
			return false, "the pod was admitted"
		}
		return contains(err.Error(), `SidecarSet "pod-greedy"`, "spec.containers[0].resources.limits[memory]", "LimitRange per-pod of namespace "+ns,
			"the maximum memory per pod is 512Mi"), err.Error()
	})
	fits := pod("fits", "256Mi")
	must(t, k8s.Create(ctx, fits))
	if got := getPod(t, fits); len(got.Spec.Containers) != 2 {
		t.Errorf("the pod that fits with its sidecar was not injected: %v", containerNames(got.Spec.Containers))
	}
}
