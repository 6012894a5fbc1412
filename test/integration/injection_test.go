package integration

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	ourwebhook "github.com/sidecarset/sidecarset-operator/internal/webhook"
	"github.com/sidecarset/sidecarset-operator/test/testutil"
)

func TestLabelledPodIsInjected(t *testing.T) {
	ns := newNamespace(t, nil)
	set := createSet(t, agentSet("inject-basic", "web"))

	pod := appPod(ns, "web-0", "web", true)
	must(t, k8s.Create(ctx, pod))

	var got corev1.Pod
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(pod), &got))
	if want := []string{"app", "inject-basic-agent"}; !slices.Equal(containerNames(got.Spec.Containers), want) {
		t.Errorf("containers = %v, want %v", containerNames(got.Spec.Containers), want)
	}
	if !slices.ContainsFunc(got.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "inject-basic-config" }) {
		t.Errorf("volume inject-basic-config not added: %v", got.Spec.Volumes)
	}
	recs, err := inject.ParseRecords(got.Annotations)
	must(t, err)
	rec, ok := recs["inject-basic"]
	if !ok || rec.Hash != inject.Hash(&set.Spec) || !slices.Equal(rec.Containers, []string{"inject-basic-agent"}) {
		t.Errorf("status annotation = %q, want a record of inject-basic with hash %s", got.Annotations[appsv1alpha1.StatusAnnotation], inject.Hash(&set.Spec))
	}
	if got.Annotations[appsv1alpha1.DefaultContainerAnnotation] != "app" {
		t.Errorf("default container = %q, want app", got.Annotations[appsv1alpha1.DefaultContainerAnnotation])
	}
}

func TestUnlabelledPodIsNeverSentToTheWebhook(t *testing.T) {
	ns := newNamespace(t, nil)
	createSet(t, agentSet("inject-unlabelled", "api"))

	before := webhookRequests(t, ourwebhook.PodInjectorPath)
	pod := appPod(ns, "api-0", "api", false)
	must(t, k8s.Create(ctx, pod))
	if after := webhookRequests(t, ourwebhook.PodInjectorPath); after != before {
		t.Errorf("the webhook answered %v requests for an unlabelled pod; the objectSelector must keep them away", after-before)
	}
	var got corev1.Pod
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(pod), &got))
	if len(got.Spec.Containers) != 1 || got.Annotations[appsv1alpha1.StatusAnnotation] != "" {
		t.Errorf("unlabelled pod was changed: containers %v, annotations %v", containerNames(got.Spec.Containers), got.Annotations)
	}

	// The same pod with the label does reach the webhook: the counter above can move.
	must(t, k8s.Create(ctx, appPod(ns, "api-1", "api", true)))
	if after := webhookRequests(t, ourwebhook.PodInjectorPath); after != before+1 {
		t.Errorf("webhook requests moved by %v for one labelled pod, want 1", after-before)
	}
}

func TestOwnAndSystemNamespacesAreNeverInjected(t *testing.T) {
	createSet(t, agentSet("inject-system", "sys"))
	for _, ns := range []string{operatorNamespace, metav1.NamespaceSystem} {
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		ensureDefaultServiceAccount(t, ns)
		pod := appPod(ns, "sys-0", "sys", true)
		must(t, k8s.Create(ctx, pod))
		t.Cleanup(func() { deleteIgnoreNotFound(t, pod) })
		var got corev1.Pod
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(pod), &got))
		if len(got.Spec.Containers) != 1 {
			t.Errorf("pod in %s was injected: %v", ns, containerNames(got.Spec.Containers))
		}
	}
}

func TestConflictingPodIsDeniedWithAClearMessage(t *testing.T) {
	ns := newNamespace(t, nil)
	createSet(t, agentSet("inject-conflict", "db"))

	pod := appPod(ns, "db-0", "db", true)
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "inject-conflict-agent", Image: "mine:1"})
	err := k8s.Create(ctx, pod)
	if err == nil {
		t.Fatal("pod with a container named like the sidecar was admitted")
	}
	if !apierrors.IsForbidden(err) || !contains(err.Error(), `SidecarSet "inject-conflict"`, "spec.containers[0].name",
		`"inject-conflict-agent"`, "different definition") {
		t.Errorf("denial does not name the SidecarSet, the field and the clash: %v", err)
	}
}

