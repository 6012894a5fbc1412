package rollout

import (
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// recreatingControllers are the controllers that make a new Pod when one of theirs is evicted,
// by API group and kind. A Job is not one of them: an evicted Job Pod counts against the Job's
// backoffLimit.
var recreatingControllers = map[string]bool{
	"apps/ReplicaSet": true, "apps/StatefulSet": true, "apps/DaemonSet": true, "/ReplicationController": true,
}

// RecreatingController is the Pod's controller when it is one that recreates an evicted Pod,
// or why the Pod would not come back if it were evicted.
func RecreatingController(pod *corev1.Pod) (*metav1.OwnerReference, string) {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil {
		return nil, "it has no controller to recreate it (a bare pod): delete and create it yourself"
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || !recreatingControllers[gv.Group+"/"+ref.Kind] {
		return nil, fmt.Sprintf("its controller, %s %s, does not recreate an evicted pod as it was", ref.Kind, ref.Name)
	}
	return ref, ""
}

// RecreateSettle is how long a workload counts as recreating a Pod after an eviction even when
// every Pod of it the cache shows is available: its controller may not have created the
// replacement yet.
const RecreateSettle = 10 * time.Second

// workloadRecreating reports whether the rollout is recreating a Pod of the workload: it
// evicted one less than RecreateSettle ago, or one of the workload's Pods is still unavailable
// since.
func workloadRecreating(evictedAt time.Time, now time.Time, unavailable bool) bool {
	return now.Sub(evictedAt) < RecreateSettle || unavailable
}

// RecreatingFromStatus is the rollout's memory of the workloads it is recreating, as the set's
// status stores it (status.recreating): what a restarted operator, or a new leader, starts from.
func RecreatingFromStatus(list []appsv1alpha1.RecreatingWorkload) map[string]time.Time {
	out := make(map[string]time.Time, len(list))
	for _, w := range list {
		out[w.UID] = w.EvictedAt.Time
	}
	return out
}

// RecreatingStatus is the memory of the workloads being recreated in the form the set's status
// stores it, sorted by UID (nil when there is none), to seconds as the API stores times.
func RecreatingStatus(recreating map[string]time.Time) []appsv1alpha1.RecreatingWorkload {
	if len(recreating) == 0 {
		return nil
	}
	out := make([]appsv1alpha1.RecreatingWorkload, 0, len(recreating))
	for _, uid := range slices.Sorted(maps.Keys(recreating)) {
		out = append(out, appsv1alpha1.RecreatingWorkload{UID: uid, EvictedAt: metav1.NewTime(recreating[uid].Truncate(time.Second))})
	}
	return out
}
