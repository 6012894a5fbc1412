package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	v2 "github.com/operator-framework/api/pkg/operators/v2"
	"github.com/operator-framework/operator-lib/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/rollout"
	"github.com/sidecarset/sidecarset-operator/internal/status"
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

// TestUpgradeGateWaitsForTheKubelet: the gate holds operator upgrades while a pod the rollout
// patched still runs its old sidecar (the kubelet waits for the old container to exit), as the
// RollingUpdate condition stays Progressing, and lets them through once the kubelet runs the
// new one, Ready, as the condition turns Complete: both agree with updatedReadyPods.
func TestUpgradeGateWaitsForTheKubelet(t *testing.T) {
	ctx := context.Background()
	set, err := inject.Compile(&appsv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "log-agent", Generation: 2},
		Spec: appsv1alpha1.SidecarSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Containers:     []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "log-agent", Image: "registry.example/log-agent:2"}}},
			UpdateStrategy: appsv1alpha1.UpdateStrategy{Type: appsv1alpha1.RollingUpdate},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	// pod is a pod patched to the set's hash whose kubelet reports the log-agent sidecar as
	// running image (state running, Ready) and the pod Ready.
	pod := func(name, image string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name,
				Labels:      map[string]string{"app": "web", appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue},
				Annotations: map[string]string{appsv1alpha1.StatusAnnotation: inject.Records{"log-agent": {Hash: set.Hash, Containers: []string{"log-agent"}}}.Encode()}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "web:1"}, {Name: "log-agent", Image: "registry.example/log-agent:2"}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: "log-agent", Image: image, Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
		}
	}
	cond := &recordingCondition{}
	g := NewUpgradeGate(fakeFactory{cond: cond})
	for _, step := range []struct {
		name string
		last string // the image the kubelet runs in the last pod patched
		want metav1.ConditionStatus
		text string
	}{
		{"the old container terminating", "registry.example/log-agent:1", metav1.ConditionFalse,
			"SidecarSet log-agent: 2 of 2 matched pods updated, 1 restarting (1 of them waiting for an old sidecar container to stop)"},
		{"the new sidecar running, Ready", "registry.example/log-agent:2", metav1.ConditionTrue, "No SidecarSet"},
	} {
		pods := []*corev1.Pod{pod("web-0", "registry.example/log-agent:2"), pod("web-1", step.last)}
		in := rollout.Inputs(set, pods, func(string) map[string]string { return nil }, status.Scope{},
			func(*corev1.Pod) bool { return true }, rollout.NewMemory(), time.Now())
		ro := &rollout.State{Blocked: in.Blocked, Stopping: in.Stopping}
		if _, err := rollout.Step(set, in, ro, rollout.NewMemory(), func(p *corev1.Pod, _ bool) (rollout.Attempt, error) {
			return rollout.Attempt{}, fmt.Errorf("pod %s tried: every pod is updated", p.Name)
		}); err != nil {
			t.Fatal(err)
		}
		if err := g.NoteRollout(ctx, set.Name(), ro, status.Tally(in.States)); err != nil {
			t.Fatal(err)
		}
		last := cond.sets[len(cond.sets)-1]
		if last.Status != step.want || !strings.Contains(last.Message, step.text) {
			t.Errorf("%s: Upgradeable %s %q, want %s with %q (updatedReadyPods %d of %d)", step.name, last.Status, last.Message, step.want, step.text,
				status.Tally(in.States).UpdatedReady, status.Tally(in.States).Matched)
		}
	}
}