func TestNamespaceSelectorAndPause(t *testing.T) {
	meshNS := newNamespace(t, map[string]string{"mesh": "enabled"})
	plainNS := newNamespace(t, nil)
	set := agentSet("inject-mesh", "shop")
	set.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"mesh": "enabled"}}
	createSet(t, set)

	in, out := appPod(meshNS, "shop-0", "shop", true), appPod(plainNS, "shop-0", "shop", true)
	must(t, k8s.Create(ctx, in))
	must(t, k8s.Create(ctx, out))
	if n := len(getPod(t, in).Spec.Containers); n != 2 {
		t.Errorf("pod in a matching namespace has %d containers, want 2", n)
	}
	if n := len(getPod(t, out).Spec.Containers); n != 1 {
		t.Errorf("pod in a non-matching namespace has %d containers, want 1", n)
	}

	must(t, testutil.Edit(ctx, k8s, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.InjectionStrategy.Paused = true }))
	waitForSet(t, set)
	paused := appPod(meshNS, "shop-1", "shop", true)
	must(t, k8s.Create(ctx, paused))
	if n := len(getPod(t, paused).Spec.Containers); n != 1 {
		t.Errorf("pod created while the set is paused has %d containers, want 1", n)
	}
}

func TestReappliedExportedPodIsInjectedOnce(t *testing.T) {
	ns := newNamespace(t, nil)
	createSet(t, agentSet("inject-export", "cache"))
	first := appPod(ns, "cache-0", "cache", true)
	must(t, k8s.Create(ctx, first))
	exported := getPod(t, first)

	// Re-create the pod from its exported form, as `kubectl get -o yaml | kubectl apply` would.
	again := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache-1", Labels: exported.Labels,
		Annotations: exported.Annotations}, Spec: exported.Spec}
	again.Spec.NodeName = ""
	must(t, k8s.Create(ctx, again))
	got := getPod(t, again)
	if !slices.Equal(containerNames(got.Spec.Containers), containerNames(exported.Spec.Containers)) {
		t.Errorf("re-applied pod containers = %v, want %v", containerNames(got.Spec.Containers), containerNames(exported.Spec.Containers))
	}
	var a, b inject.Records
	must(t, json.Unmarshal([]byte(got.Annotations[appsv1alpha1.StatusAnnotation]), &a))
	must(t, json.Unmarshal([]byte(exported.Annotations[appsv1alpha1.StatusAnnotation]), &b))
	if a["inject-export"].Hash != b["inject-export"].Hash {
		t.Errorf("records differ: %v vs %v", a, b)
	}
}

func getPod(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	var got corev1.Pod
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(pod), &got))
	return &got
}

// waitForSet waits until the webhook's view holds the set's current generation and the
// reconciler has written status for it.
func waitForSet(t *testing.T, set *appsv1alpha1.SidecarSet) {
	t.Helper()
	eventually(t, "SidecarSet "+set.Name+" to be observed", func() (bool, string) {
		var got appsv1alpha1.SidecarSet
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(set), &got); err != nil {
			return false, err.Error()
		}
		// Valid: a set stopped by a conflict is observed too, it only injects nothing.
		valid := op.Sets.Load().Valid
		i := slices.IndexFunc(valid, func(c *inject.CompiledSet) bool { return c.Name() == set.Name })
		if i < 0 || valid[i].Set.Generation != got.Generation {
			return false, "not yet in the webhook's snapshot"
		}
		return got.Status.ObservedGeneration == got.Generation, fmt.Sprintf("status.observedGeneration %d, generation %d",
			got.Status.ObservedGeneration, got.Generation)
	})
}
