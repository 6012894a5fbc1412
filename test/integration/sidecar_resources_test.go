package integration

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// footprint is what a set's sidecars request and limit in some pods, as a recount reads them
// from the API server.
type footprint struct {
	pods             int32
	requests, limits corev1.ResourceList
	nativeRequests   corev1.ResourceList // the native sidecars' part of requests
}

// recountFootprint lists the pods of ns and sums, over those the set injected (its record is
// on them) and that are not being deleted, the requests and limits of its sidecar containers
// and native sidecars, by name. It shares no code with the operator's tally.
func recountFootprint(t *testing.T, set *appsv1alpha1.SidecarSet, ns string) footprint {
	t.Helper()
	var pods corev1.PodList
	must(t, k8s.List(ctx, &pods, client.InNamespace(ns)))
	f := footprint{requests: corev1.ResourceList{}, limits: corev1.ResourceList{}, nativeRequests: corev1.ResourceList{}}
	add := func(to, from corev1.ResourceList) {
		for name, q := range from {
			sum := to[name]
			sum.Add(q)
			to[name] = sum
		}
	}
	for i := range pods.Items {
		pod := &pods.Items[i]
		recs, err := inject.ParseRecords(pod.Annotations)
		if _, injected := recs[set.Name]; err != nil || !injected || pod.DeletionTimestamp != nil {
			continue
		}
		f.pods++
		for _, c := range pod.Spec.Containers {
			if c.Name == set.Spec.Containers[0].Name {
				add(f.requests, c.Resources.Requests)
				add(f.limits, c.Resources.Limits)
			}
		}
		for _, c := range pod.Spec.InitContainers {
			if c.Name == set.Spec.InitContainers[0].Name && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
				add(f.requests, c.Resources.Requests)
				add(f.limits, c.Resources.Limits)
				add(f.nativeRequests, c.Resources.Requests)
			}
		}
	}
	return f
}

// sameList compares resource lists by value, a zero quantity as absent.
func sameList(a, b corev1.ResourceList) bool {
	for _, l := range [][2]corev1.ResourceList{{a, b}, {b, a}} {
		for name, q := range l[0] {
			other := l[1][name]
			if q.Cmp(other) != 0 {
				return false
			}
		}
	}
	return true
}

// waitForFootprint waits until the set's status.sidecarResources, and the leader's
// sidecarset_sidecar_* series of each namespace, equal a recount over the namespaces' pods.
func waitForFootprint(t *testing.T, set *appsv1alpha1.SidecarSet, step string, namespaces ...string) footprint {
	t.Helper()
	var total footprint
	eventually(t, step+": "+set.Name+"'s sidecar resources to equal a recount", func() (bool, string) {
		total = footprint{requests: corev1.ResourceList{}, limits: corev1.ResourceList{}}
		for _, ns := range namespaces {
			f := recountFootprint(t, set, ns)
			total.pods += f.pods
			for _, l := range []struct {
				to, from corev1.ResourceList
				metric   string
			}{{total.requests, f.requests, "sidecarset_sidecar_resource_requests"}, {total.limits, f.limits, "sidecarset_sidecar_resource_limits"}} {
				for name, q := range l.from {
					sum := l.to[name]
					sum.Add(q)
					l.to[name] = sum
				}
				for _, r := range []struct {
					name   corev1.ResourceName
					metric string
					unit   string
					value  float64
				}{{corev1.ResourceCPU, "cpu", "core", float64(l.from.Cpu().MilliValue()) / 1000},
					{corev1.ResourceMemory, "memory", "byte", float64(l.from.Memory().Value())},
					{corev1.ResourceEphemeralStorage, "ephemeral_storage", "byte", float64(l.from.StorageEphemeral().Value())}} {
					got := metricSum(t, l.metric, "sidecarset", set.Name, "namespace", ns, "resource", r.metric, "unit", r.unit)
					if got != r.value {
						return false, fmt.Sprintf("%s{namespace=%q,resource=%q} = %v, a recount gives %v", l.metric, ns, r.metric, got, r.value)
					}
				}
			}
			if got, want := metricSum(t, "sidecarset_sidecar_resource_requests", "sidecarset", set.Name, "namespace", ns, "sidecar", "native",
				"resource", "cpu"), float64(f.nativeRequests.Cpu().MilliValue())/1000; got != want {
				return false, fmt.Sprintf("sidecarset_sidecar_resource_requests{namespace=%q,sidecar=\"native\",resource=\"cpu\"} = %v, a recount gives %v", ns, got, want)
			}
			if got := metricSum(t, "sidecarset_sidecar_pods", "sidecarset", set.Name, "namespace", ns); got != float64(f.pods) {
				return false, fmt.Sprintf("sidecarset_sidecar_pods{namespace=%q} = %v, a recount gives %d", ns, got, f.pods)
			}
		}
		var cur appsv1alpha1.SidecarSet
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(set), &cur); err != nil {
			return false, err.Error()
		}
		got := cur.Status.SidecarResources
		if total.pods == 0 {
			return got == nil, fmt.Sprintf("status.sidecarResources %+v with no pod injected", got)
		}
		return got != nil && got.Pods == total.pods && sameList(got.Requests, total.requests) && sameList(got.Limits, total.limits),
			fmt.Sprintf("status.sidecarResources %+v, a recount gives %+v", got, total)
	})
	return total
}

