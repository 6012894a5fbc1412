package policy_test

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/inject/injecttest"
	"github.com/sidecarset/sidecarset-operator/internal/policy"
	"github.com/sidecarset/sidecarset-operator/internal/policy/policytest"
)

// TestConstantPatchInjectsWhatTheEngineDoes: for every engine golden case the webhook answers
// with adds alone, a policy applying ConstantPatch of that patch makes of the pod what the
// engine makes of it, run by the API server's own policy code. It is the floor policy mode is
// measured against, so it must be the same injection.
func TestConstantPatchInjectsWhatTheEngineDoes(t *testing.T) {
	checked := 0
	for _, c := range injecttest.LoadCases(t, casesDir) {
		res, err := inject.Apply(c.Input(t))
		if err != nil || !res.Changed() || len(res.Injected) == 0 {
			continue // refused, or nothing injected: no patch to apply
		}
		ops := res.Patch()
		expr, err := policy.ConstantPatch(ops)
		if err != nil {
			continue // a patch that removes or replaces: not a constant injection
		}
		t.Run(c.Name, func(t *testing.T) {
			checked++
			fail := admissionregistrationv1.Fail
			pol := &admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "floor"},
				Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
					MatchConstraints: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{}, ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
						RuleWithOperations: admissionregistrationv1.RuleWithOperations{
							Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
							Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
						}}}},
					Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeJSONPatch,
						JSONPatch: &admissionregistrationv1.JSONPatch{Expression: expr}}},
					FailurePolicy: &fail, ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
				}}
			binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "floor"},
				Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "floor"}}
			ns := c.Namespace
			if ns == nil {
				ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.Pod.Namespace}}
			}
			out, matched, err := policytest.Admit(t.Context(), pol, binding, c.Pod, ns)
			if err != nil || !matched {
				t.Fatalf("the floor policy did not apply (matched %v): %v\n%s", matched, err, expr)
			}
			if want := res.Pod(); !apiequality.Semantic.DeepEqual(want, out) {
				t.Errorf("the floor policy makes another pod than the engine:\n%s", injecttest.YAMLDiff(mustYAML(t, want), mustYAML(t, out)))
			}
		})
	}
	if checked < 10 {
		t.Fatalf("only %d golden cases inject by adds alone: the floor is checked on too few", checked)
	}
}

func mustYAML(t *testing.T, v any) []byte {
	t.Helper()
	out, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
