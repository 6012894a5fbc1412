//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// BenchmarkInPlaceRollout rolls a new sidecar image through SIDECARSET_BENCH_PODS pods (default
// 1,000) of one Deployment on the local cluster, maxUnavailable 10%, kwok playing the kubelet
// (500 ms per restart). It reports the rollout's wall time, the API writes per pod (PATCHes of
// pods and pods/resize seen by the API server: only the operator writes pod specs here), and the
// highest number of pods observed unavailable against the budget. Run it with `make
// bench-rollout`; it asserts nothing about time.
func BenchmarkInPlaceRollout(b *testing.B) {
	n := benchEnv(b, "SIDECARSET_BENCH_PODS", 1000)
	for b.Loop() {
		ns := newNamespace(b, "bench", nil)
		set := &appsv1alpha1.SidecarSet{
			ObjectMeta: metav1.ObjectMeta{Name: "bench-rollout"},
			Spec: appsv1alpha1.SidecarSetSpec{
				Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "bench"}},
				Containers: []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "agent", Image: "registry.example/agent:1.0"}}},
				UpdateStrategy: appsv1alpha1.UpdateStrategy{Type: appsv1alpha1.RollingUpdate,
					MaxUnavailable: ptr.To(intstr.FromString("10%"))},
			},
		}
		createSet(b, set)
		start := time.Now()
		newDeployment(b, ns, "bench", int32(n))
		waitForCounts(b, set, counts{int32(n), int32(n), int32(n), int32(n)}, 15*time.Minute)
		b.Logf("%d pods created, injected and Ready in %s", n, time.Since(start).Round(time.Millisecond))

		budget := watchBudget(b, ns)
		budget.Reset()
		writesBefore, eventsBefore := podWrites(b), eventWrites(b)
		start = time.Now()
		editSet(b, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "registry.example/agent:2.0" })
		eventually(b, 15*time.Minute, "the rollout to complete", func() (bool, string) {
			var cur appsv1alpha1.SidecarSet
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(set), &cur); err != nil {
				return false, err.Error()
			}
			st := cur.Status
			return st.UpdatedReadyPods == int32(n) && st.ObservedGeneration == cur.Generation,
				fmt.Sprintf("%d of %d updated and ready", st.UpdatedReadyPods, n)
		})
		took := time.Since(start)
		writes, events := podWrites(b)-writesBefore, eventWrites(b)-eventsBefore
		allowed := n / 10
		b.ReportMetric(took.Seconds(), "s/rollout")
		b.ReportMetric(writes/float64(n), "writes/pod")
		b.ReportMetric(events/float64(n), "event-writes/pod")
		b.ReportMetric(float64(budget.Highest()), "peak-unavailable")
		b.ReportMetric(float64(allowed), "max-unavailable")
		b.ReportMetric(0, "ns/op")
		b.Logf("rollout of %d pods: %s, %.0f pod writes (%.2f per pod), %.0f event writes (%.2f per pod), peak unavailable %d of at most %d",
			n, took.Round(time.Millisecond), writes, writes/float64(n), events, events/float64(n), budget.Highest(), allowed)
		if budget.Highest() > allowed {
			b.Errorf("peak unavailable %d exceeds maxUnavailable %d", budget.Highest(), allowed)
		}
	}
}

// podWrites is the API server's count of PATCH requests to pods and pods/resize.
func podWrites(b testing.TB) float64 {
	return apiRequests(b, func(l model.LabelSet) bool {
		return l["verb"] == "PATCH" && l["resource"] == "pods" && l["group"] == "" && (l["subresource"] == "" || l["subresource"] == "resize")
	})
}

// eventWrites is the API server's count of event creations and updates (a series of repeated
// events is an update), core and events.k8s.io.
func eventWrites(b testing.TB) float64 {
	return apiRequests(b, func(l model.LabelSet) bool {
		return l["resource"] == "events" && (l["verb"] == "POST" || l["verb"] == "PATCH" || l["verb"] == "PUT")
	})
}

// apiRequests sums the API server's apiserver_request_total over the series match selects.
func apiRequests(b testing.TB, match func(model.LabelSet) bool) float64 {
	b.Helper()
	cs, err := kubernetes.NewForConfig(restConfig)
	must(b, err)
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	must(b, err)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	must(b, err)
	total := 0.0
	for _, m := range families["apiserver_request_total"].GetMetric() {
		labels := model.LabelSet{}
		for _, l := range m.GetLabel() {
			labels[model.LabelName(l.GetName())] = model.LabelValue(l.GetValue())
		}
		if match(labels) {
			total += m.GetCounter().GetValue()
		}
	}
	return total
}

