package validation

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

func withOverrides(overrides ...appsv1alpha1.Override) func(s *appsv1alpha1.SidecarSet) {
	return func(s *appsv1alpha1.SidecarSet) { s.Spec.Overrides = append(s.Spec.Overrides, overrides...) }
}

// cpuOverride lets pods set the log agent's CPU request with the annotation.
func cpuOverride(annotation, rule string) appsv1alpha1.Override {
	return appsv1alpha1.Override{Annotation: annotation, Container: "log-agent", Field: appsv1alpha1.OverrideRequestsCPU, Rule: rule}
}

func TestValidateOverrides(t *testing.T) {
	env := func(annotation, name, rule string) appsv1alpha1.Override {
		return appsv1alpha1.Override{Annotation: annotation, Container: "log-agent", Field: appsv1alpha1.OverrideEnv, EnvName: name, Rule: rule}
	}
	runCases(t, []validationCase{
		{name: "every field, rules over value and amount", mutate: withOverrides(
			cpuOverride("proxy.example.com/cpu", "amount.compareTo(quantity('2')) <= 0"),
			appsv1alpha1.Override{Annotation: "proxy.example.com/memory", Container: "mesh-proxy", Field: appsv1alpha1.OverrideLimitsMemory,
				Rule: "!amount.isGreaterThan(quantity('1Gi')) && value.endsWith('i')", Message: "at most 1Gi, in binary units"},
			appsv1alpha1.Override{Annotation: "proxy.example.com/memory-request", Container: "log-agent", Field: appsv1alpha1.OverrideRequestsMemory},
			appsv1alpha1.Override{Annotation: "proxy.example.com/cpu-limit", Container: "log-agent", Field: appsv1alpha1.OverrideLimitsCPU},
			appsv1alpha1.Override{Annotation: "proxy.example.com/scratch", Container: "log-agent", Field: appsv1alpha1.OverrideRequestsEphemeralStorage},
			appsv1alpha1.Override{Annotation: "proxy.example.com/scratch-limit", Container: "log-agent", Field: appsv1alpha1.OverrideLimitsEphemeralStorage},
			env("logging.example.com/level", "LOG_LEVEL", "value in ['debug', 'info'] && value.lowerAscii() == value"))},
		{name: "reserved annotation", mutate: withOverrides(cpuOverride("sidecarset.io/cpu", "")),
			want: []wantErr{{"spec.overrides[0].annotation", field.ErrorTypeForbidden}}, detail: "sidecarset.io/"},
		{name: "annotation not a key", mutate: withOverrides(cpuOverride("not a key", "")),
			want: []wantErr{{"spec.overrides[0].annotation", field.ErrorTypeInvalid}}},
		{name: "annotation missing", mutate: withOverrides(cpuOverride("", "")),
			want: []wantErr{{"spec.overrides[0].annotation", field.ErrorTypeRequired}}},
		{name: "annotation read twice", mutate: withOverrides(cpuOverride("proxy.example.com/cpu", ""),
			appsv1alpha1.Override{Annotation: "proxy.example.com/cpu", Container: "log-agent", Field: appsv1alpha1.OverrideLimitsCPU}),
			want: []wantErr{{"spec.overrides[1].annotation", field.ErrorTypeDuplicate}}, detail: "spec.overrides[0]"},
		{name: "annotation the set patches", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.PatchPodMetadata = []appsv1alpha1.PatchPodMetadata{{Annotations: map[string]string{"proxy.example.com/cpu": "1"}}}
			withOverrides(cpuOverride("proxy.example.com/cpu", ""))(s)
		}, want: []wantErr{{"spec.overrides[0].annotation", field.ErrorTypeInvalid}}, detail: "spec.patchPodMetadata[0]"},
		{name: "container not declared", mutate: withOverrides(appsv1alpha1.Override{Annotation: "a.example.com/cpu", Container: "app", Field: appsv1alpha1.OverrideRequestsCPU}),
			want: []wantErr{{"spec.overrides[0].container", field.ErrorTypeNotFound}}, detail: `"log-agent"`},
		{name: "container missing", mutate: withOverrides(appsv1alpha1.Override{Annotation: "a.example.com/cpu", Field: appsv1alpha1.OverrideRequestsCPU}),
			want: []wantErr{{"spec.overrides[0].container", field.ErrorTypeRequired}}},
		{name: "image is not offered", mutate: withOverrides(appsv1alpha1.Override{Annotation: "a.example.com/image", Container: "log-agent", Field: "image"}),
			want: []wantErr{{"spec.overrides[0].field", field.ErrorTypeNotSupported}}, detail: "roll out"},
		{name: "field missing", mutate: withOverrides(appsv1alpha1.Override{Annotation: "a.example.com/x", Container: "log-agent"}),
			want: []wantErr{{"spec.overrides[0].field", field.ErrorTypeRequired}}},
		{name: "env without envName", mutate: withOverrides(env("logging.example.com/level", "", "")),
			want: []wantErr{{"spec.overrides[0].envName", field.ErrorTypeRequired}}},
		{name: "envName not a variable name", mutate: withOverrides(env("logging.example.com/level", "1LEVEL", "")),
			want: []wantErr{{"spec.overrides[0].envName", field.ErrorTypeInvalid}}},
		{name: "envName with a resource field", mutate: withOverrides(appsv1alpha1.Override{Annotation: "a.example.com/cpu", Container: "log-agent",
			Field: appsv1alpha1.OverrideRequestsCPU, EnvName: "CPU"}),
			want: []wantErr{{"spec.overrides[0].envName", field.ErrorTypeForbidden}}},
		{name: "same field twice", mutate: withOverrides(cpuOverride("a.example.com/cpu", ""), cpuOverride("b.example.com/cpu", "")),
			want: []wantErr{{"spec.overrides[1].field", field.ErrorTypeDuplicate}}, detail: "spec.overrides[0]"},
		{name: "same variable twice", mutate: withOverrides(env("a.example.com/level", "LOG_LEVEL", ""), env("b.example.com/level", "LOG_LEVEL", "")),
			want: []wantErr{{"spec.overrides[1].field", field.ErrorTypeDuplicate}}, detail: `env "LOG_LEVEL"`},
		{name: "two variables", mutate: withOverrides(env("a.example.com/level", "LOG_LEVEL", ""), env("b.example.com/region", "REGION", ""))},
		{name: "rule does not parse", mutate: withOverrides(cpuOverride("a.example.com/cpu", "amount <=")),
			want: []wantErr{{"spec.overrides[0].rule", field.ErrorTypeInvalid}}, detail: "CEL condition"},
		{name: "rule not a condition", mutate: withOverrides(cpuOverride("a.example.com/cpu", "value + 'x'")),
			want: []wantErr{{"spec.overrides[0].rule", field.ErrorTypeInvalid}}, detail: "bool"},
		{name: "rule of the wrong types", mutate: withOverrides(cpuOverride("a.example.com/cpu", "amount <= 2")),
			want: []wantErr{{"spec.overrides[0].rule", field.ErrorTypeInvalid}}, detail: "compareTo"},
		{name: "amount for an env value", mutate: withOverrides(env("a.example.com/level", "LOG_LEVEL", "amount.isLessThan(quantity('1'))")),
			want: []wantErr{{"spec.overrides[0].rule", field.ErrorTypeInvalid}}, detail: "resource fields only"},
		{name: "rule over an unknown variable", mutate: withOverrides(cpuOverride("a.example.com/cpu", "self.value == '1'")),
			want: []wantErr{{"spec.overrides[0].rule", field.ErrorTypeInvalid}}, detail: "self"},
		{name: "rule too costly", mutate: withOverrides(env("a.example.com/level", "LOG_LEVEL",
			"value.split('').all(a, value.split('').all(b, value.split('').all(c, a != c || b != c)))")),
			want: []wantErr{{"spec.overrides[0].rule", field.ErrorTypeInvalid}}, detail: "limit"},
		{name: "message without rule", mutate: withOverrides(appsv1alpha1.Override{Annotation: "a.example.com/cpu", Container: "log-agent",
			Field: appsv1alpha1.OverrideRequestsCPU, Message: "at most 2"}),
			want: []wantErr{{"spec.overrides[0].message", field.ErrorTypeForbidden}}},
	})
}

// TestOverrideRuleErrorNamesTheField: a refused rule's message says which rule and what CEL
// found, so the author can fix it.
func TestOverrideRuleErrorNamesTheField(t *testing.T) {
	set := validSidecarSet()
	withOverrides(cpuOverride("a.example.com/cpu", "amount <= 2"))(set)
	errs := ValidateSidecarSet(set, nil)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "spec.overrides[0].rule") || !strings.Contains(errs[0].Error(), "no matching overload") {
		t.Fatalf("want one error at spec.overrides[0].rule saying no overload matches, got %v", errs)
	}
}
