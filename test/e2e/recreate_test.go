//go:build e2e

package e2e

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/test/testutil"
)

// TestRecreateByEviction: an env change (which no running pod can take in place) reaches the
// pods of a Deployment and a StatefulSet by eviction, their controllers (kube-controller-manager)
// recreating them with the new sidecar, never more than maxUnavailable unavailable at once; a
// Deployment whose PodDisruptionBudget allows no disruption is held back and the condition says
// so; a bare pod is left as it was.
func TestRecreateByEviction(t *testing.T) {
	ns := newNamespace(t, "recreate", nil)
	set := &appsv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-recreate"},
		Spec: appsv1alpha1.SidecarSetSpec{
			Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn,
				Values: []string{"rec-web", "rec-db", "rec-guarded", "rec-bare"}}}},
			Containers: []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "agent", Image: "registry.example/agent:1.0"}}},
			UpdateStrategy: appsv1alpha1.UpdateStrategy{Type: appsv1alpha1.RollingUpdate, Recreate: appsv1alpha1.RecreateEvict,
				MaxUnavailable: ptr.To(intstr.FromInt32(2))},
		},
	}
	createSet(t, set)
	newDeployment(t, ns, "rec-web", 3)
	newDeployment(t, ns, "rec-guarded", 2)
	must(t, k8s.Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rec-guarded"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "rec-guarded"}}}}))
	labels := map[string]string{"app": "rec-db", appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue}
	must(t, k8s.Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rec-db"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "rec-db"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: podSpec()}}}))
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rec-bare",
		Labels: map[string]string{"app": "rec-bare", appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue}}, Spec: podSpec()}
	must(t, k8s.Create(ctx, bare))
	waitForCounts(t, set, counts{8, 8, 8, 8}, converge)
	bareUID := bare.UID

	highest := watchCapacity(t, ns, map[string]int32{"rec-web": 3, "rec-db": 2, "rec-guarded": 2, "rec-bare": 1})
	start := time.Now()
	editSet(t, set, func(s *appsv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "LEVEL", Value: "debug"}}
	})
	must(t, k8s.Get(ctx, types.NamespacedName{Name: set.Name}, set))
	newHash := inject.Hash(&set.Spec)
	carries := func(app string) (int, int) {
		pods, n := podsOf(t, ns, app), 0
		for i := range pods {
			if injectedHash(&pods[i], set.Name) == newHash && pods[i].DeletionTimestamp == nil {
				n++
			}
		}
		return n, len(pods)
	}
	eventually(t, 3*converge, "the Deployment's and the StatefulSet's pods to be recreated with the new sidecar", func() (bool, string) {
		web, webAll := carries("rec-web")
		db, dbAll := carries("rec-db")
		return web == 3 && webAll == 3 && db == 2 && dbAll == 2, fmt.Sprintf("rec-web %d of %d, rec-db %d of %d", web, webAll, db, dbAll)
	})
	t.Logf("5 pods of a Deployment and a StatefulSet recreated in %s (one pod per workload at a time); at most %d pods of capacity missing",
		time.Since(start).Round(time.Second), highest())
	waitForRollout(t, set, "Progressing", "wait for their PodDisruptionBudget to allow an eviction")
	if guarded, _ := carries("rec-guarded"); guarded != 0 {
		t.Errorf("%d pods the PodDisruptionBudget protects were recreated", guarded)
	}
	var now corev1.Pod
	must(t, k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "rec-bare"}, &now))
	if now.UID != bareUID || injectedHash(&now, set.Name) == newHash {
		t.Errorf("the bare pod was touched: uid %s (was %s), hash %s", now.UID, bareUID, injectedHash(&now, set.Name))
	}
	if got := highest(); got > 2 {
		t.Errorf("at most %d pods of the workloads' capacity were missing at once, want at most 2 (maxUnavailable 2)", got)
	}
}

