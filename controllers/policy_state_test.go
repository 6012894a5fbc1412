package controllers

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/policy"
)

// TestPolicyCondition: PolicyCompiled is True only when the policy of this very generation of
// the set is written and injects; otherwise False with the reason and a message naming what
// to do.
func TestPolicyCondition(t *testing.T) {
	set := &appsv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "log-agent", UID: "u1", Generation: 3}}
	running := PolicyState{UID: "u1", Generation: 3, InForce: true}
	for _, tc := range []struct {
		name   string
		state  PolicyState
		ok     bool
		status metav1.ConditionStatus
		reason string
		parts  []string
	}{
		{name: "not rendered", status: metav1.ConditionFalse, reason: "Pending", parts: []string{"sidecarset-log-agent", "generation 3"}},
		{name: "an older generation", ok: true, state: PolicyState{UID: "u1", Generation: 2}, status: metav1.ConditionFalse, reason: "Pending"},
		{name: "an earlier set of the name", ok: true, state: PolicyState{UID: "u0", Generation: 3}, status: metav1.ConditionFalse, reason: "Pending"},
		{name: "written, not yet running", ok: true, state: PolicyState{UID: "u1", Generation: 3, Pending: "not answered yet"},
			status: metav1.ConditionFalse, reason: "Pending", parts: []string{"sidecarset-log-agent", "may get no sidecar", "not answered yet"}},
		{name: "running", ok: true, state: running, status: metav1.ConditionTrue, reason: "Compiled", parts: []string{"sidecarset-log-agent"}},
		{name: "routes, not yet running", ok: true, state: PolicyState{UID: "u1", Generation: 3, Unsupported: policy.Stopped("mesh")},
			status: metav1.ConditionFalse, reason: "Pending"},
		{name: "routes", ok: true, state: PolicyState{UID: "u1", Generation: 3, Unsupported: policy.Stopped("mesh"), InForce: true},
			status: metav1.ConditionFalse, reason: "Unsupported", parts: []string{`"mesh"`}},
		{name: "name taken", ok: true, state: PolicyState{UID: "u1", Generation: 3, Unsupported: policy.Stopped("mesh"),
			Blocked: "MutatingAdmissionPolicy sidecarset-log-agent exists and was not rendered by the operator"},
			status: metav1.ConditionFalse, reason: "NameTaken", parts: []string{"MutatingAdmissionPolicy sidecarset-log-agent", "delete that object"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := policyCondition(set, tc.state, tc.ok)
			if c.Type != appsv1alpha1.ConditionPolicyCompiled || c.Status != tc.status || c.Reason != tc.reason || c.ObservedGeneration != 3 {
				t.Errorf("got %s=%s reason %s at generation %d, want %s reason %s at 3", c.Type, c.Status, c.Reason, c.ObservedGeneration, tc.status, tc.reason)
			}
			for _, p := range tc.parts {
				if !strings.Contains(c.Message, p) {
					t.Errorf("the message does not say %q: %s", p, c.Message)
				}
			}
		})
	}
}

// TestPolicyStatesNotify: subscribers hear exactly the names whose state changed, appeared or
// went.
func TestPolicyStatesNotify(t *testing.T) {
	s := NewPolicyStates()
	var heard [][]string
	s.Subscribe(func(names []string) { heard = append(heard, names) })
	a := PolicyState{UID: "a", Generation: 1}
	b := PolicyState{UID: "b", Generation: 1, Unsupported: policy.Stopped("a")}
	s.replace(map[string]PolicyState{"a": a, "b": b})
	s.replace(map[string]PolicyState{"a": a, "b": {UID: "b", Generation: 1, Unsupported: policy.Stopped("a")}}) // equal
	s.replace(map[string]PolicyState{"a": {UID: "a", Generation: 1, Blocked: "x"}, "c": a})
	want := [][]string{{"a", "b"}, {"a", "b", "c"}}
	if diff := cmp.Diff(want, heard); diff != "" {
		t.Errorf("notifications (-want +got):\n%s", diff)
	}
	if _, ok := s.Get("b"); ok {
		t.Error("a state that went is still there")
	}
}
