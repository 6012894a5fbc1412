// Package policytest runs rendered MutatingAdmissionPolicies in process, with the API server's
// own admission code, for tests that must know what a policy does to a pod without a control
// plane: which pods its binding lets it see, and what its mutations make of them.
package policytest

import (
	"context"
	"errors"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Admit creates pod in namespace through one policy and its binding as the API server's
// MutatingAdmissionPolicy plugin does: the policy's matchConstraints and the binding's
// matchResources are matched by the API server's matcher (selectors against the namespace's
// labels, which always hold its name as kubernetes.io/metadata.name, and the pod's labels),
// the policy's variables, matchConditions and JSON patch mutations are compiled in the API
// server's CEL environment and evaluated in order. It returns the pod as the policy leaves it
// and whether the policy applied to it at all (matched); a policy that does not apply leaves
// the pod unchanged. Neither input is modified. What the real plugin adds around this
// (authorizer checks, parameters, reinvocation, the built-in admission plugins' defaulting)
// is not run; an ApplyConfiguration mutation is an error.
func Admit(ctx context.Context, policy *admissionregistrationv1.MutatingAdmissionPolicy, binding *admissionregistrationv1.MutatingAdmissionPolicyBinding,
	pod *corev1.Pod, namespace *corev1.Namespace) (*corev1.Pod, bool, error) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, false, err
	}
	o := admission.NewObjectInterfacesFromScheme(scheme)
	ns := namespace.DeepCopy()
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[corev1.LabelMetadataName] = ns.Name // as the API server sets it
	attr := admission.NewAttributesRecord(pod.DeepCopy(), nil, corev1.SchemeGroupVersion.WithKind("Pod"), ns.Name, pod.Name,
		corev1.SchemeGroupVersion.WithResource("pods"), "", admission.Create, &metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "policytest"})

	matched, err := matches(attr, o, ns, policy, binding)
	if err != nil || !matched {
		return pod.DeepCopy(), false, err
	}
	versioned, err := admission.NewVersionedAttributes(attr, attr.GetKind(), o)
	if err != nil {
		return nil, true, err
	}
	if err := mutate(ctx, policy, versioned, o, ns); err != nil {
		return nil, true, err
	}
	out, ok := versioned.VersionedObject.Object().(*corev1.Pod)
	if !ok {
		return nil, true, fmt.Errorf("the policy left a %T, not a Pod", versioned.VersionedObject.Object())
	}
	return out, true, nil
}

// matches asks the API server's matcher whether both the policy and its binding select the
// request, the namespace read from a lister that holds ns alone.
func matches(attr admission.Attributes, o admission.ObjectInterfaces, ns *corev1.Namespace,
	policy *admissionregistrationv1.MutatingAdmissionPolicy, binding *admissionregistrationv1.MutatingAdmissionPolicyBinding) (bool, error) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := indexer.Add(ns); err != nil {
		return false, err
	}
	matcher := generic.NewPolicyMatcher(matching.NewMatcher(listersv1.NewNamespaceLister(indexer), nil))
	ok, _, _, err := matcher.DefinitionMatches(attr, o, mutating.NewMutatingAdmissionPolicyAccessor(policy))
	if err != nil || !ok {
		return false, err
	}
	return matcher.BindingMatches(attr, o, mutating.NewMutatingAdmissionPolicyBindingAccessor(binding))
}

// mutate compiles the policy as the plugin does (its compilePolicy) and applies its
// mutations in order, when its matchConditions hold.
func mutate(ctx context.Context, policy *admissionregistrationv1.MutatingAdmissionPolicy, versioned *admission.VersionedAttributes,
	o admission.ObjectInterfaces, ns *corev1.Namespace) error {
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		return err
	}
	opts := plugincel.OptionalVariableDeclarations{}
	variables := make([]plugincel.NamedExpressionAccessor, len(policy.Spec.Variables))
	for i, v := range policy.Spec.Variables {
		variables[i] = &validating.Variable{Name: v.Name, Expression: v.Expression}
	}
	compiler.CompileAndStoreVariables(variables, opts, environment.StoredExpressions)
	ctx = compiler.CreateContext(ctx)
	if conditions := policy.Spec.MatchConditions; len(conditions) > 0 {
		accessors := make([]plugincel.ExpressionAccessor, len(conditions))
		for i := range conditions {
			accessors[i] = (*matchconditions.MatchCondition)(&conditions[i])
		}
		m := matchconditions.NewMatcher(compiler.CompileCondition(accessors, opts, environment.StoredExpressions), policy.Spec.FailurePolicy, "policy", "mutate", policy.Name)
		if res := m.Match(ctx, versioned, nil, nil); res.Error != nil || !res.Matches {
			return res.Error
		}
	}
	patchOpts := opts
	patchOpts.HasPatchTypes = true
	for i, m := range policy.Spec.Mutations {
		if m.PatchType != admissionregistrationv1.PatchTypeJSONPatch || m.JSONPatch == nil {
			return fmt.Errorf("mutations[%d]: only JSONPatch mutations are run here", i)
		}
		patcher := patch.NewJSONPatcher(compiler.CompileMutatingEvaluator(&patch.JSONPatchCondition{Expression: m.JSONPatch.Expression},
			patchOpts, environment.StoredExpressions))
		out, err := patcher.Patch(ctx, patch.Request{MatchedResource: versioned.GetResource(), VersionedAttributes: versioned,
			ObjectInterfaces: o, Namespace: ns}, celconfig.RuntimeCELCostBudget)
		if err != nil {
			return fmt.Errorf("mutations[%d]: %w", i, err)
		}
		versioned.UpdateObject(out)
	}
	if versioned.VersionedObject.Object() == nil {
		return errors.New("the policy left no object")
	}
	return nil
}
