package bundle_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/validation"
)

// olmCertDir is where OLM mounts the webhook serving certificate, the manager's default.
const olmCertDir = "/tmp/k8s-webhook-server/serving-certs"

func TestInstallModesAllNamespacesOnly(t *testing.T) {
	csv := loadBundle(t).CSV
	got := map[operatorsv1alpha1.InstallModeType]bool{}
	for _, mode := range csv.Spec.InstallModes {
		got[mode.Type] = mode.Supported
	}
	want := map[operatorsv1alpha1.InstallModeType]bool{
		operatorsv1alpha1.InstallModeTypeOwnNamespace:    false,
		operatorsv1alpha1.InstallModeTypeSingleNamespace: false,
		operatorsv1alpha1.InstallModeTypeMultiNamespace:  false,
		operatorsv1alpha1.InstallModeTypeAllNamespaces:   true,
	}
	if !reflect.DeepEqual(got, want) || len(csv.Spec.InstallModes) != len(want) {
		t.Errorf("Install modes = %v, want %v: the operator watches SidecarSets and Pods cluster-wide", csv.Spec.InstallModes, want)
	}
}

func TestMetadata(t *testing.T) {
	csv := loadBundle(t).CSV
	// The oldest version make test-versions runs the integration suite against
	// (docs/compatibility.md says why).
	if csv.Spec.MinKubeVersion != "1.32.0" {
		t.Errorf("minKubeVersion = %q, want 1.32.0", csv.Spec.MinKubeVersion)
	}
	if got := csv.Annotations["capabilities"]; got != "Basic Install" {
		t.Errorf("capabilities = %q, want Basic Install (no upgrade logic of its own)", got)
	}
	if csv.Spec.DisplayName == "" || len(csv.Spec.Description) < 200 || len(csv.Spec.Keywords) == 0 ||
		len(csv.Spec.Maintainers) == 0 || len(csv.Spec.Links) == 0 || csv.Spec.Provider.Name == "" {
		t.Errorf("CSV lacks display name, description, keywords, maintainers, links or provider")
	}
	if len(csv.Spec.Icon) != 1 || csv.Spec.Icon[0].MediaType != "image/svg+xml" || csv.Spec.Icon[0].Data == "" {
		t.Errorf("Icon = %+v, want one image/svg+xml", csv.Spec.Icon)
	}
	if want := "sidecarset-operator.v" + csv.Spec.Version.String(); csv.Name != want {
		t.Errorf("CSV name = %q, want %q", csv.Name, want)
	}
}

// webhookWant is what OLM must register for one webhook.
type webhookWant struct {
	typ                operatorsv1alpha1.WebhookAdmissionType
	path               string
	rules              []admissionregistrationv1.RuleWithOperations
	objectSelector     *metav1.LabelSelector
	reinvocationPolicy *admissionregistrationv1.ReinvocationPolicyType
}

func TestWebhookDefinitions(t *testing.T) {
	csv := loadBundle(t).CSV
	rule := func(group, version, resource string, ops ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{Operations: ops, Rule: admissionregistrationv1.Rule{
			APIGroups: []string{group}, APIVersions: []string{version}, Resources: []string{resource},
		}}}
	}
	never := admissionregistrationv1.NeverReinvocationPolicy
	wants := map[string]webhookWant{
		"inject.sidecarset.io": {
			typ: operatorsv1alpha1.MutatingAdmissionWebhook, path: "/mutate-v1-pod",
			rules:              rule("", "v1", "pods", admissionregistrationv1.Create),
			objectSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue}},
			reinvocationPolicy: &never,
		},
		"validate.sidecarset.io": {
			typ: operatorsv1alpha1.ValidatingAdmissionWebhook, path: "/validate-apps-sidecarset-io-v1alpha1-sidecarset",
			rules: rule(appsv1alpha1.GroupVersion.Group, appsv1alpha1.GroupVersion.Version, "sidecarsets",
				admissionregistrationv1.Create, admissionregistrationv1.Update),
		},
	}
	if len(csv.Spec.WebhookDefinitions) != len(wants) {
		t.Errorf("%d webhookdefinitions, want %d", len(csv.Spec.WebhookDefinitions), len(wants))
	}
	deployment := managerDeployment(t, csv)
	for _, got := range csv.Spec.WebhookDefinitions {
		want, ok := wants[got.GenerateName]
		if !ok {
			t.Errorf("Unexpected webhook %q", got.GenerateName)
			continue
		}
		t.Run(got.GenerateName, func(t *testing.T) {
			for _, problem := range webhookProblems(got, want, deployment) {
				t.Error(problem)
			}
		})
	}
}

