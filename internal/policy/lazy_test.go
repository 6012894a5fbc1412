package policy_test

import (
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject/injecttest"
	"github.com/sidecarset/sidecarset-operator/internal/policy"
	"github.com/sidecarset/sidecarset-operator/internal/policy/policytest"
)

// TestLazyPodInjectsTheSame runs the policies of every engine golden case, with the API
// server's code (1.37's, which reads the pod lazily for a policy with matchConditions), as
// rendered for a lazily read pod and as rendered for older API servers: each set's policy, in
// the order of the set names, on the pod the one before it left. Both renderings must leave the
// same pod, or fail alike. A set that copies values of the pod's into its sidecars is rendered
// without a matchCondition: a lazily read pod's lists hold Go structs a patch cannot carry.
func TestLazyPodInjectsTheSame(t *testing.T) {
	lazyRenderings := 0
	for _, c := range injecttest.LoadCases(t, casesDir) {
		t.Run(c.Name, func(t *testing.T) {
			ns := c.Namespace
			if ns == nil {
				ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.Pod.Namespace}}
			}
			render := func(lazy bool) []policytest.Bound {
				opts := goldenOptions
				opts.LazyPod = lazy
				var bound []policytest.Bound
				for _, set := range c.Sets {
					compiled, err := policy.Compile(set, c.Sets, nil, opts)
					if err != nil {
						t.Fatalf("%s: %v", set.Name, err)
					}
					if conditions := len(compiled.Policy.Spec.MatchConditions) > 0; conditions && lazy {
						lazyRenderings++
					} else if conditions {
						t.Fatalf("%s: rendered for an API server that reads the whole pod, the policy has matchConditions", set.Name)
					}
					bound = append(bound, policytest.Bound{Policy: compiled.Policy, Binding: compiled.Binding})
				}
				return bound
			}
			whole := render(false)
			want, wantErr := policytest.AdmitAll(t.Context(), whole, c.Pod, ns)
			// The API server runs policies in no set order: the sets' in both directions.
			reversed := render(true)
			slices.Reverse(reversed)
			for _, bound := range [][]policytest.Bound{render(true), reversed} {
				got, err := policytest.AdmitAll(t.Context(), bound, c.Pod, ns)
				switch {
				case (wantErr == nil) != (err == nil):
					t.Fatalf("one rendering fails: whole pod %v, lazily read pod %v", wantErr, err)
				case wantErr != nil && wantErr.Error() != err.Error():
					t.Errorf("the renderings fail differently:\n  whole pod:       %v\n  lazily read pod: %v", wantErr, err)
				case wantErr == nil && !apiequality.Semantic.DeepEqual(want, got):
					t.Errorf("the renderings leave different pods (-whole pod +lazily read pod):\n%s",
						injecttest.YAMLDiff(mustYAML(t, want), mustYAML(t, got)))
				}
			}
		})
	}
	if lazyRenderings < 20 {
		t.Fatalf("only %d policies were rendered for a lazily read pod: too few to tell", lazyRenderings)
	}
}

func TestReadsPodLazily(t *testing.T) {
	for _, tt := range []struct {
		gitVersion string
		want       bool
	}{
		{"v1.37.0", true},
		{"v1.37.2-eks-1a2b3c", true},
		{"v1.38.0-alpha.1", true},
		{"v2.0.0", true},
		{"v1.36.3", false},
		{"v1.36.99+k3s1", false},
		{"v1.32.0", false},
		{"", false},
		{"not a version", false},
	} {
		if got := policy.ReadsPodLazily(tt.gitVersion); got != tt.want {
			t.Errorf("ReadsPodLazily(%q) = %t, want %t", tt.gitVersion, got, tt.want)
		}
	}
}

