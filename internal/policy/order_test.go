package policy_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// TestCompileIgnoresRolloutOrder: a policy injects new pods; the order in which a rolling
// update takes running pods (priorityStrategy, scatterStrategy) is none of its business. A set
// with one compiles to exactly the policy, binding, hash and digest it compiles to without, and
// the policy still injects its pods itself (so PolicyCompiled is what it was).
func TestCompileIgnoresRolloutOrder(t *testing.T) {
	plain := plainSet("log-agent")
	ordered := plain.DeepCopy()
	ordered.Spec.UpdateStrategy = appsv1alpha1.UpdateStrategy{Type: appsv1alpha1.RollingUpdate,
		PriorityStrategy: &appsv1alpha1.UpdatePriorityStrategy{WeightPriority: []appsv1alpha1.UpdatePriorityWeightTerm{
			{Weight: 50, MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": "canary"}}}}},
		ScatterStrategy: []appsv1alpha1.UpdateScatterTerm{{Key: "topology.kubernetes.io/zone", Value: "*"}}}
	want, got := mustCompile(t, plain, nil), mustCompile(t, ordered, nil)
	if got.Unsupported != nil {
		t.Errorf("a set with a rollout order is routed to the webhook: %s", got.Unsupported)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the rollout order changed the compiled policy (-without +with):\n%s", diff)
	}
}
