package validation

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// TestValidateNameLength: a SidecarSet name is a label value on its revisions and policies, so
// a valid DNS subdomain longer than 63 characters is refused, at metadata.name, once.
func TestValidateNameLength(t *testing.T) {
	label := strings.Repeat("a", 63)
	runCases(t, []validationCase{
		{name: "63 characters", mutate: func(s *appsv1alpha1.SidecarSet) { s.Name = label }},
		{name: "63 characters with dots", mutate: func(s *appsv1alpha1.SidecarSet) { s.Name = strings.Repeat("a.", 31) + "a" }},
		{name: "64 characters", mutate: func(s *appsv1alpha1.SidecarSet) { s.Name = label + "a" },
			want: []wantErr{{"metadata.name", field.ErrorTypeInvalid}}, detail: "at most 63 characters"},
		{name: "253 characters, the longest subdomain", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Name = label + "." + label + "." + label + "." + label[:61]
		}, want: []wantErr{{"metadata.name", field.ErrorTypeInvalid}}, detail: "this one has 253"},
		// A name that is no subdomain says so, not that it is long as well.
		{name: "254 characters", mutate: func(s *appsv1alpha1.SidecarSet) { s.Name = strings.Repeat("a", 254) },
			want: []wantErr{{"metadata.name", field.ErrorTypeInvalid}}, detail: "must be no more than 253 characters"},
	})
}
