package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// TestRollingUpdateByPriority: with maxUnavailable 1, the pods get the set's new hash one after
// the other in the order of their priority (the sum of the weights of the terms matching their
// labels), not in the order of their names; a watch on the pods sees the order the API server
// stored the updates in.
func TestRollingUpdateByPriority(t *testing.T) {
	ns := newNamespace(t, nil)
	startFakeKubelet(t, ns, 200*time.Millisecond)
	set := rollingSet("prio", "prio")
	set.Spec.UpdateStrategy.PriorityStrategy = &appsv1alpha1.UpdatePriorityStrategy{WeightPriority: []appsv1alpha1.UpdatePriorityWeightTerm{
		{Weight: 60, MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": "canary"}}},
		{Weight: 30, MatchSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "zone", Operator: metav1.LabelSelectorOpIn, Values: []string{"a"}}}}},
	}}
	createSet(t, set)
	// Priorities: prio-0 30, prio-1 60, prio-2 90, prio-3 0.
	for i, labels := range []map[string]string{{"zone": "a"}, {"tier": "canary"}, {"tier": "canary", "zone": "a"}, {}} {
		pod := appPod(ns, fmt.Sprintf("prio-%d", i), "prio", true)
		for k, v := range labels {
			pod.Labels[k] = v
		}
		must(t, k8s.Create(ctx, pod))
	}
	waitForCounts(t, set, counts{4, 4, 4, 4})
	var injected corev1.Pod
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "prio-0"}, &injected))
	old, _ := inject.InjectedHash(injected.Annotations, set.Name)

	order := watchHashChanges(t, ns, set.Name, old, 4)
	setImages(t, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "registry.example/agent:2.0" })
	rollingCondition(t, set, "Complete", "4 of 4 matched pods carry hash")
	if got, want := order(), []string{"prio-2", "prio-1", "prio-0", "prio-3"}; !slices.Equal(got, want) {
		t.Errorf("the pods got the new hash in the order %v, want %v (highest priority first)", got, want)
	}
}

// watchHashChanges watches ns's pods and returns a function that waits until n of them
// record, for set, another hash than old, and returns their names in the order the API server
// stored the change.
func watchHashChanges(t *testing.T, ns, set, old string, n int) func() []string {
	t.Helper()
	wc, err := client.NewWithWatch(adminConfig, client.Options{Scheme: k8s.Scheme()})
	must(t, err)
	watchCtx, cancel := context.WithTimeout(ctx, time.Minute)
	t.Cleanup(cancel)
	w, err := wc.Watch(watchCtx, &corev1.PodList{}, client.InNamespace(ns))
	must(t, err)
	t.Cleanup(w.Stop)
	done := make(chan []string, 1)
	go func() {
		var order []string
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type != watch.Modified || slices.Contains(order, pod.Name) {
				continue
			}
			if hash, _ := inject.InjectedHash(pod.Annotations, set); hash != old {
				if order = append(order, pod.Name); len(order) == n {
					break
				}
			}
		}
		done <- order
	}()
	return func() []string {
		t.Helper()
		select {
		case order := <-done:
			return order
		case <-watchCtx.Done():
			t.Fatalf("no %d pods seen with a new hash within a minute", n)
			return nil
		}
	}
}
