package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset-operator/internal/policy"
	"github.com/sidecarset/sidecarset-operator/test/testutil"
)

// policyInjects returns a condition: a pod of app, which only the policies see, gets the
// sidecar of agentSet(app, app).
func policyInjects(t *testing.T, app string) func() (bool, string) {
	pod := appPod(newNamespace(t, nil), "by-policy", app, true)
	pod.Labels[noWebhookLabel] = "true"
	return func() (bool, string) {
		got, err := dryRun(t, pod)
		if err != nil {
			return false, err.Error()
		}
		names := containerNames(got.Spec.Containers)
		return cmp.Equal(names, []string{"app", app + "-agent"}), fmt.Sprintf("containers %v", names)
	}
}

// TestPolicyReconcilerRestoresHandEdits: what is stored is compared with what was rendered, so
// a policy edited by hand (a matchCondition that turns it off, failurePolicy Ignore) and a
// binding edited by hand are put back as rendered, and the set's pods are injected again.
func TestPolicyReconcilerRestoresHandEdits(t *testing.T) {
	needsKubernetes(t, policyModeMinor, "policy mode (MutatingAdmissionPolicy v1)")
	startPolicyReconciler(t)
	registerPolicyModeWebhook(t)
	set := createSet(t, agentSet("policy-edit", "policy-edit"))
	injects := policyInjects(t, "policy-edit")
	eventually(t, "the policy to inject the pod", injects)

	// The operator writes both objects too (it renders them): Edit reads again on a conflict.
	var p admissionregistrationv1.MutatingAdmissionPolicy
	p.Name = policy.Name(set.Name)
	var rendered *admissionregistrationv1.MutatingAdmissionPolicySpec
	must(t, testutil.Edit(ctx, k8s, &p, func(cur *admissionregistrationv1.MutatingAdmissionPolicy) {
		rendered = cur.Spec.DeepCopy()
		ignore := admissionregistrationv1.Ignore
		cur.Spec.FailurePolicy = &ignore
		cur.Spec.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "off", Expression: "false"}}
	}))
	var b admissionregistrationv1.MutatingAdmissionPolicyBinding
	b.Name = policy.Name(set.Name)
	must(t, testutil.Edit(ctx, k8s, &b, func(cur *admissionregistrationv1.MutatingAdmissionPolicyBinding) {
		cur.Spec.MatchResources.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "elsewhere"}}
	}))

	eventually(t, "the hand-edited policy and binding to be restored", func() (bool, string) {
		must(t, k8s.Get(ctx, client.ObjectKey{Name: policy.Name(set.Name)}, &p))
		if diff := cmp.Diff(rendered, &p.Spec); diff != "" {
			return false, "policy (-rendered +stored):\n" + diff
		}
		must(t, k8s.Get(ctx, client.ObjectKey{Name: policy.Name(set.Name)}, &b))
		if got := b.Spec.MatchResources.ObjectSelector.MatchLabels["app"]; got != "policy-edit" {
			return false, "binding selects app=" + got
		}
		return injects()
	})
}

// foreignPatch is the mutation of a policy the operator did not render: it changes nothing.
const foreignPatch = `[JSONPatch{op: "add", path: "/metadata/labels/foreign", value: "yes"}].filter(p, false)`

// TestPolicyReconcilerLeavesForeignObjectsAlone: a MutatingAdmissionPolicy named as a set's
// policy that the operator did not render is neither overwritten nor taken over; the set's
// state names it, other sets' policies are still written, and once the object is gone the
// set's own policy is.
func TestPolicyReconcilerLeavesForeignObjectsAlone(t *testing.T) {
	needsKubernetes(t, policyModeMinor, "policy mode (MutatingAdmissionPolicy v1)")
	foreign := &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name("policy-foreign"), Labels: map[string]string{"team": "platform"}},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				},
			}}},
			Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeJSONPatch,
				JSONPatch: &admissionregistrationv1.JSONPatch{Expression: foreignPatch}}},
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
		},
	}
	must(t, k8s.Create(ctx, foreign))
	t.Cleanup(func() { deleteIgnoreNotFound(t, foreign) })
	states := startPolicyReconciler(t)
	registerPolicyModeWebhook(t)
	blocked := createSet(t, agentSet("policy-foreign", "policy-foreign"))
	createSet(t, agentSet("policy-later", "policy-later"))

	eventually(t, "the other set's policy to inject its pod", policyInjects(t, "policy-later"))
	eventually(t, "the blocked set's state to name the object", func() (bool, string) {
		st, ok := states.Get(blocked.Name)
		return ok && strings.Contains(st.Blocked, "MutatingAdmissionPolicy "+foreign.Name), fmt.Sprintf("state %+v", st)
	})
	var stored admissionregistrationv1.MutatingAdmissionPolicy
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(foreign), &stored))
	if len(stored.OwnerReferences) > 0 || stored.Labels[policy.ManagedByLabel] != "" ||
		stored.Spec.Mutations[0].JSONPatch.Expression != foreignPatch {
		t.Errorf("the foreign policy was changed: owners %v, labels %v, mutation %s", stored.OwnerReferences, stored.Labels,
			stored.Spec.Mutations[0].JSONPatch.Expression)
	}
	var binding admissionregistrationv1.MutatingAdmissionPolicyBinding
	if err := k8s.Get(ctx, client.ObjectKey{Name: policy.Name(blocked.Name)}, &binding); !apierrors.IsNotFound(err) {
		t.Errorf("a binding was written for the foreign policy: %v", err)
	}

	// The object carries none of the operator's labels: its deletion is found by the retry.
	injects := policyInjects(t, blocked.Name)
	must(t, k8s.Delete(ctx, foreign))
	eventually(t, "the set's own policy once the name is free", injects)
	if st, _ := states.Get(blocked.Name); st.Blocked != "" {
		t.Errorf("the state still says blocked: %s", st.Blocked)
	}
}
