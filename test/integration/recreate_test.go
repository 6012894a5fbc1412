package integration

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/test/testutil"
)

// replicaSet creates a ReplicaSet named name in ns (no controller runs here to make its Pods)
// and returns a controller reference to it.
func replicaSet(t *testing.T, ns, name string) metav1.OwnerReference {
	t.Helper()
	labels := map[string]string{"rs": name}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}}}}}
	must(t, k8s.Create(ctx, rs))
	return *metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))
}

// ownedPod is an opted-in pod of app owned by owner (nil: a bare pod).
func ownedPod(ns, name, app string, owner *metav1.OwnerReference) *corev1.Pod {
	pod := appPod(ns, name, app, true)
	if owner != nil {
		pod.OwnerReferences = []metav1.OwnerReference{*owner}
		pod.Labels["owner"] = owner.Name
	}
	return pod
}

func gone(t *testing.T, pod *corev1.Pod) bool {
	t.Helper()
	err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return apierrors.IsNotFound(err)
}

// TestChangesThatCannotBeMadeInPlaceRecreatePodsByEviction: with recreate and remediate set to
// Evict, an env change reaches the pods of a ReplicaSet by eviction, one pod of the workload at a
// time, within maxUnavailable; a PodDisruptionBudget that allows no disruption holds its pod
// (and the condition says so); a bare pod is reported, never evicted; a pod created before the
// set, never injected, is remediated.
func TestChangesThatCannotBeMadeInPlaceRecreatePodsByEviction(t *testing.T) {
	ns := newNamespace(t, nil)
	kubelet := startFakeKubelet(t, ns, 50*time.Millisecond)
	web, guarded, late := replicaSet(t, ns, "web"), replicaSet(t, ns, "guarded"), replicaSet(t, ns, "late")

	// Created before the set: never injected.
	before := ownedPod(ns, "late-0", "recreate", &late)
	must(t, k8s.Create(ctx, before))

	set := rollingSet("recreate", "recreate")
	set.Spec.UpdateStrategy.Recreate, set.Spec.UpdateStrategy.Remediate = appsv1alpha1.RecreateEvict, appsv1alpha1.RecreateEvict
	set.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromInt32(2))
	createSet(t, set)
	pods := []*corev1.Pod{ownedPod(ns, "web-0", "recreate", &web), ownedPod(ns, "web-1", "recreate", &web),
		ownedPod(ns, "guarded-0", "recreate", &guarded), ownedPod(ns, "bare-0", "recreate", nil)}
	for _, pod := range pods {
		must(t, k8s.Create(ctx, pod))
	}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "guarded"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"owner": "guarded"}}}}
	must(t, k8s.Create(ctx, pdb))
	// What kube-controller-manager's disruption controller (not run here) would write.
	must(t, testutil.EditStatus(ctx, k8s, pdb, func(p *policyv1.PodDisruptionBudget) {
		p.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: p.Generation, DisruptionsAllowed: 0,
			CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 1}
	}))
	eventually(t, "the pods to be counted, the late one as not injected", func() (bool, string) {
		var cur appsv1alpha1.SidecarSet
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), &cur))
		// The late pod was remediated as soon as the set saw it.
		return cur.Status.MatchedPods >= 4 && gone(t, before), fmt.Sprintf("%+v, late pod gone %v", cur.Status, gone(t, before))
	})
	waitForEvent(t, "Pod", ns, before.Name, "PodEvicted", "SidecarSet recreate evicted the pod", "ReplicaSet late", "it never got them")

	kubelet.Reset()
	outdated := time.Now()
	setImages(t, set, func(s *appsv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "LEVEL", Value: "debug"}}
	})
	eventually(t, "both pods of the ReplicaSet to be evicted", func() (bool, string) {
		return gone(t, pods[0]) && gone(t, pods[1]), fmt.Sprintf("web-0 gone %v, web-1 gone %v", gone(t, pods[0]), gone(t, pods[1]))
	})
	// One pod of the workload at a time: the second waited for the first to settle.
	if took := time.Since(outdated); took < 10*time.Second {
		t.Errorf("both pods of one ReplicaSet were evicted within %s: one at a time takes at least 10s", took)
	}
	rollingCondition(t, set, "Progressing", "1 pods to recreate wait for their PodDisruptionBudget to allow an eviction ("+ns+": 1)")
	for _, pod := range pods[2:] {
		if gone(t, pod) {
			t.Errorf("%s was evicted", pod.Name)
		}
	}
	waitForEvent(t, "Pod", ns, "bare-0", "PodNotUpdatable", "env: changed")
	waitForEvent(t, "Pod", ns, "web-0", "PodEvicted", "its sidecars cannot change in place")
	if got := kubelet.Highest(); got > 2 {
		t.Errorf("%d pods unavailable at once, maxUnavailable 2", got)
	}
	if n := metricSum(t, "sidecarset_pod_evictions_total", "sidecarset", "recreate", "reason", "outdated"); n != 2 {
		t.Errorf("evictions of outdated pods = %v, want 2", n)
	}
	if n := metricSum(t, "sidecarset_pod_evictions_total", "sidecarset", "recreate", "reason", "not_injected"); n != 1 {
		t.Errorf("evictions of pods never injected = %v, want 1", n)
	}
}