// TestRemediationAfterOutage: with the pod webhook's failurePolicy Ignore, pods created while
// every operator replica is down get no sidecar. Once the operator is back, a set with
// `remediate: Evict` counts them (status.notInjectedPods) and recreates them by eviction, their
// ReplicaSet making injected replacements, never more than maxUnavailable of the Deployment's
// capacity missing at once.
func TestRemediationAfterOutage(t *testing.T) {
	ns := newNamespace(t, "remedy", nil)
	set := &appsv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-remedy"},
		Spec: appsv1alpha1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "remedy"}},
			Containers: []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "agent", Image: "registry.example/agent:1.0"}}},
			UpdateStrategy: appsv1alpha1.UpdateStrategy{Type: appsv1alpha1.RollingUpdate, Remediate: appsv1alpha1.RecreateEvict,
				MaxUnavailable: ptr.To(intstr.FromInt32(1))},
		},
	}
	createSet(t, set)

	cfg, j := podWebhook(t)
	var was *admissionregistrationv1.FailurePolicyType
	must(t, testutil.Edit(ctx, k8s, cfg, func(cur *admissionregistrationv1.MutatingWebhookConfiguration) {
		was = cur.Webhooks[j].FailurePolicy
		cur.Webhooks[j].FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
	}))
	t.Cleanup(func() {
		must(t, testutil.Edit(ctx, k8s, cfg, func(cur *admissionregistrationv1.MutatingWebhookConfiguration) { cur.Webhooks[j].FailurePolicy = was }))
	})
	stopOperator(t, "operator-0", "TERM")
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			must(t, startOperator("operator-0"))
		}
	})
	newDeployment(t, ns, "remedy", 3)
	eventually(t, converge, "3 pods created without the sidecar while the operator is down", func() (bool, string) {
		pods, bare := podsOf(t, ns, "remedy"), 0
		for i := range pods {
			if !hasContainer(&pods[i], "agent") && testutil.PodAvailable(&pods[i]) {
				bare++
			}
		}
		return bare == 3 && len(pods) == 3, fmt.Sprintf("%d of %d pods ready without the sidecar", bare, len(pods))
	})

	highest := watchCapacity(t, ns, map[string]int32{"remedy": 3})
	start := time.Now()
	must(t, startOperator("operator-0"))
	restarted = true
	eventually(t, 3*converge, "the pods to be recreated with the sidecar", func() (bool, string) {
		pods, injected := podsOf(t, ns, "remedy"), 0
		for i := range pods {
			if hasContainer(&pods[i], "agent") && injectedHash(&pods[i], set.Name) != "" {
				injected++
			}
		}
		return injected == 3 && len(pods) == 3, fmt.Sprintf("%d of %d pods injected", injected, len(pods))
	})
	waitForCounts(t, set, counts{3, 3, 3, 3}, converge)
	var got appsv1alpha1.SidecarSet
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), &got))
	if got.Status.NotInjectedPods != 0 {
		t.Errorf("status.notInjectedPods %d after remediation, want 0", got.Status.NotInjectedPods)
	}
	t.Logf("3 pods created during the outage recreated with the sidecar %s after the restart; at most %d of the Deployment's 3 missing",
		time.Since(start).Round(time.Second), highest())
	if h := highest(); h > 1 {
		t.Errorf("at most %d of the Deployment's pods were missing at once, want at most 1 (maxUnavailable 1)", h)
	}
}

// watchCapacity keeps, while the test runs, the highest number of pods of the given apps (label
// app, with their replicas) missing from their capacity at once: what eviction costs a workload is
// its available pods short of its replicas (the evicted pod and its replacement are one pod of it
// missing, not two). It returns a reader of that number.
func watchCapacity(t testing.TB, ns string, replicas map[string]int32) func() int32 {
	t.Helper()
	return watchCapacityOf(t, []client.ListOption{client.InNamespace(ns)}, func(p *corev1.Pod) string { return p.Labels["app"] }, replicas)
}

// watchCapacityOf keeps, while the test runs, the highest number of pods missing at once from
// the capacity of groups of pods: the pods list lists, key names a pod's group, and capacity
// holds each group's replicas. A group is short of its replicas by the pods of it that are not
// available. It returns a reader of that number.
func watchCapacityOf(t testing.TB, list []client.ListOption, key func(*corev1.Pod) string, capacity map[string]int32) func() int32 {
	t.Helper()
	var highest atomic.Int32
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			var pods corev1.PodList
			if err := k8s.List(ctx, &pods, list...); err != nil {
				continue
			}
			ready := map[string]int32{}
			for i := range pods.Items {
				if testutil.PodAvailable(&pods.Items[i]) {
					ready[key(&pods.Items[i])]++
				}
			}
			var missing int32
			for group, n := range capacity {
				missing += max(0, n-ready[group])
			}
			if missing > highest.Load() {
				highest.Store(missing)
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return highest.Load
}