// TestSidecarResourcesEqualARecount: what status and the metrics say a set's sidecars request
// and limit equals a recount over the pods after creations (one namespace's LimitRange gives
// the sidecars memory), a deletion, an in-place resize and image update, and an eviction
// rollout that takes the pods away.
func TestSidecarResourcesEqualARecount(t *testing.T) {
	plain, limited := newNamespace(t, nil), limitRangeNamespace(t)
	startFakeKubelet(t, plain, 50*time.Millisecond)
	startFakeKubelet(t, limited, 50*time.Millisecond)
	set := rollingSet("cost", "cost")
	set.Spec.InitContainers[0].Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("100Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("200Mi"), corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")},
	}
	set.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromInt32(5))
	createSet(t, set)
	waitForFootprint(t, set, "no pods", plain, limited)

	// Pods of ReplicaSets: the eviction rollout recreates only pods a controller recreates.
	var pods []*corev1.Pod
	for ns, n := range map[string]int{plain: 3, limited: 2} {
		owner := replicaSet(t, ns, "cost")
		for i := range n {
			pod := ownedPod(ns, fmt.Sprintf("cost-%d", i), "cost", &owner)
			must(t, k8s.Create(ctx, pod))
			pods = append(pods, pod)
		}
	}
	// The app's own pod that the set does not select costs nothing.
	must(t, k8s.Create(ctx, appPod(plain, "other", "other", true)))
	f := waitForFootprint(t, set, "created", plain, limited)
	if f.pods != 5 || f.requests.Cpu().MilliValue() != 5*260 || f.limits.StorageEphemeral().Value() != 5<<30 ||
		f.requests.Memory().Value() != 3*(100<<20)+2*(164<<20) {
		t.Errorf("created: %+v; want 5 pods, 5 x 260m cpu, 5Gi ephemeral storage limits, and the LimitRange's 64Mi for the agent in 2", f)
	}

	must(t, k8s.Delete(ctx, pods[0]))
	eventually(t, "the deleted pod to go", func() (bool, string) { return gone(t, pods[0]), "still there" })
	waitForFootprint(t, set, "a pod deleted", plain, limited)

	setImages(t, set, func(s *appsv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Image = "registry.example/agent:2.0"
		if kubernetesMinor >= 33 {
			s.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("40m")
		}
	})
	rollingCondition(t, set, "Complete")
	f = waitForFootprint(t, set, "resized in place", plain, limited)
	if want := int64(4 * 250); kubernetesMinor >= 33 && f.requests.Cpu().MilliValue() != want+4*40 {
		t.Errorf("after the resize: cpu requests %s, want %dm", f.requests.Cpu(), want+4*40)
	}

	setImages(t, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.InitContainers[0].Image = "registry.example/proxy:2" })
	rollingCondition(t, set, "Complete")
	waitForFootprint(t, set, "updated in place", plain, limited)

	setImages(t, set, func(s *appsv1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy.Recreate = appsv1alpha1.RecreateEvict
		s.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "LEVEL", Value: "debug"}}
	})
	eventually(t, "the outdated pods to be evicted", func() (bool, string) {
		left := 0
		for _, pod := range pods[1:] {
			if !gone(t, pod) {
				left++
			}
		}
		return left == 0, fmt.Sprintf("%d pods left", left)
	})
	waitForFootprint(t, set, "evicted", plain, limited)
}