// TestRolloutHaltsWhenRecreatedPodsDoNotComeBack: a pod recreated after an eviction that is
// not available by the progress deadline halts the rollout (reason Halted, an event on the
// pod), and no other pod is evicted; a change of the spec resumes it.
func TestRolloutHaltsWhenRecreatedPodsDoNotComeBack(t *testing.T) {
	ns := newNamespace(t, nil)
	startFakeKubelet(t, ns, 50*time.Millisecond)
	web, other := replicaSet(t, ns, "web"), replicaSet(t, ns, "other")
	set := rollingSet("halt", "halt")
	set.Spec.UpdateStrategy.Recreate = appsv1alpha1.RecreateEvict
	set.Spec.UpdateStrategy.ProgressDeadlineSeconds = ptr.To[int32](10)
	createSet(t, set)
	first, second := ownedPod(ns, "a-web-0", "halt", &web), ownedPod(ns, "b-other-0", "halt", &other)
	must(t, k8s.Create(ctx, first))
	must(t, k8s.Create(ctx, second))
	waitForCounts(t, set, counts{2, 2, 2, 2})

	setImages(t, set, func(s *appsv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "LEVEL", Value: "debug"}}
	})
	eventually(t, "the first pod to be evicted", func() (bool, string) { return gone(t, first), "still there" })
	// The eviction is in the API, not only in the operator's memory: a restarted operator or a
	// new leader reads it back (and the status reconciler's own writes keep it).
	eventually(t, "status.recreating to hold the evicted pod's ReplicaSet", func() (bool, string) {
		var cur appsv1alpha1.SidecarSet
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), &cur))
		ok := len(cur.Status.Recreating) == 1 && cur.Status.Recreating[0].UID == string(web.UID) && !cur.Status.Recreating[0].EvictedAt.IsZero()
		return ok, fmt.Sprintf("status.recreating %+v (ReplicaSet web %s)", cur.Status.Recreating, web.UID)
	})
	// The ReplicaSet's controller (not run here) makes a replacement that never becomes ready.
	replacement := ownedPod(ns, "a-web-1", "halt", &web)
	replacement.Spec.Containers[0].Image = "registry.example/app:broken"
	must(t, k8s.Create(ctx, replacement))

	rollingCondition(t, set, "Halted", "1 recreated pods were not available 10s after the eviction ("+ns+": 1; not ready: 1)")
	waitForEvent(t, "Pod", ns, replacement.Name, "RolloutHalted", "not available 10s after the eviction")
	stays(t, 2*time.Second, "no other pod evicted while halted", func() (bool, string) { return !gone(t, second), "the second pod was evicted" })

	// Fixed (the broken pod goes), and the spec changed: the rollout goes on.
	must(t, k8s.Delete(ctx, replacement))
	setImages(t, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.UpdateStrategy.ProgressDeadlineSeconds = ptr.To[int32](20) })
	eventually(t, "the second pod to be evicted once resumed", func() (bool, string) { return gone(t, second), "still there" })
}
