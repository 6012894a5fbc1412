package inject_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

func TestMatch(t *testing.T) {
	optedIn := func(extra map[string]string) map[string]string {
		l := map[string]string{appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue}
		for k, v := range extra {
			l[k] = v
		}
		return l
	}
	prod := &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	tests := []struct {
		name              string
		namespaceSelector *metav1.LabelSelector
		paused            bool
		podLabels         map[string]string
		namespaceLabels   map[string]string
		want              inject.MatchReason
	}{
		{name: "opted in and selected", podLabels: optedIn(map[string]string{"app": "web"}), want: inject.Matched},
		{name: "no opt-in label", podLabels: map[string]string{"app": "web"}, want: inject.NotOptedIn},
		{name: "opt-in label false", podLabels: map[string]string{"app": "web", appsv1alpha1.InjectLabel: "false"}, want: inject.NotOptedIn},
		{name: "opt-in label not exactly true", podLabels: map[string]string{"app": "web", appsv1alpha1.InjectLabel: "True"}, want: inject.NotOptedIn},
		{name: "nil labels", podLabels: nil, want: inject.NotOptedIn},
		{name: "opt-in is checked before the selector", podLabels: map[string]string{"app": "api"}, want: inject.NotOptedIn},
		{name: "selector mismatch", podLabels: optedIn(map[string]string{"app": "api"}), want: inject.SelectorMismatch},
		{name: "selector label missing", podLabels: optedIn(nil), want: inject.SelectorMismatch},
		{
			name: "selector checked before namespace", namespaceSelector: prod,
			podLabels: optedIn(map[string]string{"app": "api"}), namespaceLabels: map[string]string{"env": "dev"},
			want: inject.SelectorMismatch,
		},
		{
			name: "namespace selected", namespaceSelector: prod,
			podLabels: optedIn(map[string]string{"app": "web"}), namespaceLabels: map[string]string{"env": "prod"},
			want: inject.Matched,
		},
		{
			name: "namespace mismatch", namespaceSelector: prod,
			podLabels: optedIn(map[string]string{"app": "web"}), namespaceLabels: map[string]string{"env": "dev"},
			want: inject.NamespaceMismatch,
		},
		{
			name: "namespace without labels", namespaceSelector: prod,
			podLabels: optedIn(map[string]string{"app": "web"}), namespaceLabels: nil,
			want: inject.NamespaceMismatch,
		},
		{
			name:      "no namespace selector ignores namespace labels",
			podLabels: optedIn(map[string]string{"app": "web"}), namespaceLabels: map[string]string{"env": "dev"},
			want: inject.Matched,
		},
		{
			name: "paused sets still match", paused: true,
			podLabels: optedIn(map[string]string{"app": "web"}),
			want:      inject.Matched,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := webSet("log-agent", corev1.Container{Name: "log-agent", Image: "fluent/fluent-bit:3.2.4"})
			set.Spec.NamespaceSelector = tt.namespaceSelector
			set.Spec.InjectionStrategy.Paused = tt.paused
			c := compile(t, set)[0]
			if got := c.Match(tt.podLabels, tt.namespaceLabels); got != tt.want {
				t.Errorf("Match() = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestCandidatesAndNeedNamespace(t *testing.T) {
	withSelector := func(name, app string, nsSel *metav1.LabelSelector) *appsv1alpha1.SidecarSet {
		s := webSet(name, corev1.Container{Name: name, Image: "x:1"})
		s.Spec.Selector.MatchLabels["app"] = app
		s.Spec.NamespaceSelector = nsSel
		return s
	}
	sets := compile(t,
		withSelector("a", "web", nil),
		withSelector("b", "api", &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}),
		withSelector("c", "web", &metav1.LabelSelector{}),
		withSelector("d", "web", nil),
	)
	tests := []struct {
		name          string
		podLabels     map[string]string
		want          []string
		needNamespace bool
	}{
		// Candidates looks at the pod selector only: the webhook's objectSelector already
		// checked the opt-in label.
		{name: "web pod without opt-in label", podLabels: map[string]string{"app": "web"}, want: []string{"a", "c", "d"}, needNamespace: true},
		{name: "api pod", podLabels: map[string]string{"app": "api"}, want: []string{"b"}, needNamespace: true},
		{name: "no candidate", podLabels: map[string]string{"app": "db"}, want: nil, needNamespace: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := inject.Candidates(sets, tt.podLabels)
			var names []string
			for _, c := range got {
				names = append(names, c.Name())
			}
			if !slices.Equal(names, tt.want) {
				t.Errorf("Candidates() = %v, want %v", names, tt.want)
			}
			if need := inject.NeedNamespace(got); need != tt.needNamespace {
				t.Errorf("NeedNamespace(Candidates()) = %v, want %v", need, tt.needNamespace)
			}
		})
	}
}
