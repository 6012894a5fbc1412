package operator

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/sets"
)

// TestExcludedNamespaces: kube-system and the operator's namespace are always excluded, and
// --excluded-namespaces adds to them (the webhook, status and rollouts all read this one set);
// a value that is no namespace name is refused naming the flag.
func TestExcludedNamespaces(t *testing.T) {
	tests := []struct {
		name  string
		flag  string
		want  []string
		error string
	}{
		{name: "unset", flag: "", want: []string{"kube-system", "sidecarset-system"}},
		{name: "one", flag: "legacy", want: []string{"kube-system", "legacy", "sidecarset-system"}},
		{name: "several, blanks and empty entries", flag: " legacy, batch ,,", want: []string{"batch", "kube-system", "legacy", "sidecarset-system"}},
		{name: "repeats the fixed ones", flag: "kube-system,sidecarset-system", want: []string{"kube-system", "sidecarset-system"}},
		{name: "not a name", flag: "legacy,Team_A", error: `--excluded-namespaces: "Team_A" is not a namespace name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := excludedNamespaces(Options{Namespace: "sidecarset-system", ExcludedNamespaces: ParseNamespaces(tt.flag)})
			if tt.error != "" {
				if err == nil || !strings.Contains(err.Error(), tt.error) {
					t.Fatalf("error %v, want one containing %q", err, tt.error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, sets.List(got)); diff != "" {
				t.Errorf("excluded namespaces (-want +got):\n%s", diff)
			}
		})
	}
}
