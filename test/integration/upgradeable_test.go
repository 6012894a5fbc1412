package integration

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	v2 "github.com/operator-framework/api/pkg/operators/v2"
	"github.com/operator-framework/operator-lib/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// recordedCondition stands in for the OperatorCondition OLM gives the operator (envtest runs no
// OLM): a conditions.Factory whose Upgradeable condition remembers every write.
type recordedCondition struct {
	mu     sync.Mutex
	writes []metav1.Condition
}

func (r *recordedCondition) NewCondition(t v2.ConditionType) (conditions.Condition, error) {
	return r, nil
}

func (r *recordedCondition) GetNamespacedName() (*types.NamespacedName, error) {
	return &types.NamespacedName{Namespace: operatorNamespace, Name: "sidecarset-operator.v0.1.0"}, nil
}

func (r *recordedCondition) Get(context.Context) (*metav1.Condition, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.writes) == 0 {
		return nil, nil
	}
	c := r.writes[len(r.writes)-1]
	return &c, nil
}

func (r *recordedCondition) Set(_ context.Context, status metav1.ConditionStatus, opts ...conditions.Option) error {
	c := metav1.Condition{Type: v2.Upgradeable, Status: status}
	for _, o := range opts {
		o(&c)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, c)
	return nil
}

func (r *recordedCondition) since(n int) []metav1.Condition {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]metav1.Condition(nil), r.writes[n:]...)
}

func (r *recordedCondition) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.writes)
}

// TestUpgradeableFollowsRollouts: while a rolling update runs, the operator tells OLM it is not
// upgradeable, naming the set; when the rollout completes, it is again.
func TestUpgradeableFollowsRollouts(t *testing.T) {
	ns := newNamespace(t, nil)
	startFakeKubelet(t, ns, 300*time.Millisecond)
	set := createSet(t, rollingSet("gate", "gate"))
	rolloutPods(t, ns, "gate", 3)
	waitForCounts(t, set, counts{3, 3, 3, 3})
	from := upgradeable.count()

	setImages(t, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "registry.example/agent:2.0" })
	rollingCondition(t, set, "Complete", "3 of 3 matched pods carry hash")
	eventually(t, "Upgradeable to go False during the rollout and True after it", func() (bool, string) {
		writes := upgradeable.since(from)
		sawFalse := false
		for _, w := range writes {
			if w.Status == metav1.ConditionFalse && w.Reason == "RolloutInProgress" && strings.Contains(w.Message, "SidecarSet gate:") {
				sawFalse = true
			}
		}
		last := metav1.ConditionUnknown
		if len(writes) > 0 {
			last = writes[len(writes)-1].Status
		}
		return sawFalse && last == metav1.ConditionTrue, describe(writes)
	})
}

func describe(writes []metav1.Condition) string {
	var parts []string
	for _, w := range writes {
		parts = append(parts, string(w.Status)+" "+w.Reason+": "+w.Message)
	}
	return strings.Join(parts, " | ")
}
