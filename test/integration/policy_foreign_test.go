package integration

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset-operator/internal/policy"
)

// lazyPodMinor is the first Kubernetes minor version whose API server reads the pod lazily for
// a policy with matchConditions (policy.ReadsPodLazily).
const lazyPodMinor = 37

// TestPolicyModeReadsThePodWholeBesideForeignPolicies: where the API server reads the pod
// lazily for a policy with matchConditions, a set's policy has the not-routed matchCondition
// while every MutatingAdmissionPolicy that may mutate pods is the operator's. Once a policy of
// another party's mutates the same pods (here one that writes the pod's containers back, Go
// structs a lazily read pod cannot give a patch), the set's policy is rendered without it, and
// a pod both select is created with the sidecar and through the other policy; once that policy
// goes, the matchCondition comes back.
func TestPolicyModeReadsThePodWholeBesideForeignPolicies(t *testing.T) {
	needsKubernetes(t, lazyPodMinor, "a lazily read pod")
	startPolicyReconciler(t)
	registerPolicyModeWebhook(t)
	set := createSet(t, agentSet("policy-foreign", "policy-foreign"))
	conditions := func(want bool) {
		t.Helper()
		eventually(t, fmt.Sprintf("the set's policy to have matchConditions: %t", want), func() (bool, string) {
			var p admissionregistrationv1.MutatingAdmissionPolicy
			if err := k8s.Get(ctx, client.ObjectKey{Name: policy.Name(set.Name)}, &p); err != nil {
				return false, err.Error()
			}
			return (len(p.Spec.MatchConditions) > 0) == want, fmt.Sprintf("matchConditions %v", p.Spec.MatchConditions)
		})
	}
	conditions(true)

	fail := admissionregistrationv1.Fail
	foreign := &admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "team-containers-rewrite"},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
				}}}},
			Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeJSONPatch,
				JSONPatch: &admissionregistrationv1.JSONPatch{Expression: `[JSONPatch{op: "replace", path: "/spec/containers", value: object.spec.containers},` +
					` JSONPatch{op: "add", path: "/metadata/labels/rewritten", value: "true"}]`}}},
			FailurePolicy: &fail, ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
		}}
	binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: foreign.Name},
		Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: foreign.Name, MatchResources: &admissionregistrationv1.MatchResources{
			ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "policy-foreign"}}}}}
	must(t, k8s.Create(ctx, foreign))
	t.Cleanup(func() { deleteIgnoreNotFound(t, foreign) })
	must(t, k8s.Create(ctx, binding))
	t.Cleanup(func() { deleteIgnoreNotFound(t, binding) })
	conditions(false)

	pod := appPod(newNamespace(t, nil), "both", "policy-foreign", true)
	pod.Labels[noWebhookLabel] = "true"
	eventually(t, "both policies to mutate the pod", func() (bool, string) {
		got := create(t, pod)
		if got.Pod == nil {
			return false, "refused: " + got.Error
		}
		names := containerNames(got.Pod.Spec.Containers)
		return cmp.Equal(names, []string{"app", "policy-foreign-agent"}) && got.Pod.Labels["rewritten"] == "true",
			fmt.Sprintf("containers %v, labels %v", names, got.Pod.Labels)
	})

	must(t, k8s.Delete(ctx, foreign))
	conditions(true)
}
