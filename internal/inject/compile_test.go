package inject_test

import (
	"reflect"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/diff"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

func TestCompile(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*appsv1alpha1.SidecarSetSpec)
		wantErr string // substring; empty means success
		wantNS  bool   // HasNamespaceSelector on success
	}{
		{
			name:   "selector only",
			mutate: func(*appsv1alpha1.SidecarSetSpec) {},
		},
		{
			name: "with namespace selector",
			mutate: func(s *appsv1alpha1.SidecarSetSpec) {
				s.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "shop"}}
			},
			wantNS: true,
		},
		{
			name:   "empty namespace selector selects every namespace but is still a selector",
			mutate: func(s *appsv1alpha1.SidecarSetSpec) { s.NamespaceSelector = &metav1.LabelSelector{} },
			wantNS: true,
		},
		{
			name: "selector by expression",
			mutate: func(s *appsv1alpha1.SidecarSetSpec) {
				s.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web", "api"}},
				}}
			},
		},
		{
			name:    "missing selector",
			mutate:  func(s *appsv1alpha1.SidecarSetSpec) { s.Selector = nil },
			wantErr: `SidecarSet "log-agent": spec.selector is required`,
		},
		{
			name:    "empty selector would select every opted-in pod",
			mutate:  func(s *appsv1alpha1.SidecarSetSpec) { s.Selector = &metav1.LabelSelector{} },
			wantErr: `SidecarSet "log-agent": spec.selector must not be empty`,
		},
		{
			name: "empty matchLabels map",
			mutate: func(s *appsv1alpha1.SidecarSetSpec) {
				s.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{}}
			},
			wantErr: "spec.selector must not be empty",
		},
		{
			name: "unknown operator",
			mutate: func(s *appsv1alpha1.SidecarSetSpec) {
				s.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "app", Operator: "Near", Values: []string{"web"}},
				}}
			},
			wantErr: `SidecarSet "log-agent": spec.selector: `,
		},
		{
			name: "invalid label value",
			mutate: func(s *appsv1alpha1.SidecarSetSpec) {
				s.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "not a label value!"}}
			},
			wantErr: `SidecarSet "log-agent": spec.selector: `,
		},
		{
			name: "invalid namespace selector",
			mutate: func(s *appsv1alpha1.SidecarSetSpec) {
				s.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "env", Operator: metav1.LabelSelectorOpExists, Values: []string{"prod"}},
				}}
			},
			wantErr: `SidecarSet "log-agent": spec.namespaceSelector: `,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := webSet("log-agent", corev1.Container{Name: "log-agent", Image: "fluent/fluent-bit:3.2.4"})
			tt.mutate(&set.Spec)
			before := set.DeepCopy()
			got, err := inject.Compile(set)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Compile() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Compile() error = %v", err)
			}
			if got.Set != set || got.Name() != "log-agent" {
				t.Errorf("Compile() = set %p named %q, want the input set %p named log-agent", got.Set, got.Name(), set)
			}
			if got.Hash != inject.Hash(&set.Spec) {
				t.Errorf("Compile().Hash = %q, want Hash(spec) = %q", got.Hash, inject.Hash(&set.Spec))
			}
			if got.HasNamespaceSelector() != tt.wantNS {
				t.Errorf("HasNamespaceSelector() = %v, want %v", got.HasNamespaceSelector(), tt.wantNS)
			}
			if !reflect.DeepEqual(before, set) {
				t.Errorf("Compile mutated the SidecarSet (-before +after):\n%s", diff.Diff(before, set))
			}
		})
	}
}

