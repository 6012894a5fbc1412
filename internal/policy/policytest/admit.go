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
	o, err := podObjects()
	if err != nil {
		return nil, false, err
	}
	ns := withNameLabel(namespace)
	attr := podAttributes(pod, ns)
	matched, err := matches(attr, o, ns, policy, binding)
	if err != nil || !matched {
		return pod.DeepCopy(), false, err
	}
	p, err := Compile(policy)
	if err != nil {
		return nil, true, err
	}
	out, err := p.mutate(ctx, attr, o, ns)
	return out, true, err
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

// Program is a policy compiled as the plugin compiles it (its compilePolicy), once: its
// variables, its matchConditions and its JSON patch mutations.
type Program struct {
	name      string
	compiler  *plugincel.CompositedCompiler
	matcher   matchconditions.Matcher // nil without matchConditions
	mutations []patch.Patcher
	objects   admission.ObjectInterfaces
}

// podObjects are the object interfaces (conversion, defaulting) of a scheme of core/v1.
func podObjects() (admission.ObjectInterfaces, error) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return admission.NewObjectInterfacesFromScheme(scheme), nil
}

// Compile compiles policy in the API server's CEL environment, as the plugin does.
func Compile(policy *admissionregistrationv1.MutatingAdmissionPolicy) (*Program, error) {
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		return nil, err
	}
	opts := plugincel.OptionalVariableDeclarations{}
	// An expression the API server cannot compile (too long, ill-typed) is an error here, as
	// it is when the policy is written.
	var errs []error
	for _, v := range policy.Spec.Variables {
		if res := compiler.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, opts, environment.StoredExpressions); res.Error != nil {
			errs = append(errs, fmt.Errorf("variables %s: %w", v.Name, res.Error))
		}
	}
	objects, err := podObjects()
	if err != nil {
		return nil, err
	}
	p := &Program{name: policy.Name, compiler: compiler, objects: objects}
	if conditions := policy.Spec.MatchConditions; len(conditions) > 0 {
		accessors := make([]plugincel.ExpressionAccessor, len(conditions))
		for i := range conditions {
			accessors[i] = (*matchconditions.MatchCondition)(&conditions[i])
		}
		evaluator := compiler.CompileCondition(accessors, opts, environment.StoredExpressions)
		for _, err := range evaluator.CompilationErrors() {
			errs = append(errs, fmt.Errorf("matchConditions: %w", err))
		}
		p.matcher = matchconditions.NewMatcher(evaluator, policy.Spec.FailurePolicy, "policy", "mutate", policy.Name)
	}
	patchOpts := opts
	patchOpts.HasPatchTypes = true
	for i, m := range policy.Spec.Mutations {
		if m.PatchType != admissionregistrationv1.PatchTypeJSONPatch || m.JSONPatch == nil {
			return nil, fmt.Errorf("mutations[%d]: only JSONPatch mutations are run here", i)
		}
		evaluator := compiler.CompileMutatingEvaluator(&patch.JSONPatchCondition{Expression: m.JSONPatch.Expression}, patchOpts, environment.StoredExpressions)
		for _, err := range evaluator.CompilationErrors() {
			errs = append(errs, fmt.Errorf("mutations[%d]: %w", i, err))
		}
		p.mutations = append(p.mutations, patch.NewJSONPatcher(evaluator))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("policy %s: %w", policy.Name, errors.Join(errs...))
	}
	return p, nil
}

// Mutate applies the program's mutations to pod, created in namespace ns (which must hold its
// name as the label kubernetes.io/metadata.name), as the plugin does once the policy and its
// binding match: in order, when its matchConditions hold. It returns the pod as the policy
// leaves it; pod is not modified.
func (p *Program) Mutate(ctx context.Context, pod *corev1.Pod, ns *corev1.Namespace) (*corev1.Pod, error) {
	return p.mutate(ctx, podAttributes(pod, ns), p.objects, ns)
}

