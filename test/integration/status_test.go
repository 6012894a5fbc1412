package integration

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/test/testutil"
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
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	must(t, testutil.EditStatus(ctx, k8s, pod.DeepCopy(), func(got *corev1.Pod) {
		got.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
	}))
}

func TestStatusCountsFollowPods(t *testing.T) {
	ns := newNamespace(t, nil)
	set := createSet(t, agentSet("status-counts", "orders"))
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
	// The leader exports the same numbers per set, and Ready.
	for state, want := range map[string]float64{"matched": 3, "updated": 3, "ready": 1, "updated_ready": 1, "unavailable": 2, "excluded": 0} {
		if got := metricSum(t, "sidecarset_pods", "sidecarset", set.Name, "state", state); got != want {
			t.Errorf("sidecarset_pods{sidecarset=%q,state=%q} = %v, want %v", set.Name, state, got, want)
		}
	}
	if got := metricSum(t, "sidecarset_ready", "sidecarset", set.Name); got != 1 {
		t.Errorf("sidecarset_ready{sidecarset=%q} = %v, want 1", set.Name, got)
	}
	if got := metricSum(t, "sidecarset_pod_decisions_total", "sidecarset", set.Name, "result", "injected"); got != 3 {
		t.Errorf("sidecarset_pod_decisions_total{sidecarset=%q,result=injected} = %v, want 3", set.Name, got)
	}

	must(t, k8s.Delete(ctx, pods[2]))
	waitForCounts(t, set, counts{matched: 2, updated: 2, ready: 1, updatedReady: 1})

	// A spec change gives a new hash: existing pods are no longer updated, new ones are.
	var oldHash string
	must(t, testutil.Edit(ctx, k8s, set, func(s *appsv1alpha1.SidecarSet) {
		oldHash = inject.Hash(&s.Spec)
		s.Spec.Containers[0].Image = "registry.example/agent:1.1"
	}))
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
	must(t, testutil.Edit(ctx, k8s, pods[0].DeepCopy(), func(p *corev1.Pod) { p.Labels["app"] = "elsewhere" }))
	waitForCounts(t, set, counts{matched: 2, updated: 1, ready: 1, updatedReady: 1})
}

func TestStatusFollowsNamespaceLabels(t *testing.T) {
	ns := newNamespace(t, nil)
	set := agentSet("status-ns", "search")
	set.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}
	createSet(t, set)

	// Injected while the namespace matched, then the namespace stops matching.
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	must(t, testutil.Edit(ctx, k8s, nsObj, func(n *corev1.Namespace) { n.Labels["tier"] = "gold" }))
	eventually(t, "namespace label to reach the cache", func() (bool, string) {
		pod := appPod(ns, fmt.Sprintf("search-%d", len(nsObj.Name)), "search", true)
		pod.GenerateName, pod.Name = "search-", ""
		must(t, k8s.Create(ctx, pod))
		return len(getPod(t, pod).Spec.Containers) == 2, "pod not injected yet"
	})
	waitForCounts(t, set, counts{matched: 1, updated: 1})

	must(t, testutil.Edit(ctx, k8s, nsObj, func(n *corev1.Namespace) { delete(n.Labels, "tier") }))
	waitForCounts(t, set, counts{})
}

