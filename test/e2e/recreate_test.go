//go:build e2e

package e2e

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

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

	// What eviction costs a workload is capacity: its ready pods short of its replicas (the
	// evicted pod and its replacement are one pod of it missing, not two).
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
			if err := k8s.List(ctx, &pods, client.InNamespace(ns)); err != nil {
				continue
			}
			ready := map[string]int32{}
			for i := range pods.Items {
				if testutil.PodAvailable(&pods.Items[i]) {
					ready[pods.Items[i].Labels["app"]]++
				}
			}
			missing := max(0, 3-ready["rec-web"]) + max(0, 2-ready["rec-db"]) + max(0, 2-ready["rec-guarded"]) + max(0, 1-ready["rec-bare"])
			if missing > highest.Load() {
				highest.Store(missing)
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
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
		time.Since(start).Round(time.Second), highest.Load())
	waitForRollout(t, set, "Progressing", "wait for their PodDisruptionBudget to allow an eviction")
	if guarded, _ := carries("rec-guarded"); guarded != 0 {
		t.Errorf("%d pods the PodDisruptionBudget protects were recreated", guarded)
	}
	var now corev1.Pod
	must(t, k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "rec-bare"}, &now))
	if now.UID != bareUID || injectedHash(&now, set.Name) == newHash {
		t.Errorf("the bare pod was touched: uid %s (was %s), hash %s", now.UID, bareUID, injectedHash(&now, set.Name))
	}
	if got := highest.Load(); got > 2 {
		t.Errorf("at most %d pods of the workloads' capacity were missing at once, want at most 2 (maxUnavailable 2)", got)
	}
}
