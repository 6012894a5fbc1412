package integration

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

type counts struct{ matched, updated, ready, updatedReady int32 }

func waitForCounts(t *testing.T, set *appsv1alpha1.SidecarSet, want counts) *appsv1alpha1.SidecarSet {
	t.Helper()
	var got appsv1alpha1.SidecarSet
	eventually(t, fmt.Sprintf("status of %s to be %+v", set.Name, want), func() (bool, string) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(set), &got); err != nil {
			return false, err.Error()
		}
		st := got.Status
		have := counts{st.MatchedPods, st.UpdatedPods, st.ReadyPods, st.UpdatedReadyPods}
		return have == want && st.ObservedGeneration == got.Generation, fmt.Sprintf("%+v at observedGeneration %d/%d",
			have, st.ObservedGeneration, got.Generation)
	})
	return &got
}

// setReady sets a Pod's Ready condition through the status subresource, as a kubelet would.
func setReady(t *testing.T, pod *corev1.Pod, ready bool) {
	t.Helper()
	got := getPod(t, pod)
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	got.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
	must(t, k8s.Status().Update(ctx, got))
}

func TestStatusCountsFollowPods(t *testing.T) {
	ns := newNamespace(t, nil)
	set := createSet(t, sidecarSet("status-counts", "orders"))
	waitForSet(t, set)
	st := waitForCounts(t, set, counts{})
	if c := meta.FindStatusCondition(st.Status.Conditions, appsv1alpha1.ConditionPodsUpdated); c == nil || c.Reason != "NoMatchedPods" ||
		!contains(c.Message, appsv1alpha1.InjectLabel, "app=orders") {
		t.Errorf("PodsUpdated condition should explain why nothing matches, got %+v", c)
	}

	pods := []*corev1.Pod{appPod(ns, "orders-0", "orders", true), appPod(ns, "orders-1", "orders", true), appPod(ns, "orders-2", "orders", true)}
	for _, p := range pods {
		must(t, k8s.Create(ctx, p))
	}
	// Pods that are not opted in, or not selected, never count.
	must(t, k8s.Create(ctx, appPod(ns, "orders-plain", "orders", false)))
	must(t, k8s.Create(ctx, appPod(ns, "billing-0", "billing", true)))
	waitForCounts(t, set, counts{matched: 3, updated: 3})

	setReady(t, pods[0], true)
	setReady(t, pods[1], true)
	waitForCounts(t, set, counts{matched: 3, updated: 3, ready: 2, updatedReady: 2})

	setReady(t, pods[1], false)
	waitForCounts(t, set, counts{matched: 3, updated: 3, ready: 1, updatedReady: 1})

	must(t, k8s.Delete(ctx, pods[2]))
	waitForCounts(t, set, counts{matched: 2, updated: 2, ready: 1, updatedReady: 1})

	// A spec change gives a new hash: existing pods are no longer updated, new ones are.
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), set))
	oldHash := inject.Hash(&set.Spec)
	set.Spec.Containers[0].Image = "registry.example/agent:1.1"
	must(t, k8s.Update(ctx, set))
	st = waitForCounts(t, set, counts{matched: 2, updated: 0, ready: 1, updatedReady: 0})
	if st.Status.Hash == oldHash || st.Status.Hash != inject.Hash(&set.Spec) {
		t.Errorf("status.hash = %s, want the new hash %s (old %s)", st.Status.Hash, inject.Hash(&set.Spec), oldHash)
	}
	if c := meta.FindStatusCondition(st.Status.Conditions, appsv1alpha1.ConditionPodsUpdated); c == nil || c.Status != metav1.ConditionFalse ||
		c.ObservedGeneration != st.Generation {
		t.Errorf("PodsUpdated condition = %+v, want False at generation %d", c, st.Generation)
	}
	waitForSet(t, set)
	fresh := appPod(ns, "orders-3", "orders", true)
	must(t, k8s.Create(ctx, fresh))
	setReady(t, fresh, true)
	waitForCounts(t, set, counts{matched: 3, updated: 1, ready: 2, updatedReady: 1})

	// A label change that stops matching takes the pod out of the counts.
	p := getPod(t, pods[0])
	p.Labels["app"] = "elsewhere"
	must(t, k8s.Update(ctx, p))
	waitForCounts(t, set, counts{matched: 2, updated: 1, ready: 1, updatedReady: 1})
}

func TestStatusFollowsNamespaceLabels(t *testing.T) {
	ns := newNamespace(t, nil)
	set := sidecarSet("status-ns", "search")
	set.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}
	waitForSet(t, createSet(t, set))

	// Injected while the namespace matched, then the namespace stops matching.
	var nsObj corev1.Namespace
	must(t, k8s.Get(ctx, client.ObjectKey{Name: ns}, &nsObj))
	nsObj.Labels["tier"] = "gold"
	must(t, k8s.Update(ctx, &nsObj))
	eventually(t, "namespace label to reach the cache", func() (bool, string) {
		pod := appPod(ns, fmt.Sprintf("search-%d", len(nsObj.Name)), "search", true)
		pod.GenerateName, pod.Name = "search-", ""
		must(t, k8s.Create(ctx, pod))
		return len(getPod(t, pod).Spec.Containers) == 2, "pod not injected yet"
	})
	waitForCounts(t, set, counts{matched: 1, updated: 1})

	must(t, k8s.Get(ctx, client.ObjectKey{Name: ns}, &nsObj))
	delete(nsObj.Labels, "tier")
	must(t, k8s.Update(ctx, &nsObj))
	waitForCounts(t, set, counts{})
}