// TestStatusIsNotRewrittenWhenNothingChanged: a reconcile that finds nothing new writes
// nothing. Every write is an event that reconciles the set again, so a status field that
// differs from one computation to the next (the Invalid message used to come from a map walk)
// makes the operator rewrite status forever. Each round triggers reconciles of both sets (a
// label on the set, a label on a namespace), waits until the controller is idle, and checks
// that the sets' resourceVersions did not move.
func TestStatusIsNotRewrittenWhenNothingChanged(t *testing.T) {
	ns := newNamespace(t, nil)
	valid := createSet(t, agentSet("steady-valid", "steady"))
	must(t, k8s.Create(ctx, appPod(ns, "steady-0", "steady", true)))
	waitForCounts(t, valid, counts{matched: 1, updated: 1})

	invalid := agentSet("steady-invalid", "steady-other")
	invalid.Spec.Selector.MatchLabels = map[string]string{"a/b/c": "x", "-bad": "y", "ok": "not valid!", "z z": "w"}
	withoutSidecarSetValidation(t, func() {
		eventually(t, "the API server to store "+invalid.Name+" without validating it", func() (bool, string) {
			err := k8s.Create(ctx, invalid)
			return err == nil, fmt.Sprint(err)
		})
	})
	t.Cleanup(func() { deleteIgnoreNotFound(t, invalid) })
	eventually(t, invalid.Name+" to be marked Invalid", func() (bool, string) {
		var got appsv1alpha1.SidecarSet
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(invalid), &got))
		c := meta.FindStatusCondition(got.Status.Conditions, appsv1alpha1.ConditionInvalid)
		return c != nil && contains(c.Message, `"a/b/c"`, `"-bad"`, `"z z"`), fmt.Sprintf("%+v", c)
	})

	for round := range 5 {
		reconciles := metricSum(t, "controller_runtime_reconcile_total", "controller", "sidecarset")
		rvs := map[string]string{}
		for _, set := range []*appsv1alpha1.SidecarSet{valid, invalid} {
			patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"labels":{"round":"%d"}}}`, round))
			var got appsv1alpha1.SidecarSet
			got.Name = set.Name
			must(t, k8s.Patch(ctx, &got, patch))
			rvs[set.Name] = got.ResourceVersion
		}
		nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
		must(t, testutil.Edit(ctx, k8s, nsObj, func(n *corev1.Namespace) { n.Labels["round"] = fmt.Sprint(round) }))
		waitUntilReconcilerIdle(t, rvs, reconciles+2)
		for name, rv := range rvs {
			var got appsv1alpha1.SidecarSet
			must(t, k8s.Get(ctx, client.ObjectKey{Name: name}, &got))
			if got.ResourceVersion != rv {
				t.Errorf("round %d: SidecarSet %s was written after its reconcile found nothing new (resourceVersion %s -> %s); status now %+v",
					round, name, rv, got.ResourceVersion, got.Status)
			}
		}
	}
}

// waitUntilReconcilerIdle waits until the operator's cache holds the sets at the given
// resourceVersions, the SidecarSet controller has finished at least minReconciles reconciles
// in all, and its queue stays empty with no reconcile in flight for three polls in a row (an
// event reaches the cache a moment before the controller queues it).
func waitUntilReconcilerIdle(t *testing.T, rvs map[string]string, minReconciles float64) {
	t.Helper()
	idle := 0
	eventually(t, "the SidecarSet controller to be idle", func() (bool, string) {
		for name, rv := range rvs {
			var cached appsv1alpha1.SidecarSet
			if err := op.Cache.Get(ctx, client.ObjectKey{Name: name}, &cached); err != nil || cached.ResourceVersion != rv {
				return false, fmt.Sprintf("cache has %s at %q, want %s (%v); a later version means the operator wrote it again", name, cached.ResourceVersion, rv, err)
			}
		}
		depth := metricSum(t, "workqueue_depth", "controller", "sidecarset")
		active := metricSum(t, "controller_runtime_active_workers", "controller", "sidecarset")
		done := metricSum(t, "controller_runtime_reconcile_total", "controller", "sidecarset")
		if depth != 0 || active != 0 || done < minReconciles {
			idle = 0
		} else {
			idle++
		}
		return idle >= 3, fmt.Sprintf("queue depth %v, active workers %v, %v of %v reconciles", depth, active, done, minReconciles)
	})
}

// TestStatusCountsExcludedPods: pods the webhook never serves (a namespace labelled
// sidecarset.io/injection=disabled, kube-system) are not matched, and status says how many
// there are; once the namespace opts back in, its pods count as matched (not yet injected).
func TestStatusCountsExcludedPods(t *testing.T) {
	ns := newNamespace(t, map[string]string{appsv1alpha1.NamespaceInjectionLabel: appsv1alpha1.NamespaceInjectionDisabled})
	set := createSet(t, agentSet("status-excluded", "ledger"))
	pod := appPod(ns, "ledger-0", "ledger", true)
	must(t, k8s.Create(ctx, pod))
	if got := getPod(t, pod); len(got.Spec.Containers) != 1 {
		t.Fatalf("a pod in a namespace that opted out was injected: %v", containerNames(got.Spec.Containers))
	}
	system := appPod(metav1.NamespaceSystem, "ledger-system", "ledger", true)
	ensureDefaultServiceAccount(t, metav1.NamespaceSystem)
	must(t, k8s.Create(ctx, system))
	t.Cleanup(func() { deleteIgnoreNotFound(t, system) })

	waitForExcluded := func(matched, excluded int32) {
		t.Helper()
		eventually(t, fmt.Sprintf("matched %d, excluded %d", matched, excluded), func() (bool, string) {
			var got appsv1alpha1.SidecarSet
			must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), &got))
			return got.Status.MatchedPods == matched && got.Status.ExcludedPods == excluded,
				fmt.Sprintf("matched %d, excluded %d", got.Status.MatchedPods, got.Status.ExcludedPods)
		})
	}
	waitForExcluded(0, 2)
	waitForSetEvent(t, set, "PodsExcluded", "pods the SidecarSet selects are in namespaces that are never injected")
	var got appsv1alpha1.SidecarSet
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), &got))
	if c := meta.FindStatusCondition(got.Status.Conditions, appsv1alpha1.ConditionPodsUpdated); c == nil ||
		!contains(c.Message, "2 selected pods are in such excluded namespaces") {
		t.Errorf("PodsUpdated should say why nothing matches, got %+v", c)
	}

	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	must(t, testutil.Edit(ctx, k8s, nsObj, func(n *corev1.Namespace) { delete(n.Labels, appsv1alpha1.NamespaceInjectionLabel) }))
	waitForExcluded(1, 1)
	waitForCounts(t, set, counts{matched: 1})
}

// TestMetricsOfDeletedSetsGo: a deleted SidecarSet's gauges are dropped, not left at their
// last values.
func TestMetricsOfDeletedSetsGo(t *testing.T) {
	set := createSet(t, agentSet("metrics-gone", "metrics-gone"))
	eventually(t, "the set's Ready gauge", func() (bool, string) {
		got := metricSum(t, "sidecarset_ready", "sidecarset", set.Name)
		return got == 1, fmt.Sprint(got)
	})
	must(t, k8s.Delete(ctx, set))
	eventually(t, "the set's gauges to be dropped", func() (bool, string) {
		families, err := metrics.Registry.Gather()
		must(t, err)
		var left []string
		for _, f := range families {
			for _, m := range f.GetMetric() {
				if (f.GetName() == "sidecarset_ready" || f.GetName() == "sidecarset_pods") && labelValue(m, "sidecarset") == set.Name {
					left = append(left, f.GetName())
				}
			}
		}
		return len(left) == 0, fmt.Sprint(left)
	})
}