// TestLargestSetCompiles: the policy of the largest SidecarSet the CRD allows, beside 100 other
// sets, is accepted by the API server's CEL compiler (an expression of at most 100,000
// characters, variables included), in both renderings, and injects a pod on its own; so is that
// of the same set copying nothing from the pod, which has the matchCondition of a lazily read
// pod. test/integration's TestPolicyOfTheLargestSetInjects writes it to an API server.
func TestLargestSetCompiles(t *testing.T) {
	copying := policytest.LargestSet("large", "large")
	plain := copying.DeepCopy()
	for _, list := range [][]appsv1alpha1.SidecarContainer{plain.Spec.Containers, plain.Spec.InitContainers} {
		for i := range list {
			list[i].TransferEnv, list[i].ShareVolumePolicy = nil, appsv1alpha1.ShareVolumePolicy{}
		}
	}
	others := policytest.ManyOthers(100)
	for _, tt := range []struct {
		name string
		set  *appsv1alpha1.SidecarSet
		lazy bool
		// conditions: the rendering has the not-routed matchCondition.
		conditions bool
	}{
		{"copying", copying, false, false},
		{"copying, lazily read pod", copying, true, false},
		{"plain", plain, false, false},
		{"plain, lazily read pod", plain, true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			opts := goldenOptions
			opts.LazyPod = tt.lazy
			compiled, err := policy.Compile(tt.set, others, nil, opts)
			if err != nil || compiled.Unsupported != nil {
				t.Fatalf("Compile: %v, unsupported: %v", err, compiled.Unsupported)
			}
			if got := len(compiled.Policy.Spec.MatchConditions) > 0; got != tt.conditions {
				t.Errorf("the policy has matchConditions: %t, want %t", got, tt.conditions)
			}
			p, err := policytest.Compile(compiled.Policy)
			if err != nil {
				t.Fatal(err)
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "large", Labels: map[string]string{"app": "large"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
			policytest.AddAppValues(pod, policy.MaxSharedMounts)
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", Labels: map[string]string{corev1.LabelMetadataName: "default"}}}
			out, err := p.Mutate(t.Context(), pod, ns)
			if err != nil {
				t.Fatalf("the API server refuses the pod: %v", err)
			}
			if len(out.Spec.Containers) != 33 || len(out.Spec.InitContainers) != 32 || len(out.Spec.ImagePullSecrets) != 16 {
				t.Errorf("%d containers, %d init containers, %d pull secrets; want 33, 32, 16", len(out.Spec.Containers),
					len(out.Spec.InitContainers), len(out.Spec.ImagePullSecrets))
			}
		})
	}
}

func TestMayMutatePodCreation(t *testing.T) {
	rule := func(groups, resources []string, ops ...admissionregistrationv1.OperationType) admissionregistrationv1.NamedRuleWithOperations {
		return admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: ops, Rule: admissionregistrationv1.Rule{APIGroups: groups, APIVersions: []string{"*"}, Resources: resources}}}
	}
	create, update, all := admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.OperationAll
	for _, tt := range []struct {
		name  string
		rules []admissionregistrationv1.NamedRuleWithOperations
		want  bool
	}{
		{"pods on create", []admissionregistrationv1.NamedRuleWithOperations{rule([]string{""}, []string{"pods"}, create)}, true},
		{"every operation", []admissionregistrationv1.NamedRuleWithOperations{rule([]string{""}, []string{"pods"}, all)}, true},
		{"every resource", []admissionregistrationv1.NamedRuleWithOperations{rule([]string{"*"}, []string{"*"}, create)}, true},
		{"every resource and subresource", []admissionregistrationv1.NamedRuleWithOperations{rule([]string{""}, []string{"*/*"}, create)}, true},
		{"a later rule", []admissionregistrationv1.NamedRuleWithOperations{
			rule([]string{"apps"}, []string{"deployments"}, create), rule([]string{""}, []string{"pods", "services"}, update, create)}, true},
		{"pods on update", []admissionregistrationv1.NamedRuleWithOperations{rule([]string{""}, []string{"pods"}, update)}, false},
		{"pods and every subresource", []admissionregistrationv1.NamedRuleWithOperations{rule([]string{""}, []string{"pods/*"}, create)}, true},
		{"one subresource", []admissionregistrationv1.NamedRuleWithOperations{rule([]string{""}, []string{"pods/status", "pods/ephemeralcontainers"}, create)}, false},
		{"every resource's status", []admissionregistrationv1.NamedRuleWithOperations{rule([]string{""}, []string{"*/status"}, create)}, false},
		{"another group", []admissionregistrationv1.NamedRuleWithOperations{rule([]string{"apps"}, []string{"pods"}, create)}, false},
		{"no rules", nil, false},
	} {
		p := &admissionregistrationv1.MutatingAdmissionPolicy{Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: tt.rules}}}
		if got := policy.MayMutatePodCreation(p); got != tt.want {
			t.Errorf("%s: MayMutatePodCreation = %t, want %t", tt.name, got, tt.want)
		}
	}
}

// TestLazyReadingIsTheRequests is why no policy of the operator's has a matchCondition while
// another party's policy may mutate pods (controllers.PolicyReconciler): with the API server's
// code, a set's policy rendered for a lazily read pod, run before a policy that writes the pod's
// containers back, makes that policy fail; rendered for a pod read whole, it does not. Should
// the API server's lazy reading learn to give a patch the pod's own lists, this fails, and the
// reconciler's check can go.
func TestLazyReadingIsTheRequests(t *testing.T) {
	set := plainSet("plain")
	fail := admissionregistrationv1.Fail
	foreign := policytest.Bound{
		Policy: &admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "team-containers-rewrite"},
			Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
				MatchConstraints: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{},
					ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
					}}}},
				Mutations: []admissionregistrationv1.Mutation{{PatchType: admissionregistrationv1.PatchTypeJSONPatch,
					JSONPatch: &admissionregistrationv1.JSONPatch{Expression: `[JSONPatch{op: "replace", path: "/spec/containers", value: object.spec.containers}]`}}},
				FailurePolicy: &fail, ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
			}},
		Binding: &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "team-containers-rewrite"},
			Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "team-containers-rewrite"}},
	}
	pod := recordPod(set)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pod.Namespace}}
	for _, lazy := range []bool{false, true} {
		opts := goldenOptions
		opts.LazyPod = lazy
		compiled, err := policy.Compile(set, nil, nil, opts)
		if err != nil {
			t.Fatal(err)
		}
		ours := policytest.Bound{Policy: compiled.Policy, Binding: compiled.Binding}
		if _, err := policytest.AdmitAll(t.Context(), []policytest.Bound{foreign}, pod, ns); err != nil {
			t.Fatalf("the other policy fails alone: %v", err)
		}
		out, err := policytest.AdmitAll(t.Context(), []policytest.Bound{ours, foreign}, pod, ns)
		switch {
		case !lazy && err != nil:
			t.Errorf("with the pod read whole, the other policy fails after the set's: %v", err)
		case !lazy && len(out.Spec.Containers) != 2:
			t.Errorf("with the pod read whole, %d containers, want the app and the sidecar", len(out.Spec.Containers))
		case lazy && (err == nil || !strings.Contains(err.Error(), "team-containers-rewrite") || !strings.Contains(err.Error(), "could not marshal to JSON")):
			t.Errorf("with the pod read lazily, the other policy after the set's gives %v, want it to fail", err)
		}
	}
}