// podAttributes is the admission request that creates pod in ns.
func podAttributes(pod *corev1.Pod, ns *corev1.Namespace) admission.Attributes {
	return admission.NewAttributesRecord(pod.DeepCopy(), nil, corev1.SchemeGroupVersion.WithKind("Pod"), ns.Name, pod.Name,
		corev1.SchemeGroupVersion.WithResource("pods"), "", admission.Create, &metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "policytest"})
}

func (p *Program) mutate(ctx context.Context, attr admission.Attributes, o admission.ObjectInterfaces, ns *corev1.Namespace) (*corev1.Pod, error) {
	versioned, err := admission.NewVersionedAttributes(attr, attr.GetKind(), o)
	if err != nil {
		return nil, err
	}
	if err := p.apply(ctx, versioned, o, ns); err != nil {
		return nil, err
	}
	return podOf(versioned)
}

// apply runs the program on versioned as the plugin's dispatcher does: its matchConditions,
// then, when they hold, its mutations in order, each updating versioned.
func (p *Program) apply(ctx context.Context, versioned *admission.VersionedAttributes, o admission.ObjectInterfaces, ns *corev1.Namespace) error {
	ctx = p.compiler.CreateContext(ctx)
	if p.matcher != nil {
		if res := p.matcher.Match(ctx, versioned, nil, nil); res.Error != nil || !res.Matches {
			return res.Error
		}
	}
	for i, m := range p.mutations {
		out, err := m.Patch(ctx, patch.Request{MatchedResource: versioned.GetResource(), VersionedAttributes: versioned,
			ObjectInterfaces: o, Namespace: ns}, celconfig.RuntimeCELCostBudget)
		if err != nil {
			return fmt.Errorf("policy %s: mutations[%d]: %w", p.name, i, err)
		}
		versioned.UpdateObject(out)
	}
	return nil
}

// podOf is the pod the policies left.
func podOf(versioned *admission.VersionedAttributes) (*corev1.Pod, error) {
	if versioned.VersionedObject.Object() == nil {
		return nil, errors.New("the policies left no object")
	}
	out, ok := versioned.VersionedObject.Object().(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("the policies left a %T, not a Pod", versioned.VersionedObject.Object())
	}
	return out, nil
}

// Bound is a policy and one of its bindings.
type Bound struct {
	Policy  *admissionregistrationv1.MutatingAdmissionPolicy
	Binding *admissionregistrationv1.MutatingAdmissionPolicyBinding
}

// AdmitAll creates pod in namespace through several policies in the order given, as one
// request of the API server's plugin runs them: each that matches the pod as the ones before it
// left it applies to it, and all share the request's versioned attributes, so what one policy's
// evaluation leaves there (a pod read lazily once a matchCondition ran) holds for those after.
// It returns the pod as the last leaves it.
func AdmitAll(ctx context.Context, bound []Bound, pod *corev1.Pod, namespace *corev1.Namespace) (*corev1.Pod, error) {
	o, err := podObjects()
	if err != nil {
		return nil, err
	}
	ns := withNameLabel(namespace)
	versioned, err := admission.NewVersionedAttributes(podAttributes(pod, ns), corev1.SchemeGroupVersion.WithKind("Pod"), o)
	if err != nil {
		return nil, err
	}
	for _, b := range bound {
		matched, err := matches(versioned, o, ns, b.Policy, b.Binding)
		if err != nil {
			return nil, err
		}
		if !matched {
			continue
		}
		p, err := Compile(b.Policy)
		if err != nil {
			return nil, err
		}
		if err := p.apply(ctx, versioned, o, ns); err != nil {
			return nil, err
		}
	}
	return podOf(versioned)
}

// withNameLabel is a copy of namespace that holds its name as the label
// kubernetes.io/metadata.name, as the API server sets it.
func withNameLabel(namespace *corev1.Namespace) *corev1.Namespace {
	ns := namespace.DeepCopy()
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[corev1.LabelMetadataName] = ns.Name
	return ns
}
