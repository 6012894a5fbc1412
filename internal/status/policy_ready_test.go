package status

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// TestReadyWaitsForThePolicy: in policy mode Ready means that the next matching pod gets the
// sidecars, so it is False while the set's MutatingAdmissionPolicy is not in force or cannot be
// written, and keeps its transition time while it stays so; a policy in force, or one that
// routes the set's pods to the webhook, leaves Ready as the rest of the status makes it.
func TestReadyWaitsForThePolicy(t *testing.T) {
	then, now := metav1.NewTime(time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)), metav1.NewTime(time.Date(2026, 11, 28, 2, 0, 0, 0, time.UTC))
	readyTrue := metav1.Condition{Type: appsv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Injecting", LastTransitionTime: then}
	policy := func(status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: appsv1alpha1.ConditionPolicyCompiled, Status: status, Reason: reason, Message: "policy says " + reason, LastTransitionTime: now}
	}
	for _, tc := range []struct {
		name           string
		ready          metav1.Condition
		previous       []metav1.Condition
		policy         metav1.Condition
		status, reason string
		since          metav1.Time
	}{
		{"not yet written", readyTrue, nil, policy(metav1.ConditionFalse, "Pending"), "False", "PolicyPending", now},
		{"still pending: the transition time stays", readyTrue,
			[]metav1.Condition{{Type: appsv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "PolicyPending", LastTransitionTime: then}},
			policy(metav1.ConditionFalse, "Pending"), "False", "PolicyPending", then},
		{"name taken", readyTrue, nil, policy(metav1.ConditionFalse, "NameTaken"), "False", "PolicyNameTaken", now},
		{"in force", readyTrue, nil, policy(metav1.ConditionTrue, "Compiled"), "True", "Injecting", then},
		{"routed to the webhook", readyTrue, nil, policy(metav1.ConditionFalse, "Unsupported"), "True", "Injecting", then},
		{"already not ready for another reason", metav1.Condition{Type: appsv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "StoppedByConflict", LastTransitionTime: then},
			nil, policy(metav1.ConditionFalse, "Pending"), "False", "StoppedByConflict", then},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conditions := []metav1.Condition{tc.ready}
			WithPolicy(&conditions, tc.previous, tc.policy)
			ready := meta.FindStatusCondition(conditions, appsv1alpha1.ConditionReady)
			if ready == nil || string(ready.Status) != tc.status || ready.Reason != tc.reason || !ready.LastTransitionTime.Equal(&tc.since) {
				t.Fatalf("Ready %+v; want %s %s since %v", ready, tc.status, tc.reason, tc.since)
			}
			if meta.FindStatusCondition(conditions, appsv1alpha1.ConditionPolicyCompiled) == nil {
				t.Fatal("no PolicyCompiled condition")
			}
		})
	}
}