// webhookProblems lists every way got differs from want or does not reach the manager.
func webhookProblems(got operatorsv1alpha1.WebhookDescription, want webhookWant, deployment operatorsv1alpha1.StrategyDeploymentSpec) []string {
	var problems []string
	check := func(field string, got, want any) {
		if !reflect.DeepEqual(got, want) {
			problems = append(problems, fmt.Sprintf("%s = %v, want %v", field, got, want))
		}
	}
	check("type", got.Type, want.typ)
	check("webhookPath", deref(got.WebhookPath), want.path)
	check("rules", got.Rules, want.rules)
	check("objectSelector", got.ObjectSelector, want.objectSelector)
	check("reinvocationPolicy", got.ReinvocationPolicy, want.reinvocationPolicy)
	check("sideEffects", deref(got.SideEffects), admissionregistrationv1.SideEffectClassNone)
	check("failurePolicy", deref(got.FailurePolicy), admissionregistrationv1.Fail)
	check("timeoutSeconds", deref(got.TimeoutSeconds), int32(5))
	check("admissionReviewVersions", got.AdmissionReviewVersions, []string{"v1"})
	check("deploymentName", got.DeploymentName, deployment.Name)
	check("containerPort", got.ContainerPort, int32(443))
	target := deref(got.TargetPort)
	check("targetPort", target, intstr.FromInt32(9443))
	if !slices.ContainsFunc(deployment.Spec.Template.Spec.Containers[0].Ports, func(p corev1.ContainerPort) bool {
		return p.ContainerPort == target.IntVal
	}) {
		problems = append(problems, fmt.Sprintf("the manager does not declare targetPort %v", target.String()))
	}
	return problems
}

// deref is *p, or the zero value for nil.
func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// managerDeployment is the CSV's only Deployment.
func managerDeployment(t *testing.T, csv *operatorsv1alpha1.ClusterServiceVersion) operatorsv1alpha1.StrategyDeploymentSpec {
	t.Helper()
	deployments := csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs
	if len(deployments) != 1 || len(deployments[0].Spec.Template.Spec.Containers) == 0 {
		t.Fatalf("Want one Deployment with a container in the install strategy, got %d", len(deployments))
	}
	return deployments[0]
}

func TestManagerDeployment(t *testing.T) {
	csv := loadBundle(t).CSV
	deployment := managerDeployment(t, csv)
	pod := deployment.Spec.Template.Spec
	manager := pod.Containers[0]
	// allowPrivilegeEscalation defaults to true, so it must be set to false explicitly.
	restricted := manager.SecurityContext != nil && manager.SecurityContext.AllowPrivilegeEscalation != nil &&
		!*manager.SecurityContext.AllowPrivilegeEscalation &&
		deref(manager.SecurityContext.ReadOnlyRootFilesystem) && manager.SecurityContext.Capabilities != nil &&
		slices.Equal(manager.SecurityContext.Capabilities.Drop, []corev1.Capability{"ALL"}) &&
		pod.SecurityContext != nil && deref(pod.SecurityContext.RunAsNonRoot) &&
		pod.SecurityContext.SeccompProfile != nil && pod.SecurityContext.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault
	checks := []struct {
		name string
		ok   bool
	}{
		{name: "two replicas", ok: deref(deployment.Spec.Replicas) == 2},
		{name: "leader election", ok: slices.Contains(manager.Args, "--leader-elect")},
		{name: "restricted security context", ok: restricted},
		{name: "liveness and readiness probes", ok: manager.LivenessProbe != nil && manager.ReadinessProbe != nil},
		{name: "POD_NAMESPACE from the downward API", ok: slices.ContainsFunc(manager.Env, func(e corev1.EnvVar) bool {
			return e.Name == "POD_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace"
		})},
		// OLM mounts its own certificate at olmCertDir: no cert-manager Secret, no other path.
		{name: "no certificate volume", ok: len(pod.Volumes) == 0 && len(manager.VolumeMounts) == 0},
		{name: "default --webhook-cert-path", ok: !slices.ContainsFunc(manager.Args, func(a string) bool {
			return strings.HasPrefix(a, "--webhook-cert-path=") && a != "--webhook-cert-path="+olmCertDir
		})},
		{name: "image matches the containerImage annotation", ok: manager.Image != "" && manager.Image == csv.Annotations["containerImage"]},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("Manager Deployment: want %s", c.name)
		}
	}
}

func TestNoCertManagerObjects(t *testing.T) {
	for _, obj := range loadBundle(t).Objects {
		if strings.HasPrefix(obj.GetAPIVersion(), "cert-manager.io/") {
			t.Errorf("Bundle carries %s %s: OLM provides the webhook certificate", obj.GetKind(), obj.GetName())
		}
	}
}

