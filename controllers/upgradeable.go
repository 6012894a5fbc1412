package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	v2 "github.com/operator-framework/api/pkg/operators/v2"
	"github.com/operator-framework/operator-lib/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sidecarset/sidecarset-operator/internal/rollout"
	"github.com/sidecarset/sidecarset-operator/internal/status"
)

// UpgradeGate tells OLM, through the operator's OperatorCondition (operator-lib's
// conditions), whether the operator may be replaced now: Upgradeable=False while any
// SidecarSet's rolling update is in progress, so that OLM does not swap the operator in the
// middle of one; True again when none is. Outside OLM (no OPERATOR_CONDITION_NAME) it does
// nothing. It writes only when the answer or the list of rolling sets changes.
type UpgradeGate struct {
	factory conditions.Factory

	mu       sync.Mutex
	cond     conditions.Condition
	disabled bool
	rolling  map[string]string // set -> where its rollout stands
	written  string            // the last written status and sets, to write only on changes
}

// NewUpgradeGate returns a gate writing through factory (conditions.InClusterFactory in a pod
// that OLM runs).
func NewUpgradeGate(factory conditions.Factory) *UpgradeGate {
	return &UpgradeGate{factory: factory, rolling: map[string]string{}}
}

// NoteRollout records where set's rollout stands: in progress while it has Pods to update or
// Pods restarting (status.InProgress), so an upgrade waits until the kubelet runs the
// new sidecars, Ready, in every Pod the rollout restarted. counts are those taken with ro.
func (g *UpgradeGate) NoteRollout(ctx context.Context, set string, ro *rollout.State, counts status.Counts) error {
	return g.Note(ctx, set, status.InProgress(ro, counts), status.Progress(ro, counts))
}

// Note records whether set's rollout is in progress (why says where it stands) and updates
// the OperatorCondition when the answer changes.
func (g *UpgradeGate) Note(ctx context.Context, set string, inProgress bool, why string) error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if inProgress {
		g.rolling[set] = why
	} else {
		delete(g.rolling, set)
	}
	if g.disabled {
		return nil
	}
	if g.cond == nil {
		cond, err := g.factory.NewCondition(v2.ConditionType(v2.Upgradeable))
		if err != nil {
			g.disabled = true
			logf.FromContext(ctx).Info("Not run by OLM: rollouts do not gate operator upgrades", "reason", err.Error())
			return nil
		}
		g.cond = cond
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for name := range g.rolling {
			if !yield(name) {
				return
			}
		}
	})
	state := "none"
	if len(names) > 0 {
		state = strings.Join(names, ",")
	}
	if state == g.written {
		return nil
	}
	var err error
	if len(names) == 0 {
		err = g.cond.Set(ctx, metav1.ConditionTrue, conditions.WithReason("NoRolloutInProgress"),
			conditions.WithMessage("No SidecarSet is updating running pods"))
	} else {
		parts := make([]string, len(names))
		for i, n := range names {
			parts[i] = fmt.Sprintf("SidecarSet %s: %s", n, g.rolling[n])
		}
		err = g.cond.Set(ctx, metav1.ConditionFalse, conditions.WithReason("RolloutInProgress"),
			conditions.WithMessage("Rolling updates in progress; upgrading the operator now would interrupt them: "+strings.Join(parts, "; ")))
	}
	if err != nil {
		return fmt.Errorf("setting the OperatorCondition's Upgradeable condition: %w", err)
	}
	g.written = state
	return nil
}