// hashedSpec is a SidecarSet spec with every hashed field set, so each mutation below
// changes something that exists.
func hashedSpec() appsv1alpha1.SidecarSetSpec {
	return appsv1alpha1.SidecarSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Containers: []appsv1alpha1.SidecarContainer{{
			Container: corev1.Container{
				Name:         "log-agent",
				Image:        "fluent/fluent-bit:3.2.4",
				VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/fluent-bit/etc"}},
			},
		}},
		InitContainers: []appsv1alpha1.SidecarContainer{{
			Container: corev1.Container{Name: "proxy-init", Image: "ghcr.io/example/proxy-init:1.0"},
		}},
		Volumes: []corev1.Volume{{
			Name:         "config",
			VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "fluent-bit"}}},
		}},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "regcred"}},
	}
}

func TestHash(t *testing.T) {
	base := hashedSpec()
	baseHash := inject.Hash(&base)
	if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(baseHash) {
		t.Fatalf("Hash() = %q, want 16 lower-case hex digits", baseHash)
	}
	tests := []struct {
		name    string
		mutate  func(*appsv1alpha1.SidecarSetSpec)
		changes bool
	}{
		{"nothing", func(*appsv1alpha1.SidecarSetSpec) {}, false},
		{"container image", func(s *appsv1alpha1.SidecarSetSpec) { s.Containers[0].Image = "fluent/fluent-bit:3.2.5" }, true},
		{"container added", func(s *appsv1alpha1.SidecarSetSpec) {
			s.Containers = append(s.Containers, appsv1alpha1.SidecarContainer{Container: corev1.Container{Name: "metrics", Image: "m:1"}})
		}, true},
		{"container env", func(s *appsv1alpha1.SidecarSetSpec) {
			s.Containers[0].Env = []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "debug"}}
		}, true},
		{"podInjectPolicy", func(s *appsv1alpha1.SidecarSetSpec) {
			s.Containers[0].PodInjectPolicy = appsv1alpha1.BeforeAppContainer
		}, true},
		{"shareVolumePolicy", func(s *appsv1alpha1.SidecarSetSpec) {
			s.Containers[0].ShareVolumePolicy.Type = appsv1alpha1.ShareVolumePolicyEnabled
		}, true},
		{"transferEnv", func(s *appsv1alpha1.SidecarSetSpec) {
			s.Containers[0].TransferEnv = []appsv1alpha1.TransferEnvVar{{SourceContainerName: "app", EnvName: "REGION"}}
		}, true},
		{"init container image", func(s *appsv1alpha1.SidecarSetSpec) { s.InitContainers[0].Image = "ghcr.io/example/proxy-init:1.1" }, true},
		{"init container removed", func(s *appsv1alpha1.SidecarSetSpec) { s.InitContainers = nil }, true},
		{"volume source", func(s *appsv1alpha1.SidecarSetSpec) { s.Volumes[0].ConfigMap.Name = "fluent-bit-v2" }, true},
		{"volume removed", func(s *appsv1alpha1.SidecarSetSpec) { s.Volumes = nil }, true},
		{"pull secret renamed", func(s *appsv1alpha1.SidecarSetSpec) { s.ImagePullSecrets[0].Name = "mirror" }, true},
		{"pull secret added", func(s *appsv1alpha1.SidecarSetSpec) {
			s.ImagePullSecrets = append(s.ImagePullSecrets, corev1.LocalObjectReference{Name: "mirror"})
		}, true},
		{"selector", func(s *appsv1alpha1.SidecarSetSpec) { s.Selector.MatchLabels["app"] = "api" }, false},
		{"namespace selector", func(s *appsv1alpha1.SidecarSetSpec) {
			s.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "shop"}}
		}, false},
		{"paused", func(s *appsv1alpha1.SidecarSetSpec) { s.InjectionStrategy.Paused = true }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := hashedSpec()
			tt.mutate(&spec)
			got := inject.Hash(&spec)
			if changed := got != baseHash; changed != tt.changes {
				t.Errorf("Hash() = %q (base %q): changed = %v, want %v", got, baseHash, changed, tt.changes)
			}
			if again := inject.Hash(spec.DeepCopy()); again != got {
				t.Errorf("Hash() of a deep copy = %q, want the same %q", again, got)
			}
		})
	}
}