// TestALMExamples decodes every example strictly into a SidecarSet and runs the operator's own
// validation on it, so that the console never offers a template the webhook would refuse.
func TestALMExamples(t *testing.T) {
	raw := loadBundle(t).CSV.Annotations["alm-examples"]
	var examples []json.RawMessage
	if err := json.Unmarshal([]byte(raw), &examples); err != nil {
		t.Fatalf("alm-examples is not a JSON array: %v", err)
	}
	if len(examples) == 0 {
		t.Fatal("alm-examples is empty")
	}
	sets := make([]appsv1alpha1.SidecarSet, len(examples))
	for i, example := range examples {
		decoder := json.NewDecoder(bytes.NewReader(example))
		decoder.DisallowUnknownFields()
		if err := decoder.Decode(&sets[i]); err != nil {
			t.Fatalf("alm-examples[%d] is not a SidecarSet: %v", i, err)
		}
		if gvk := sets[i].GroupVersionKind(); gvk != appsv1alpha1.GroupVersion.WithKind("SidecarSet") {
			t.Errorf("alm-examples[%d] is a %v", i, gvk)
		}
	}
	for i := range sets {
		others := slices.Delete(slices.Clone(sets), i, i+1)
		if errs := validation.ValidateSidecarSet(&sets[i], others); len(errs) > 0 {
			t.Errorf("alm-examples[%d] (%s) is refused: %v", i, sets[i].Name, errs.ToAggregate())
		}
	}
}

// TestDescriptorPaths checks that every spec and status descriptor names a field of the CRD,
// so a renamed field cannot leave the console showing nothing.
func TestDescriptorPaths(t *testing.T) {
	bundle := loadBundle(t)
	owned := bundle.CSV.Spec.CustomResourceDefinitions.Owned
	if len(owned) != 1 || len(owned[0].SpecDescriptors) == 0 || len(owned[0].StatusDescriptors) == 0 {
		t.Fatalf("Want one owned CRD with spec and status descriptors, got %+v", owned)
	}
	schema := crdSchema(t, bundle.V1CRDs, owned[0])
	for _, d := range owned[0].SpecDescriptors {
		if !hasPath(schema.Properties["spec"], d.Path) {
			t.Errorf("Spec descriptor %q names no field of the CRD", d.Path)
		}
	}
	for _, d := range owned[0].StatusDescriptors {
		if !hasPath(schema.Properties["status"], d.Path) {
			t.Errorf("Status descriptor %q names no field of the CRD", d.Path)
		}
	}
}

// crdSchema is the schema of the CRD version that desc describes.
func crdSchema(t *testing.T, crds []*apiextensionsv1.CustomResourceDefinition, desc operatorsv1alpha1.CRDDescription) apiextensionsv1.JSONSchemaProps {
	t.Helper()
	for _, crd := range crds {
		for _, version := range crd.Spec.Versions {
			if crd.Name == desc.Name && version.Name == desc.Version && version.Schema != nil {
				return *version.Schema.OpenAPIV3Schema
			}
		}
	}
	t.Fatalf("The bundle has no CRD %s version %s", desc.Name, desc.Version)
	return apiextensionsv1.JSONSchemaProps{}
}

// hasPath follows a descriptor path (fields separated by dots) through schema.
func hasPath(schema apiextensionsv1.JSONSchemaProps, path string) bool {
	for _, field := range strings.Split(path, ".") {
		if schema.Type == "array" && schema.Items != nil && schema.Items.Schema != nil {
			schema = *schema.Items.Schema
		}
		next, ok := schema.Properties[field]
		if !ok {
			return false
		}
		schema = next
	}
	return true
}

// TestCRDMatchesConfig catches a bundle left behind by an API change: its CRD must be the
// one controller-gen writes to config/crd/bases.
func TestCRDMatchesConfig(t *testing.T) {
	raw, err := os.ReadFile("../../config/crd/bases/apps.sidecarset.io_sidecarsets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var want apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(raw, &want); err != nil {
		t.Fatal(err)
	}
	bundle := loadBundle(t)
	if len(bundle.V1CRDs) != 1 {
		t.Fatalf("Bundle has %d CRDs, want 1", len(bundle.V1CRDs))
	}
	if !reflect.DeepEqual(bundle.V1CRDs[0].Spec, want.Spec) {
		t.Error("The bundle's CRD differs from config/crd/bases: run `make bundle`")
	}
}

// TestDescriptorsCoverTheAPI: every field of the spec, of its two strategies and of the
// status has a descriptor, so the OLM console shows each with a name; a new field without
// its marker fails here.
func TestDescriptorsCoverTheAPI(t *testing.T) {
	bundle := loadBundle(t)
	owned := bundle.CSV.Spec.CustomResourceDefinitions.Owned[0]
	schema := crdSchema(t, bundle.V1CRDs, owned)
	described := map[string]bool{}
	for _, d := range owned.SpecDescriptors {
		described["spec."+d.Path] = true
	}
	for _, d := range owned.StatusDescriptors {
		described["status."+d.Path] = true
	}
	for _, prefix := range []string{"spec", "spec.updateStrategy", "spec.injectionStrategy", "status"} {
		props := schema
		for _, field := range strings.Split(prefix, ".") {
			props = props.Properties[field]
		}
		if len(props.Properties) == 0 {
			t.Fatalf("the CRD has no fields under %s", prefix)
		}
		for field := range props.Properties {
			if path := prefix + "." + field; !described[path] && path != "status.observedGeneration" {
				t.Errorf("%s has no CSV descriptor: add an +operator-sdk:csv:customresourcedefinitions marker to the field", path)
			}
		}
	}
}
