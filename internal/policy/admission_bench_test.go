package policy_test

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/policy"
	"github.com/sidecarset/sidecarset-operator/internal/policy/policytest"
	"github.com/sidecarset/sidecarset-operator/test/builders"
)

// BenchmarkPolicyAdmission is the API server's work, in process, for one pod that a
// SidecarSet's policy injects (make bench-scale's bench set and pod): the policy as Compile
// renders it, and policy mode's floor (a policy applying the same patch as constants, reading
// nothing of the pod), each compiled once as the API server compiles it.
func BenchmarkPolicyAdmission(b *testing.B) {
	set, pod, ns := benchInputs()

	compiled, err := policy.Compile(set, nil, nil, policy.Options{Scope: inject.Scope{OperatorNamespace: "sidecarset-system"}})
	if err != nil || compiled.Unsupported != nil {
		b.Fatalf("compiling the bench set: %v %v", err, compiled.Unsupported)
	}
	engineSet, err := inject.Compile(set)
	if err != nil {
		b.Fatal(err)
	}
	res, err := inject.Apply(inject.Input{Pod: pod, Sets: []*inject.CompiledSet{engineSet}})
	if err != nil || len(res.Injected) != 1 {
		b.Fatalf("the engine does not inject the bench pod: %v %v", err, res.Skipped)
	}
	floor, err := policy.ConstantPatch(res.Patch())
	if err != nil {
		b.Fatal(err)
	}
	floorPolicy := compiled.Policy.DeepCopy()
	floorPolicy.Spec.Variables = nil
	floorPolicy.Spec.Mutations[0].JSONPatch.Expression = floor
	lazy, err := policy.Compile(set, nil, nil, policy.Options{Scope: inject.Scope{OperatorNamespace: "sidecarset-system"}, LazyPod: true})
	if err != nil || len(lazy.Policy.Spec.MatchConditions) == 0 {
		b.Fatalf("compiling the bench set for a lazily read pod: %v", err)
	}

	for _, way := range []struct {
		name   string
		policy *admissionregistrationv1.MutatingAdmissionPolicy
	}{{"policy", compiled.Policy}, {"policy-lazy", lazy.Policy}, {"floor", floorPolicy}} {
		p, err := policytest.Compile(way.policy)
		if err != nil {
			b.Fatal(err)
		}
		out, err := p.Mutate(b.Context(), pod, ns)
		if err != nil || len(out.Spec.Containers) != 2 || out.Annotations[appsv1alpha1.StatusAnnotation] == "" {
			b.Fatalf("%s does not inject the bench pod: %v", way.name, err)
		}
		b.Run(way.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Mutate(b.Context(), pod, ns); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchInputs are make bench-scale's bench set, a pod it selects, and the pod's namespace.
func benchInputs() (*appsv1alpha1.SidecarSet, *corev1.Pod, *corev1.Namespace) {
	set := builders.SidecarSet("bench", builders.Selecting("throughput"),
		builders.WithContainers(corev1.Container{Name: "bench-agent", Image: "registry.example/agent:1.0"}))
	pod := builders.Pod("bench", "pod", builders.WithLabels(map[string]string{"app": "throughput", appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue}),
		builders.WithSpec(builders.KwokPodSpec()))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench", Labels: map[string]string{corev1.LabelMetadataName: "bench"}}}
	return set, pod, ns
}
