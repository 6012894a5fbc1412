package policy_test

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/policy"
)

// TestEveryFieldIsClassified: every field of SidecarSetSpec and of SidecarContainer has a rule
// (a new field fails here until it is classified), and each rule is what the code does: setting
// the field changes the set's hash exactly when the rule says Hashed, and keeps the set on the
// webhook (Check names the field) exactly when it says Routed. Each field is set to a sample
// value on the plain set; a field with no sample fails the test too.
func TestEveryFieldIsClassified(t *testing.T) {
	specSamples := map[string]func(*appsv1alpha1.SidecarSetSpec){
		"selector": func(s *appsv1alpha1.SidecarSetSpec) {
			s.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}
		},
		"namespaceSelector": func(s *appsv1alpha1.SidecarSetSpec) {
			s.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
		},
		"containers": func(s *appsv1alpha1.SidecarSetSpec) { s.Containers[0].Image = "example.com/other:2" },
		"initContainers": func(s *appsv1alpha1.SidecarSetSpec) {
			s.InitContainers = []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "init", Image: "init:1"}}}
		},
		"volumes": func(s *appsv1alpha1.SidecarSetSpec) { s.Volumes[0].EmptyDir.Medium = corev1.StorageMediumMemory },
		"imagePullSecrets": func(s *appsv1alpha1.SidecarSetSpec) {
			s.ImagePullSecrets = append(s.ImagePullSecrets, corev1.LocalObjectReference{Name: "more"})
		},
		"patchPodMetadata": func(s *appsv1alpha1.SidecarSetSpec) {
			s.PatchPodMetadata = []appsv1alpha1.PatchPodMetadata{{Annotations: map[string]string{"example.com/a": "1"}}}
		},
		"overrides": func(s *appsv1alpha1.SidecarSetSpec) {
			s.Overrides = []appsv1alpha1.Override{{Annotation: "example.com/cpu", Container: s.Containers[0].Name, Field: appsv1alpha1.OverrideRequestsCPU}}
		},
		"injectionStrategy":    func(s *appsv1alpha1.SidecarSetSpec) { s.InjectionStrategy.Paused = true },
		"updateStrategy":       func(s *appsv1alpha1.SidecarSetSpec) { s.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromInt32(2)) },
		"revisionHistoryLimit": func(s *appsv1alpha1.SidecarSetSpec) { s.RevisionHistoryLimit = ptr.To[int32](3) },
		"podResources":         func(s *appsv1alpha1.SidecarSetSpec) { s.PodResources = appsv1alpha1.PodResourcesPad },
		// The spec alone: the digests live in status.images, and pin the images at compile time.
		"imagePolicy": func(s *appsv1alpha1.SidecarSetSpec) {
			s.ImagePolicy = &appsv1alpha1.ImagePolicy{Pin: appsv1alpha1.ImagePinDigest}
		},
	}
	sidecarSamples := map[string]func(*appsv1alpha1.SidecarContainer){
		"Container":       func(c *appsv1alpha1.SidecarContainer) { c.Args = []string{"--v=2"} },
		"podInjectPolicy": func(c *appsv1alpha1.SidecarContainer) { c.PodInjectPolicy = appsv1alpha1.AfterAppContainer },
		"shareVolumePolicy": func(c *appsv1alpha1.SidecarContainer) {
			c.ShareVolumePolicy.Type = appsv1alpha1.ShareVolumePolicyEnabled
		},
		"shareVolumeDevicePolicy": func(c *appsv1alpha1.SidecarContainer) {
			c.ShareVolumeDevicePolicy = &appsv1alpha1.ShareVolumePolicy{Type: appsv1alpha1.ShareVolumePolicyEnabled}
		},
		"transferEnv": func(c *appsv1alpha1.SidecarContainer) {
			c.TransferEnv = []appsv1alpha1.TransferEnvVar{{SourceContainerName: "app", EnvName: "LEVEL"}}
		},
		"resourcesPolicy": func(c *appsv1alpha1.SidecarContainer) {
			c.ResourcesPolicy = &appsv1alpha1.ResourcesPolicy{ResourcesExpr: appsv1alpha1.ResourcesExpr{
				Limits: map[corev1.ResourceName]appsv1alpha1.ResourceExpression{corev1.ResourceCPU: "cpu"}}}
		},
	}
	check := func(t *testing.T, name string, rule policy.FieldRule, edit func(*appsv1alpha1.SidecarSet)) {
		base := plainSet("agent")
		set := base.DeepCopy()
		edit(set)
		if hashed := inject.Hash(&set.Spec) != inject.Hash(&base.Spec); hashed != rule.Hashed {
			t.Errorf("%s: setting it changes the hash: %v; the rule says Hashed: %v", name, hashed, rule.Hashed)
		}
		u := policy.Check(set)
		routed := u != nil && strings.Contains(u.Field, name)
		if routed != (rule.Form == policy.FormRouted) {
			t.Errorf("%s: Check says %v; the rule says %s", name, u, rule.Form)
		}
	}
	for _, c := range []struct {
		typ     reflect.Type
		rules   map[string]policy.FieldRule
		samples int
		edit    func(name string) func(*appsv1alpha1.SidecarSet)
	}{
		{reflect.TypeFor[appsv1alpha1.SidecarSetSpec](), policy.SpecFields, len(specSamples), func(name string) func(*appsv1alpha1.SidecarSet) {
			if f := specSamples[name]; f != nil {
				return func(s *appsv1alpha1.SidecarSet) { f(&s.Spec) }
			}
			return nil
		}},
		{reflect.TypeFor[appsv1alpha1.SidecarContainer](), policy.SidecarFields, len(sidecarSamples), func(name string) func(*appsv1alpha1.SidecarSet) {
			if f := sidecarSamples[name]; f != nil {
				return func(s *appsv1alpha1.SidecarSet) { f(&s.Spec.Containers[0]) }
			}
			return nil
		}},
	} {
		if c.typ.NumField() != len(c.rules) {
			t.Errorf("%s has %d fields and %d rules", c.typ.Name(), c.typ.NumField(), len(c.rules))
		}
		for i := range c.typ.NumField() {
			name := policy.FieldName(c.typ.Field(i))
			rule, ok := c.rules[name]
			if !ok {
				t.Errorf("%s.%s has no rule in internal/policy/fields.go: classify it (hashed or not; CEL, routed or not read at admission; read from the pod or not)", c.typ.Name(), name)
				continue
			}
			edit := c.edit(name)
			if edit == nil {
				t.Errorf("%s.%s has no sample value in this test", c.typ.Name(), name)
				continue
			}
			t.Run(c.typ.Name()+"."+name, func(t *testing.T) { check(t, name, rule, edit) })
		}
	}
}
