package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/test/testutil"
)

// TestBadSidecarSetsAreRejected sends each bad SidecarSet through the API server. Whether the
// CRD schema or the validating webhook catches it, the answer must be Invalid and name the field.
func TestBadSidecarSetsAreRejected(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*appsv1alpha1.SidecarSet)
		field  string
		detail string // a fragment of the message for that field
	}{
		{"selector missing", func(s *appsv1alpha1.SidecarSet) { s.Spec.Selector = nil }, "spec.selector", "Required"},
		{"selector empty", func(s *appsv1alpha1.SidecarSet) { s.Spec.Selector = &metav1.LabelSelector{} }, "spec.selector", "at least one"},
		{"selector operator invalid", func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near", Values: []string{"a"}}}
		}, "spec.selector.matchExpressions[0].operator", "Near"},
		{"namespaceSelector invalid", func(s *appsv1alpha1.SidecarSet) {
			s.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "not a value!"}}
		}, "spec.namespaceSelector.matchLabels", "not a value!"},
		{"no containers", func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers, s.Spec.Volumes = nil, nil }, "spec.containers", "initContainers"},
		{"container name invalid", func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Name = "Log_Agent" }, "spec.containers[0].name", "Log_Agent"},
		{"name shared with an init container", func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InitContainers = []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: s.Spec.Containers[0].Name, Image: "x:1"}}}
		}, "spec.initContainers[0].name", "Duplicate"},
		{"image missing", func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "" }, "spec.containers[0].image", "Required"},
		{"mount of an undeclared volume", func(s *appsv1alpha1.SidecarSet) { s.Spec.Volumes = nil }, "spec.containers[0].volumeMounts[0].name", "spec.volumes"},
		{"limit below request", func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1")
		}, "spec.containers[0].resources.requests[cpu]", "limit"},
		{"podInjectPolicy unknown", func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].PodInjectPolicy = "Sideways" }, "spec.containers[0].podInjectPolicy", "Sideways"},
		{"shareVolumePolicy unknown", func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].ShareVolumePolicy.Type = "sometimes" }, "spec.containers[0].shareVolumePolicy.type", "sometimes"},
		{"transferEnv incomplete", func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].TransferEnv = []appsv1alpha1.TransferEnvVar{{SourceContainerName: "app"}}
		}, "spec.containers[0].transferEnv[0].envName", ""},
		{"priority by weights and by ordered keys", func(s *appsv1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.PriorityStrategy = &appsv1alpha1.UpdatePriorityStrategy{
				WeightPriority: []appsv1alpha1.UpdatePriorityWeightTerm{{Weight: 1, MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{"zone": "a"}}}},
				OrderPriority:  []appsv1alpha1.UpdatePriorityOrderTerm{{OrderedKey: "ordinal"}}}
		}, "spec.updateStrategy.priorityStrategy.orderPriority", "weightPriority"},
		{"priority weight above 100", func(s *appsv1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.PriorityStrategy = &appsv1alpha1.UpdatePriorityStrategy{
				WeightPriority: []appsv1alpha1.UpdatePriorityWeightTerm{{Weight: 101, MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{"zone": "a"}}}}}
		}, "spec.updateStrategy.priorityStrategy.weightPriority[0].weight", "100"},
		{"priority weight with an empty selector", func(s *appsv1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.PriorityStrategy = &appsv1alpha1.UpdatePriorityStrategy{WeightPriority: []appsv1alpha1.UpdatePriorityWeightTerm{{Weight: 10}}}
		}, "spec.updateStrategy.priorityStrategy.weightPriority[0].matchSelector", "every pod"},
		{"scatter term without a value", func(s *appsv1alpha1.SidecarSet) {
			s.Spec.UpdateStrategy.ScatterStrategy = []appsv1alpha1.UpdateScatterTerm{{Key: "zone"}}
		}, "spec.updateStrategy.scatterStrategy[0].value", ""},
		{"transferEnv sourceContainerName and sourceContainerNameFrom", func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].TransferEnv = []appsv1alpha1.TransferEnvVar{{SourceContainerName: "app", EnvName: "APP_NAME",
				SourceContainerNameFrom: &appsv1alpha1.SourceContainerNameSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
		}, "spec.containers[0].transferEnv[0].sourceContainerNameFrom", "mutually exclusive"},
		{"transferEnv envName and envNames", func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].TransferEnv = []appsv1alpha1.TransferEnvVar{{SourceContainerName: "app", EnvName: "APP_NAME", EnvNames: []string{"LOG_LEVEL"}}}
		}, "spec.containers[0].transferEnv[0].envNames", "mutually exclusive"},
		{"transferEnv envNames repeated", func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].TransferEnv = []appsv1alpha1.TransferEnvVar{{SourceContainerName: "app", EnvNames: []string{"LOG_LEVEL", "LOG_LEVEL"}}}
		}, "spec.containers[0].transferEnv[0].envNames[1]", "Duplicate"},
		{"transferEnv sourceContainerNameFrom of a field that names no container", func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].TransferEnv = []appsv1alpha1.TransferEnvVar{{EnvName: "APP_NAME",
				SourceContainerNameFrom: &appsv1alpha1.SourceContainerNameSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}}
		}, "spec.containers[0].transferEnv[0].sourceContainerNameFrom.fieldRef.fieldPath", "metadata.labels['<key>']"},
		{"transferEnv sourceContainerNameFrom apiVersion other than v1", func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].TransferEnv = []appsv1alpha1.TransferEnvVar{{EnvName: "APP_NAME",
				SourceContainerNameFrom: &appsv1alpha1.SourceContainerNameSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v2", FieldPath: "metadata.name"}}}}
		}, "spec.containers[0].transferEnv[0].sourceContainerNameFrom.fieldRef.apiVersion", "v1"},
		{"transferEnv sourceContainerNameFrom label key invalid", func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].TransferEnv = []appsv1alpha1.TransferEnvVar{{EnvName: "APP_NAME",
				SourceContainerNameFrom: &appsv1alpha1.SourceContainerNameSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['not a key']"}}}}
		}, "spec.containers[0].transferEnv[0].sourceContainerNameFrom.fieldRef.fieldPath", "label key"},
		{"shareVolumeDevicePolicy unknown", func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].ShareVolumeDevicePolicy = &appsv1alpha1.ShareVolumePolicy{Type: "Enabled"}
		}, "spec.containers[0].shareVolumeDevicePolicy.type", "Enabled"},
		{"resourcesPolicy with fixed resources", func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].ResourcesPolicy = &appsv1alpha1.ResourcesPolicy{ResourcesExpr: appsv1alpha1.ResourcesExpr{
				Limits: map[corev1.ResourceName]appsv1alpha1.ResourceExpression{corev1.ResourceCPU: "cpu * 0.5"}}}
		}, "spec.containers[0].resourcesPolicy", "mutually exclusive"},
		{"resourcesPolicy expression that does not type-check", func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
			s.Spec.Containers[0].ResourcesPolicy = &appsv1alpha1.ResourcesPolicy{ResourcesExpr: appsv1alpha1.ResourcesExpr{
				Limits: map[corev1.ResourceName]appsv1alpha1.ResourceExpression{corev1.ResourceCPU: "cpu * 2"}}}
		}, "spec.containers[0].resourcesPolicy.resourcesExpr.limits[cpu]", "write 2.0"},
		{"resourcesPolicy of another resource", func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
			s.Spec.Containers[0].ResourcesPolicy = &appsv1alpha1.ResourcesPolicy{ResourcesExpr: appsv1alpha1.ResourcesExpr{
				Limits: map[corev1.ResourceName]appsv1alpha1.ResourceExpression{"ephemeral-storage": "quantity('1Gi')"}}}
		}, "spec.containers[0].resourcesPolicy.resourcesExpr.limits", "only cpu and memory"},
		{"resourcesPolicy on an init container that is not a native sidecar", func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InitContainers = []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "init", Image: "x:1"},
				ResourcesPolicy: &appsv1alpha1.ResourcesPolicy{ResourcesExpr: appsv1alpha1.ResourcesExpr{
					Limits: map[corev1.ResourceName]appsv1alpha1.ResourceExpression{corev1.ResourceCPU: "cpu"}}}}}
		}, "spec.initContainers", "native sidecar"},
		{"restartPolicy on an init container other than Always", func(s *appsv1alpha1.SidecarSet) {
			never := corev1.ContainerRestartPolicy("Never")
			s.Spec.InitContainers = []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "init", Image: "x:1", RestartPolicy: &never}}}
		}, "spec.initContainers[0].restartPolicy", "Never"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := agentSet("bad-"+strings.ToLower(strings.ReplaceAll(tt.name, " ", "-")), "bad")
			tt.mutate(set)
			err := k8s.Create(ctx, set)
			if err == nil {
				t.Cleanup(func() { deleteIgnoreNotFound(t, set) })
			}
			assertInvalidField(t, err, tt.field, tt.detail)
		})
	}
}