// BenchmarkRecreateRollout changes a sidecar's env (which no running pod can take in place)
// on a set with `recreate: Evict` over SIDECARSET_BENCH_PODS pods (default 1,000) spread over
// SIDECARSET_BENCH_WORKLOADS Deployments (default 100), maxUnavailable 10%: every pod is evicted
// and recreated by its ReplicaSet, one pod per Deployment at a time. It reports the wall time,
// the evictions and pod writes per pod (the API server's counts of pods/eviction POSTs and pod
// PATCHes), and the most pods of the Deployments' capacity missing at once against the budget.
// Run it with `make bench-rollout BENCH_MODE=evict`; it asserts nothing about time.
func BenchmarkRecreateRollout(b *testing.B) {
	n, workloads := benchEnv(b, "SIDECARSET_BENCH_PODS", 1000), benchEnv(b, "SIDECARSET_BENCH_WORKLOADS", 100)
	if n%workloads != 0 {
		b.Fatalf("%d pods do not spread evenly over %d Deployments", n, workloads)
	}
	for b.Loop() {
		ns := newNamespace(b, "bench", nil)
		apps, replicas := make([]string, workloads), map[string]int32{}
		for i := range apps {
			apps[i] = fmt.Sprintf("bench-%03d", i)
			replicas[apps[i]] = int32(n / workloads)
		}
		set := &appsv1alpha1.SidecarSet{
			ObjectMeta: metav1.ObjectMeta{Name: "bench-recreate"},
			Spec: appsv1alpha1.SidecarSetSpec{
				Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app",
					Operator: metav1.LabelSelectorOpIn, Values: apps}}},
				Containers: []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "agent", Image: "registry.example/agent:1.0"}}},
				UpdateStrategy: appsv1alpha1.UpdateStrategy{Type: appsv1alpha1.RollingUpdate, Recreate: appsv1alpha1.RecreateEvict,
					MaxUnavailable: ptr.To(intstr.FromString("10%"))},
			},
		}
		createSet(b, set)
		start := time.Now()
		for _, app := range apps {
			newDeployment(b, ns, app, int32(n/workloads))
		}
		waitForCounts(b, set, counts{int32(n), int32(n), int32(n), int32(n)}, 15*time.Minute)
		b.Logf("%d pods in %d Deployments created, injected and Ready in %s", n, workloads, time.Since(start).Round(time.Millisecond))

		highest := watchCapacity(b, ns, replicas)
		writesBefore, evictionsBefore := podWrites(b), evictions(b)
		start = time.Now()
		editSet(b, set, func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "LEVEL", Value: "debug"}}
		})
		eventually(b, 30*time.Minute, "every pod to be recreated with the new sidecar", func() (bool, string) {
			var cur appsv1alpha1.SidecarSet
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(set), &cur); err != nil {
				return false, err.Error()
			}
			st := cur.Status
			return st.UpdatedReadyPods == int32(n) && st.MatchedPods == int32(n) && st.ObservedGeneration == cur.Generation,
				fmt.Sprintf("%d of %d recreated and ready", st.UpdatedReadyPods, n)
		})
		took := time.Since(start)
		writes, evicted := podWrites(b)-writesBefore, evictions(b)-evictionsBefore
		allowed := n / 10
		b.ReportMetric(took.Seconds(), "s/rollout")
		b.ReportMetric(evicted/float64(n), "evictions/pod")
		b.ReportMetric(writes/float64(n), "patches/pod")
		b.ReportMetric(float64(highest()), "peak-missing")
		b.ReportMetric(float64(allowed), "max-unavailable")
		b.ReportMetric(0, "ns/op")
		b.Logf("recreating %d pods of %d Deployments: %s, %.0f evictions (%.2f per pod), %.0f pod patches (%.2f per pod), at most %d pods missing of at most %d",
			n, workloads, took.Round(time.Millisecond), evicted, evicted/float64(n), writes, writes/float64(n), highest(), allowed)
		if int(highest()) > allowed {
			b.Errorf("at most %d pods missing at once exceeds maxUnavailable %d", highest(), allowed)
		}
	}
}

// benchEnv reads a positive number from the environment, def when unset.
func benchEnv(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// evictions is the API server's count of Eviction requests (POSTs to pods/eviction).
func evictions(b testing.TB) float64 {
	return apiRequests(b, func(l model.LabelSet) bool {
		return l["verb"] == "POST" && l["resource"] == "pods" && l["subresource"] == "eviction"
	})
}
