package testutil

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// Cluster is the steps end-to-end tests take on a cluster where the operator runs: namespaces,
// SidecarSets and their rollouts, each wait bounded by Converge.
type Cluster struct {
	Ctx    context.Context
	Client client.Client
	// Converge bounds each wait for the operator (or the kubelet).
	Converge time.Duration
}

func (c Cluster) eventually(t testing.TB, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	return Eventually(t, c.Converge, 200*time.Millisecond, what, cond)
}

// NewNamespace creates a namespace (deleted after the test) and waits for its default
// ServiceAccount, without which pods are not admitted.
func (c Cluster) NewNamespace(t testing.TB, prefix string, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: labels}}
	Must(t, c.Client.Create(c.Ctx, ns))
	t.Cleanup(func() { DeleteIgnoreNotFound(c.Ctx, t, c.Client, ns) })
	t.Cleanup(func() { c.logWarnings(t, ns.Name) })
	c.eventually(t, "the default ServiceAccount of "+ns.Name, func() (bool, string) {
		err := c.Client.Get(c.Ctx, client.ObjectKey{Namespace: ns.Name, Name: "default"}, &corev1.ServiceAccount{})
		return err == nil, fmt.Sprint(err)
	})
	return ns.Name
}

// CreateSet creates a SidecarSet, deletes it after the test, and waits until the operator has
// observed it (status.observedGeneration): a pod created earlier would not get its sidecars,
// the webhook's informers not having delivered the set yet, as in any cluster.
func (c Cluster) CreateSet(t testing.TB, set *appsv1alpha1.SidecarSet) *appsv1alpha1.SidecarSet {
	t.Helper()
	Must(t, c.Client.Create(c.Ctx, set))
	t.Cleanup(func() { DeleteIgnoreNotFound(c.Ctx, t, c.Client, set) })
	c.eventually(t, set.Name+" to be observed", func() (bool, string) {
		var got appsv1alpha1.SidecarSet
		if err := c.Client.Get(c.Ctx, client.ObjectKeyFromObject(set), &got); err != nil {
			return false, err.Error()
		}
		return got.Status.ObservedGeneration == got.Generation, fmt.Sprintf("observedGeneration %d of %d", got.Status.ObservedGeneration, got.Generation)
	})
	return set
}

// EditSet applies edit to the SidecarSet as it is now (Edit: the operator writes the set's
// status meanwhile, a conflict reads it again); any other error is tried again until Converge.
func (c Cluster) EditSet(t testing.TB, set *appsv1alpha1.SidecarSet, edit func(*appsv1alpha1.SidecarSet)) {
	t.Helper()
	c.eventually(t, "the SidecarSet to be updated", func() (bool, string) {
		cur := &appsv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: set.Name}}
		err := Edit(c.Ctx, c.Client, cur, edit)
		return err == nil, fmt.Sprint(err)
	})
}

// WaitForRollout waits until the set's RollingUpdate condition, for its current generation,
// has the reason and a message holding every text; it returns how long that took.
func (c Cluster) WaitForRollout(t testing.TB, set *appsv1alpha1.SidecarSet, reason string, text ...string) time.Duration {
	t.Helper()
	return c.eventually(t, fmt.Sprintf("%s's RollingUpdate condition %s %q", set.Name, reason, text), func() (bool, string) {
		var cur appsv1alpha1.SidecarSet
		if err := c.Client.Get(c.Ctx, client.ObjectKeyFromObject(set), &cur); err != nil {
			return false, err.Error()
		}
		cond := meta.FindStatusCondition(cur.Status.Conditions, appsv1alpha1.ConditionRollingUpdate)
		if cond == nil || cur.Status.ObservedGeneration != cur.Generation {
			return false, fmt.Sprintf("%+v", cur.Status)
		}
		ok := cond.Reason == reason
		for _, s := range text {
			ok = ok && strings.Contains(cond.Message, s)
		}
		return ok, cond.Reason + ": " + cond.Message
	})
}

// PodsOf lists the live pods (not being deleted) labelled app=<app> in a namespace.
func (c Cluster) PodsOf(t testing.TB, ns, app string) []corev1.Pod {
	t.Helper()
	var list corev1.PodList
	Must(t, c.Client.List(c.Ctx, &list, client.InNamespace(ns), client.MatchingLabels{"app": app}))
	var live []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	return live
}

// logWarnings logs the namespace's Warning events when the test failed: why the operator
// (or the kubelet) did not do what the test waited for, while the namespace is still there.
func (c Cluster) logWarnings(t testing.TB, ns string) {
	t.Helper()
	if !t.Failed() {
		return
	}
	var list corev1.EventList
	if err := c.Client.List(c.Ctx, &list, client.InNamespace(ns)); err != nil {
		t.Logf("listing the events of %s: %v", ns, err)
		return
	}
	for _, e := range list.Items {
		if e.Type == corev1.EventTypeWarning {
			t.Logf("event in %s: %s %s/%s (%d times): %s", ns, e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Count, e.Message)
		}
	}
}
