package integration

import (
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"

	"github.com/sidecarset/sidecarset-operator/internal/validation"
)

// TestSidecarSetNamesFitALabelValue: a SidecarSet's name is a label value on its revisions and
// policies, so a name of 64 characters (a valid DNS subdomain) is refused at create with a
// message naming metadata.name, by the CRD's own rule as well (the validating webhook off);
// 63 characters are accepted.
func TestSidecarSetNamesFitALabelValue(t *testing.T) {
	longest := strings.Repeat("n", validation.MaxNameLength)
	tooLong := longest + "x"
	refused := func(t *testing.T) {
		t.Helper()
		err := k8s.Create(ctx, named(tooLong), client.DryRunAll)
		if err == nil {
			t.Fatalf("a SidecarSet named with %d characters was accepted", len(tooLong))
		}
		if !contains(err.Error(), "metadata.name", "63 characters") {
			t.Errorf("the refusal does not name metadata.name and its limit: %v", err)
		}
	}
	t.Run("admission chain", refused)
	t.Run("without the validating webhook", func(t *testing.T) { withoutSidecarSetValidation(t, func() { refused(t) }) })
	must(t, k8s.Create(ctx, named(longest), client.DryRunAll))
}

// named is a valid SidecarSet (its containers and volumes named apart from it) called name.
func named(name string) *appsv1alpha1.SidecarSet {
	set := agentSet("names", "names")
	set.Name = name
	return set
}
