package policy_test

import (
	"os"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/apis/core"
	_ "k8s.io/kubernetes/pkg/apis/core/install" // the internal pod and its conversions, as the API server has them
	"sigs.k8s.io/yaml"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/policy"
	"github.com/sidecarset/sidecarset-operator/internal/policy/policytest"
)

// BenchmarkWebhookRouting is what the API server does in policy mode, for each opted-in pod a
// policy injected (not routed), to decide whether to call the pod webhook, with the API
// server's own code, in process:
//
//   - matchCondition: the registration of config/components/policy-mode, a matchCondition on
//     the route marks. The webhook plugin converts the pod from the API server's internal form
//     to v1 for it (a conversion of its own: the policy plugin's is not shared; another webhook
//     called for the pod would share it) and evaluates it.
//   - matchCondition-0.1.0: the same with 0.1.0's condition, on the annotation alone.
//   - label-objectSelector: a registration whose objectSelector requires the route label as
//     well as the opt-in label: a lookup in the pod's labels, what the policies' route label
//     allows once no policy of 0.1.0's (which marks the annotation alone) can be running.
func BenchmarkWebhookRouting(b *testing.B) {
	set, pod, ns := benchInputs()
	compiled, err := policy.Compile(set, nil, nil, policy.Options{Scope: inject.Scope{OperatorNamespace: "sidecarset-system"}, LazyPod: true})
	if err != nil {
		b.Fatal(err)
	}
	program, err := policytest.Compile(compiled.Policy)
	if err != nil {
		b.Fatal(err)
	}
	// The pod as the webhook plugin sees it: injected by the policy, in internal form.
	injected, err := program.Mutate(b.Context(), pod, ns)
	if err != nil || len(injected.Spec.Containers) != 2 {
		b.Fatalf("the policy does not inject the bench pod: %v", err)
	}
	internal := &core.Pod{}
	if err := legacyscheme.Scheme.Convert(injected, internal, nil); err != nil {
		b.Fatal(err)
	}
	objects := admission.NewObjectInterfacesFromScheme(legacyscheme.Scheme)
	podKind := corev1.SchemeGroupVersion.WithKind("Pod")
	attr := admission.NewAttributesRecord(internal, nil, podKind, ns.Name, pod.Name, corev1.SchemeGroupVersion.WithResource("pods"), "",
		admission.Create, &metav1.CreateOptions{}, false, &user.DefaultInfo{Name: "bench"})

	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		b.Fatal(err)
	}
	condition := func(expression string) plugincel.ConditionEvaluator {
		evaluator := compiler.CompileCondition([]plugincel.ExpressionAccessor{&matchconditions.MatchCondition{Name: "c", Expression: expression}},
			plugincel.OptionalVariableDeclarations{HasAuthorizer: true}, environment.StoredExpressions)
		if errs := evaluator.CompilationErrors(); len(errs) > 0 {
			b.Fatal(errs)
		}
		return evaluator
	}
	selector := func(sel *metav1.LabelSelector) labels.Selector {
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	optedIn := &metav1.LabelSelector{MatchLabels: map[string]string{appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue}}
	routed := optedIn.DeepCopy()
	routed.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: appsv1alpha1.WebhookRouteLabel, Operator: metav1.LabelSelectorOpExists}}
	oldRegistration, newRegistration := selector(optedIn), selector(routed)
	routedByMark := matchconditions.NewMatcher(condition(routeMatchCondition(b)), nil, "webhook", "admit", "inject.sidecarset.io")
	routedByAnnotation := matchconditions.NewMatcher(condition(`has(object.metadata.annotations) && "sidecarset.io/webhook" in object.metadata.annotations`),
		nil, "webhook", "admit", "inject.sidecarset.io")
	podLabels := func() labels.Set {
		m, err := meta.Accessor(attr.GetObject())
		if err != nil {
			b.Fatal(err)
		}
		return labels.Set(m.GetLabels())
	}

	for _, way := range []struct {
		name    string
		matcher matchconditions.Matcher
	}{{"matchCondition", routedByMark}, {"matchCondition-0.1.0", routedByAnnotation}} {
		b.Run(way.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !oldRegistration.Matches(podLabels()) {
					b.Fatal("the opted-in pod does not match the registration")
				}
				versioned, err := admission.NewVersionedAttributes(attr, podKind, objects)
				if err != nil {
					b.Fatal(err)
				}
				if res := way.matcher.Match(b.Context(), versioned, nil, nil); res.Error != nil || res.Matches {
					b.Fatalf("the matchCondition: matches %t, %v", res.Matches, res.Error)
				}
			}
		})
	}
	b.Run("label-objectSelector", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if newRegistration.Matches(podLabels()) {
				b.Fatal("a pod without the route label matches the registration")
			}
		}
	})
}

// routeMatchCondition is the expression of the matchCondition config/components/policy-mode
// gives the pod webhook.
func routeMatchCondition(b *testing.B) string {
	raw, err := os.ReadFile("../../config/components/policy-mode/pod_webhook_route_patch.yaml")
	if err != nil {
		b.Fatal(err)
	}
	var ops []struct {
		Value []admissionregistrationv1.MatchCondition `json:"value"`
	}
	if err := yaml.Unmarshal(raw, &ops); err != nil {
		b.Fatal(err)
	}
	if len(ops) != 1 || len(ops[0].Value) != 1 {
		b.Fatalf("the policy-mode webhook patch holds %d operations, want one matchCondition", len(ops))
	}
	return ops[0].Value[0].Expression
}
