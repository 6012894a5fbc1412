package rollout

import (
	"fmt"
	"testing"
	"time"

	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/rollout/podtest"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// BenchmarkStepRefusals takes one rollout step over outdated Pods none of which can take the
// update in place, with maxUnavailable 1: the step tries a Pod, is refused, and plans again,
// once per Pod (tries/op), which is the most plans one step makes. With scatter "*" over a
// label whose every value is its own (scatter=any), each plan is the planner's dearest.
func BenchmarkStepRefusals(b *testing.B) {
	for _, scatter := range []bool{false, true} {
		for _, n := range []int{250, 1000} {
			set := podtest.Set(b, "log-agent", nil, func(s *appsv1alpha1.SidecarSet) {
				s.Spec.UpdateStrategy = appsv1alpha1.UpdateStrategy{Type: appsv1alpha1.RollingUpdate, MaxUnavailable: ptr.To(intstr.FromInt32(1))}
				if scatter {
					s.Spec.UpdateStrategy.ScatterStrategy = []appsv1alpha1.UpdateScatterTerm{{Key: "k", Value: "*"}}
				}
			})
			pods := make([]*corev1.Pod, n)
			for i := range pods {
				pods[i] = outdated(fmt.Sprintf("p-%05d", i), podtest.Label("k", fmt.Sprintf("v-%05d", i)))
			}
			name := fmt.Sprintf("pods=%d", n)
			if scatter {
				name += ",scatter=any"
			}
			b.Run(name, func(b *testing.B) {
				tries := 0
				for b.Loop() {
					memory := NewMemory()
					in := Inputs(set, pods, func(string) map[string]string { return nil }, inject.Scope{}, func(*corev1.Pod) bool { return true }, memory, time.Now())
					if _, err := Step(set, in, &State{}, memory, func(*corev1.Pod, bool) (Attempt, error) {
						tries++
						return Attempt{Why: "spec.containers[log-agent].image: changed since injection"}, nil
					}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(tries)/float64(b.N), "tries/op")
			})
		}
	}
}
