package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// withPolicy gives the set's first container (log-agent) a resourcesPolicy with these limit
// expressions instead of its fixed resources.
func withPolicy(limits map[corev1.ResourceName]appsv1alpha1.ResourceExpression) func(*appsv1alpha1.SidecarSet) {
	return func(s *appsv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
		s.Spec.Containers[0].ResourcesPolicy = &appsv1alpha1.ResourcesPolicy{ResourcesExpr: appsv1alpha1.ResourcesExpr{Limits: limits}}
	}
}

func TestValidateResourcesPolicy(t *testing.T) {
	limitsPath := "spec.containers[0].resourcesPolicy.resourcesExpr.limits"
	runCases(t, []validationCase{
		{name: "Kruise-like expressions", mutate: withPolicy(map[corev1.ResourceName]appsv1alpha1.ResourceExpression{
			corev1.ResourceCPU: "max(cpu * 0.5, quantity('50m'))", corev1.ResourceMemory: "min(memory / 2.0, quantity('1Gi'), quantity('2Gi')) + 1.0",
		})},
		{name: "an expression that does not parse", mutate: withPolicy(map[corev1.ResourceName]appsv1alpha1.ResourceExpression{
			corev1.ResourceCPU: "max(cpu * 0.5, ",
		}), want: []wantErr{{limitsPath + "[cpu]", field.ErrorTypeInvalid}}, detail: "Syntax error"},
		{name: "an int mixed with a double", mutate: withPolicy(map[corev1.ResourceName]appsv1alpha1.ResourceExpression{
			corev1.ResourceCPU: "cpu * 2",
		}), want: []wantErr{{limitsPath + "[cpu]", field.ErrorTypeInvalid}}, detail: "write 2.0, not 2"},
		{name: "the other resource's variable", mutate: withPolicy(map[corev1.ResourceName]appsv1alpha1.ResourceExpression{
			corev1.ResourceCPU: "memory * 0.5",
		}), want: []wantErr{{limitsPath + "[cpu]", field.ErrorTypeInvalid}}, detail: "undeclared reference to 'memory'"},
		{name: "a result that is not a number", mutate: withPolicy(map[corev1.ResourceName]appsv1alpha1.ResourceExpression{
			corev1.ResourceMemory: "memory > 1.0",
		}), want: []wantErr{{limitsPath + "[memory]", field.ErrorTypeInvalid}}, detail: "must give a number"},
		{name: "a quantity that does not parse", mutate: withPolicy(map[corev1.ResourceName]appsv1alpha1.ResourceExpression{
			corev1.ResourceMemory: "quantity('64 MiB')",
		}), want: []wantErr{{limitsPath + "[memory]", field.ErrorTypeInvalid}}, detail: `quantity("64 MiB")`},
		{name: "a quantity that is not a literal", mutate: withPolicy(map[corev1.ResourceName]appsv1alpha1.ResourceExpression{
			corev1.ResourceMemory: "quantity(string(memory))",
		}), want: []wantErr{{limitsPath + "[memory]", field.ErrorTypeInvalid}}, detail: "quoted quantity"},
		{name: "max of more arguments than it takes", mutate: withPolicy(map[corev1.ResourceName]appsv1alpha1.ResourceExpression{
			corev1.ResourceCPU: "max(cpu, cpu, cpu, cpu, cpu, cpu, cpu, cpu, cpu)",
		}), want: []wantErr{{limitsPath + "[cpu]", field.ErrorTypeInvalid}}, detail: "max"},
		{name: "a resource other than cpu and memory", mutate: withPolicy(map[corev1.ResourceName]appsv1alpha1.ResourceExpression{
			"ephemeral-storage": "quantity('1Gi')",
		}), want: []wantErr{{limitsPath + "[ephemeral-storage]", field.ErrorTypeNotSupported}}},
		{name: "no expression at all", mutate: withPolicy(nil),
			want: []wantErr{{"spec.containers[0].resourcesPolicy.resourcesExpr", field.ErrorTypeRequired}}},
		{name: "a regex that does not compile", mutate: func(s *appsv1alpha1.SidecarSet) {
			withPolicy(map[corev1.ResourceName]appsv1alpha1.ResourceExpression{corev1.ResourceCPU: "cpu"})(s)
			s.Spec.Containers[0].ResourcesPolicy.TargetContainersNameRegex = "app-("
		}, want: []wantErr{{"spec.containers[0].resourcesPolicy.targetContainersNameRegex", field.ErrorTypeInvalid}}, detail: "RE2"},
		{name: "an unknown mode", mutate: func(s *appsv1alpha1.SidecarSet) {
			withPolicy(map[corev1.ResourceName]appsv1alpha1.ResourceExpression{corev1.ResourceCPU: "cpu"})(s)
			s.Spec.Containers[0].ResourcesPolicy.TargetContainersMode = "avg"
		}, want: []wantErr{{"spec.containers[0].resourcesPolicy.targetContainersMode", field.ErrorTypeNotSupported}}},
		{name: "with fixed resources too", mutate: func(s *appsv1alpha1.SidecarSet) {
			proxy := s.Spec.InitContainers[0]
			proxy.ResourcesPolicy = &appsv1alpha1.ResourcesPolicy{ResourcesExpr: appsv1alpha1.ResourcesExpr{
				Requests: map[corev1.ResourceName]appsv1alpha1.ResourceExpression{corev1.ResourceCPU: "cpu * 0.1"}}}
			s.Spec.InitContainers[0] = proxy
		}, want: []wantErr{{"spec.initContainers[0].resourcesPolicy", field.ErrorTypeForbidden}}, detail: "mutually exclusive"},
		{name: "on a native sidecar", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InitContainers[0].Resources = corev1.ResourceRequirements{}
			s.Spec.InitContainers[0].ResourcesPolicy = &appsv1alpha1.ResourcesPolicy{ResourcesExpr: appsv1alpha1.ResourcesExpr{
				Requests: map[corev1.ResourceName]appsv1alpha1.ResourceExpression{corev1.ResourceCPU: "cpu * 0.1"}}}
		}},
		{name: "on an init container that is not a native sidecar", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InitContainers[1].ResourcesPolicy = &appsv1alpha1.ResourcesPolicy{ResourcesExpr: appsv1alpha1.ResourcesExpr{
				Requests: map[corev1.ResourceName]appsv1alpha1.ResourceExpression{corev1.ResourceCPU: "cpu * 0.1"}}}
		}, want: []wantErr{{"spec.initContainers[1].resourcesPolicy", field.ErrorTypeForbidden}}, detail: "native sidecar"},
	})
}