// assertInvalidField checks that err is an Invalid error with a cause on field whose message
// contains detail.
func assertInvalidField(t *testing.T, err error, field, detail string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want Invalid on %s", field)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("error is not Invalid: %v", err)
	}
	var seen []string
	for _, c := range err.(apierrors.APIStatus).Status().Details.Causes {
		if c.Field == field && strings.Contains(c.Message+string(c.Type), detail) {
			return
		}
		seen = append(seen, fmt.Sprintf("%s: %s (%s)", c.Field, c.Message, c.Type))
	}
	t.Errorf("no cause on %s mentioning %q; causes: %v", field, detail, seen)
}

func TestConflictsBetweenSidecarSets(t *testing.T) {
	createSet(t, agentSet("conflict-base", "pay"))

	t.Run("overlapping selectors, same container name", func(t *testing.T) {
		other := agentSet("conflict-overlap", "pay")
		other.Spec.Containers[0].Name = "conflict-base-agent"
		other.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"pay", "cart"}}}}
		err := k8s.Create(ctx, other)
		if err == nil {
			t.Cleanup(func() { deleteIgnoreNotFound(t, other) })
		}
		assertInvalidField(t, err, "spec.containers[0].name", "conflict-base")
	})
	t.Run("overlapping selectors, volume with another definition", func(t *testing.T) {
		other := agentSet("conflict-volume", "pay")
		other.Spec.Volumes[0].Name = "conflict-base-config"
		other.Spec.Containers[0].VolumeMounts[0].Name = "conflict-base-config"
		other.Spec.Volumes[0].ConfigMap.Name = "something-else"
		err := k8s.Create(ctx, other)
		if err == nil {
			t.Cleanup(func() { deleteIgnoreNotFound(t, other) })
		}
		assertInvalidField(t, err, "spec.volumes[0].name", "conflict-base")
	})
	t.Run("disjoint selectors may share names", func(t *testing.T) {
		other := agentSet("conflict-disjoint", "pay")
		other.Spec.Containers[0].Name = "conflict-base-agent"
		other.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"pay"}}}}
		must(t, k8s.Create(ctx, other))
		t.Cleanup(func() { deleteIgnoreNotFound(t, other) })
	})
	t.Run("an update is validated too", func(t *testing.T) {
		// Edit reads again on a conflict with the operator's status writes: the error is the refusal.
		base := &appsv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "conflict-base"}}
		err := testutil.Edit(ctx, k8s, base, func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "" })
		assertInvalidField(t, err, "spec.containers[0].image", "Required")
	})
}

// TestCRDNamesCollideWithNothing: the short name is scs (not sidecar, Istio's Sidecar) and the
// cluster-scoped SidecarSet is in no category (kubectl get all lists namespaced workloads).
func TestCRDNamesCollideWithNothing(t *testing.T) {
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	must(t, k8s.Get(ctx, client.ObjectKey{Name: "sidecarsets.apps.sidecarset.io"}, crd))
	short, _, _ := unstructured.NestedStringSlice(crd.Object, "spec", "names", "shortNames")
	categories, _, _ := unstructured.NestedStringSlice(crd.Object, "spec", "names", "categories")
	if !slices.Equal(short, []string{"scs"}) || len(categories) != 0 {
		t.Errorf("short names %v, categories %v; want [scs] and none", short, categories)
	}
}
