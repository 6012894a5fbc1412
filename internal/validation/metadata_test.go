package validation

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

func withPatch(policy appsv1alpha1.PatchPolicy, annotations map[string]string) func(s *appsv1alpha1.SidecarSet) {
	return func(s *appsv1alpha1.SidecarSet) {
		s.Spec.PatchPodMetadata = append(s.Spec.PatchPodMetadata, appsv1alpha1.PatchPodMetadata{PatchPolicy: policy, Annotations: annotations})
	}
}

func otherWithPatch(name string, policy appsv1alpha1.PatchPolicy, annotations map[string]string) appsv1alpha1.SidecarSet {
	s := otherSet(name, name)
	withPatch(policy, annotations)(&s)
	return s
}

func TestValidatePatchPodMetadata(t *testing.T) {
	both := func(fs ...func(s *appsv1alpha1.SidecarSet)) func(s *appsv1alpha1.SidecarSet) {
		return func(s *appsv1alpha1.SidecarSet) {
			for _, f := range fs {
				f(s)
			}
		}
	}
	runCases(t, []validationCase{
		{name: "every policy", mutate: both(
			withPatch("", map[string]string{"prometheus.io/scrape": "true"}),
			withPatch(appsv1alpha1.PatchPolicyOverwrite, map[string]string{"prometheus.io/port": "2020"}),
			withPatch(appsv1alpha1.PatchPolicyMergePatchJSON, map[string]string{"logging.example.com/config": `{"level":"debug"}`}))},
		{name: "MergePatchJson value not JSON",
			mutate: withPatch(appsv1alpha1.PatchPolicyMergePatchJSON, map[string]string{"logging.example.com/config": "level=debug"}),
			want:   []wantErr{{"spec.patchPodMetadata[0].annotations[logging.example.com/config]", field.ErrorTypeInvalid}}, detail: "JSON object"},
		{name: "MergePatchJson value a JSON array",
			mutate: withPatch(appsv1alpha1.PatchPolicyMergePatchJSON, map[string]string{"logging.example.com/config": `["a"]`}),
			want:   []wantErr{{"spec.patchPodMetadata[0].annotations[logging.example.com/config]", field.ErrorTypeInvalid}}, detail: "JSON object"},
		{name: "an operator key", mutate: withPatch("", map[string]string{"sidecarset.io/status": "{}"}),
			want: []wantErr{{"spec.patchPodMetadata[0].annotations[sidecarset.io/status]", field.ErrorTypeForbidden}}, detail: "sidecarset.io/"},
		{name: "an invalid key", mutate: withPatch("", map[string]string{"not a key": "x"}),
			want: []wantErr{{"spec.patchPodMetadata[0].annotations[not a key]", field.ErrorTypeInvalid}}},
		{name: "a key patched twice", mutate: both(
			withPatch("", map[string]string{"prometheus.io/port": "1"}),
			withPatch(appsv1alpha1.PatchPolicyOverwrite, map[string]string{"prometheus.io/port": "1"})),
			want: []wantErr{{"spec.patchPodMetadata[1].annotations[prometheus.io/port]", field.ErrorTypeDuplicate}}, detail: "spec.patchPodMetadata[0]"},
		{name: "no annotations", mutate: withPatch(appsv1alpha1.PatchPolicyOverwrite, nil),
			want: []wantErr{{"spec.patchPodMetadata[0].annotations", field.ErrorTypeRequired}}},
		{name: "an unknown policy", mutate: withPatch("Merge", map[string]string{"prometheus.io/port": "1"}),
			want: []wantErr{{"spec.patchPodMetadata[0].patchPolicy", field.ErrorTypeNotSupported}}},
	})
}

func TestValidatePatchPodMetadataConflicts(t *testing.T) {
	ours := withPatch("", map[string]string{"prometheus.io/port": "2020"})
	runCases(t, []validationCase{
		{name: "the same key, value and policy", mutate: ours,
			others: []appsv1alpha1.SidecarSet{otherWithPatch("metrics", "", map[string]string{"prometheus.io/port": "2020"})}},
		{name: "the same key and value, Retain spelled out", mutate: ours,
			others: []appsv1alpha1.SidecarSet{otherWithPatch("metrics", appsv1alpha1.PatchPolicyRetain, map[string]string{"prometheus.io/port": "2020"})}},
		{name: "another value", mutate: ours,
			others: []appsv1alpha1.SidecarSet{otherWithPatch("metrics", "", map[string]string{"prometheus.io/port": "9102"})},
			want:   []wantErr{{"spec.patchPodMetadata[0].annotations[prometheus.io/port]", field.ErrorTypeInvalid}}, detail: `SidecarSet "metrics" also patches annotation "prometheus.io/port"`},
		{name: "another policy", mutate: ours,
			others: []appsv1alpha1.SidecarSet{otherWithPatch("metrics", appsv1alpha1.PatchPolicyOverwrite, map[string]string{"prometheus.io/port": "2020"})},
			want:   []wantErr{{"spec.patchPodMetadata[0].annotations[prometheus.io/port]", field.ErrorTypeInvalid}}, detail: "Overwrite"},
		{name: "another value, selectors disjoint", mutate: ours,
			others: []appsv1alpha1.SidecarSet{withSelector(otherWithPatch("metrics", "", map[string]string{"prometheus.io/port": "9102"}), matchLabels("tier", "db"))}},
	})
}
