// Package bundle_test checks the OLM bundle that `make bundle` writes to bundle/ and the
// file-based catalog that `make catalog` writes to catalog/. It runs the validators that
// `operator-sdk bundle validate --select-optional suite=operatorframework` runs (they are the
// operator-framework/api library), and asserts what OLM must get right for this operator:
// AllNamespaces only, both webhooks with the pod webhook's opt-in objectSelector, native
// sidecars' minimum Kubernetes version, a production manager Deployment without cert-manager,
// alm-examples that the operator itself accepts, and a catalog that embeds this very bundle.
package bundle_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/validation"
	interfaces "github.com/operator-framework/api/pkg/validation/interfaces"
)

const (
	// bundleDir and catalogDir are what `make bundle` and `make catalog` write.
	bundleDir  = "../../bundle"
	catalogDir = "../../catalog/sidecarset-operator"
	// packageName is the OLM package (PACKAGE_NAME in hack/olm.mk).
	packageName = "sidecarset-operator"
	// k8sVersion is the Kubernetes minor the bundle must still install on (BUNDLE_K8S_VERSION in
	// hack/olm.mk): the deprecated-API checks fail on APIs removed by then.
	k8sVersion = "1.33"
)

// loadBundle reads bundle/ the way OLM's tooling does.
func loadBundle(t *testing.T) *manifests.Bundle {
	t.Helper()
	if _, err := os.Stat(filepath.Join(bundleDir, "manifests")); err != nil {
		t.Fatalf("No bundle to check (%v): run `make bundle` first", err)
	}
	bundle, err := manifests.GetBundleFromDir(bundleDir)
	if err != nil {
		t.Fatalf("Loading %s: %v", bundleDir, err)
	}
	if bundle.CSV == nil {
		t.Fatalf("%s has no ClusterServiceVersion", bundleDir)
	}
	return bundle
}

// TestValidators runs the default bundle validators and the operatorframework suite
// (OperatorHub, capabilities, categories, good practices, deprecated APIs), plus the object
// validator for the PodDisruptionBudget and ClusterRoles; any error fails, warnings are logged.
func TestValidators(t *testing.T) {
	bundle := loadBundle(t)
	objs := append(bundle.ObjectsToValidate(), map[string]string{"k8s-version": k8sVersion})

	validators := []struct {
		name      string
		validator interfaces.Validator
	}{
		{name: "default (CSV, CRD, bundle)", validator: validation.DefaultBundleValidators},
		{name: "operatorhub", validator: validation.OperatorHubV2Validator},
		{name: "capabilities", validator: validation.StandardCapabilitiesValidator},
		{name: "categories", validator: validation.StandardCategoriesValidator},
		{name: "good practices", validator: validation.GoodPracticesValidator},
		{name: "deprecated APIs", validator: validation.AlphaDeprecatedAPIsValidator},
		{name: "objects", validator: validation.ObjectValidator},
	}
	for _, tc := range validators {
		t.Run(tc.name, func(t *testing.T) {
			for _, result := range tc.validator.Validate(objs...) {
				for _, err := range result.Errors {
					t.Errorf("%s: %s", result.Name, err)
				}
				for _, warning := range result.Warnings {
					t.Logf("Warning: %s: %s", result.Name, warning)
				}
			}
		})
	}
}
