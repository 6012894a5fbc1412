package operator

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestExcludedNamespaces: kube-system and the operator's namespace are always excluded, and
// --excluded-namespaces adds to them (the webhook, status, rollouts and policies all read this
// one scope); a value that is no namespace name is refused naming the flag.
func TestExcludedNamespaces(t *testing.T) {
	tests := []struct {
		name  string
		flag  string
		want  []string
		error string
	}{
		{name: "unset", flag: "", want: []string{"kube-system", "sidecarset-system"}},
		{name: "one", flag: "legacy", want: []string{"kube-system", "sidecarset-system", "legacy"}},
		{name: "several, blanks and empty entries", flag: " legacy, batch ,,", want: []string{"kube-system", "sidecarset-system", "legacy", "batch"}},
		{name: "repeats the fixed ones", flag: "kube-system,sidecarset-system", want: []string{"kube-system", "sidecarset-system"}},
		{name: "not a name", flag: "legacy,Team_A", error: `--excluded-namespaces: "Team_A" is not a namespace name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := injectionScope(Options{Namespace: "sidecarset-system", ExcludedNamespaces: ParseList(tt.flag)})
			if tt.error != "" {
				if err == nil || !strings.Contains(err.Error(), tt.error) {
					t.Fatalf("error %v, want one containing %q", err, tt.error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got.Namespaces()); diff != "" {
				t.Errorf("excluded namespaces (-want +got):\n%s", diff)
			}
		})
	}
}
