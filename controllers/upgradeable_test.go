package controllers

import (
	"context"
	"errors"
	"strings"
	"testing"

	v2 "github.com/operator-framework/api/pkg/operators/v2"
	"github.com/operator-framework/operator-lib/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// recordingCondition is an OperatorCondition's condition that remembers what was set.
type recordingCondition struct{ sets []metav1.Condition }

func (c *recordingCondition) Get(context.Context) (*metav1.Condition, error) {
	if len(c.sets) == 0 {
		return nil, errors.New("not set")
	}
	return &c.sets[len(c.sets)-1], nil
}

func (c *recordingCondition) Set(_ context.Context, status metav1.ConditionStatus, opts ...conditions.Option) error {
	cond := metav1.Condition{Status: status}
	for _, o := range opts {
		o(&cond)
	}
	c.sets = append(c.sets, cond)
	return nil
}

type fakeFactory struct {
	cond *recordingCondition
	err  error
}

func (f fakeFactory) NewCondition(t v2.ConditionType) (conditions.Condition, error) {
	if t != v2.ConditionType(v2.Upgradeable) {
		return nil, errors.New("unexpected condition type " + string(t))
	}
	return f.cond, f.err
}

func (f fakeFactory) GetNamespacedName() (*types.NamespacedName, error) { return nil, f.err }

// TestUpgradeGate: Upgradeable goes False when a rollout starts, names every set in progress,
// goes True when the last one ends, and is written only when that changes.
func TestUpgradeGate(t *testing.T) {
	ctx := context.Background()
	cond := &recordingCondition{}
	g := NewUpgradeGate(fakeFactory{cond: cond})
	steps := []struct {
		set        string
		inProgress bool
		wantWrites int
		want       metav1.ConditionStatus
		wantText   []string
	}{
		{"a", false, 1, metav1.ConditionTrue, []string{"No SidecarSet"}},
		{"a", false, 1, metav1.ConditionTrue, nil}, // nothing changed: no write
		{"a", true, 2, metav1.ConditionFalse, []string{"SidecarSet a: 1 of 4"}},
		{"a", true, 2, metav1.ConditionFalse, nil}, // still a alone: no write
		{"b", true, 3, metav1.ConditionFalse, []string{"SidecarSet a:", "SidecarSet b:"}},
		{"a", false, 4, metav1.ConditionFalse, []string{"SidecarSet b:"}},
		{"b", false, 5, metav1.ConditionTrue, []string{"No SidecarSet"}},
	}
	for i, s := range steps {
		if err := g.Note(ctx, s.set, s.inProgress, "1 of 4 matched pods updated"); err != nil {
			t.Fatal(err)
		}
		if len(cond.sets) != s.wantWrites {
			t.Fatalf("step %d: %d writes, want %d", i, len(cond.sets), s.wantWrites)
		}
		last := cond.sets[len(cond.sets)-1]
		if last.Status != s.want {
			t.Errorf("step %d: Upgradeable=%s, want %s", i, last.Status, s.want)
		}
		for _, text := range s.wantText {
			if !strings.Contains(last.Message, text) {
				t.Errorf("step %d: message %q lacks %q", i, last.Message, text)
			}
		}
	}
	if strings.Contains(cond.sets[3].Message, "SidecarSet a") {
		t.Errorf("a finished but is still named: %q", cond.sets[5].Message)
	}
}

// TestUpgradeGateOutsideOLM: without an OperatorCondition the gate does nothing, and says so
// once.
func TestUpgradeGateOutsideOLM(t *testing.T) {
	g := NewUpgradeGate(fakeFactory{err: errors.New("OPERATOR_CONDITION_NAME not set")})
	for range 3 {
		if err := g.Note(context.Background(), "a", true, "x"); err != nil {
			t.Fatal(err)
		}
	}
	var nilGate *UpgradeGate
	if err := nilGate.Note(context.Background(), "a", true, "x"); err != nil {
		t.Fatal(err)
	}
}
