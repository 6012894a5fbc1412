package inject_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// gateScope is the scope of a deployment in sidecarset-system run with
// --excluded-namespaces=legacy.
var gateScope = inject.Scope{OperatorNamespace: "sidecarset-system", ExcludedNamespaces: []string{"legacy"}}

var optedOut = map[string]string{appsv1alpha1.NamespaceInjectionLabel: appsv1alpha1.NamespaceInjectionDisabled}

// gateCase is one pod, its namespace's labels and the gate's answer.
type gateCase struct {
	name            string
	namespace       string
	labels          map[string]string
	annotations     map[string]string
	namespaceLabels map[string]string
	want            inject.GateReason
	// message is a substring of the gate's message.
	message string
}

func optIn(extra map[string]string) map[string]string {
	l := map[string]string{appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue, "app": "web"}
	for k, v := range extra {
		l[k] = v
	}
	return l
}

var gateCases = []gateCase{
	{name: "opted in", namespace: "shop", labels: optIn(nil), want: inject.GateOpen},
	{name: "other annotations", namespace: "shop", labels: optIn(nil), annotations: map[string]string{"kubernetes.io/config.source": "api"}, want: inject.GateOpen},
	{name: "other namespace labels", namespace: "shop", labels: optIn(nil), namespaceLabels: map[string]string{appsv1alpha1.NamespaceInjectionLabel: "enabled"}, want: inject.GateOpen},
	{name: "no opt-in label", namespace: "shop", labels: map[string]string{"app": "web"}, want: inject.GateNotOptedIn, message: "sidecarset.io/inject=true"},
	{name: "opt-in label false", namespace: "shop", labels: optIn(map[string]string{appsv1alpha1.InjectLabel: "false"}), want: inject.GateNotOptedIn},
	{name: "opt-in label not exactly true", namespace: "shop", labels: optIn(map[string]string{appsv1alpha1.InjectLabel: "True"}), want: inject.GateNotOptedIn},
	{name: "nil labels", namespace: "shop", want: inject.GateNotOptedIn},
	// A pod that does not opt in is nobody's business, wherever it is.
	{name: "not opted in, in kube-system", namespace: "kube-system", want: inject.GateNotOptedIn},
	{name: "kube-system", namespace: "kube-system", labels: optIn(nil), want: inject.GateExcludedNamespace, message: "namespace kube-system is never injected: it holds the cluster's own components"},
	{name: "the operator's namespace", namespace: "sidecarset-system", labels: optIn(nil), want: inject.GateExcludedNamespace, message: "namespace sidecarset-system is never injected: it is the operator's own"},
	{name: "a configured namespace", namespace: "legacy", labels: optIn(nil), want: inject.GateExcludedNamespace, message: "namespace legacy is never injected: the operator's --excluded-namespaces names it"},
	{name: "excluded by name before the label", namespace: "legacy", labels: optIn(nil), namespaceLabels: optedOut, want: inject.GateExcludedNamespace},
	{name: "opted-out namespace", namespace: "quiet", labels: optIn(nil), namespaceLabels: optedOut, want: inject.GateNamespaceOptedOut, message: "namespace quiet is labelled sidecarset.io/injection=disabled; remove the label"},
	// The kubelet writes the static pod's hash; any value marks a mirror pod.
	{name: "mirror pod", namespace: "shop", labels: optIn(nil), annotations: map[string]string{corev1.MirrorPodAnnotationKey: "3c9a1f2e"}, want: inject.GateMirrorPod, message: "mirror pods are never injected"},
	{name: "mirror pod, empty value", namespace: "shop", labels: optIn(nil), annotations: map[string]string{corev1.MirrorPodAnnotationKey: ""}, want: inject.GateMirrorPod},
	{name: "mirror pod in an opted-out namespace", namespace: "quiet", labels: optIn(nil), namespaceLabels: optedOut,
		annotations: map[string]string{corev1.MirrorPodAnnotationKey: "3c9a1f2e"}, want: inject.GateNamespaceOptedOut},
}

func (tc gateCase) meta() *metav1.ObjectMeta {
	return &metav1.ObjectMeta{Namespace: tc.namespace, Labels: tc.labels, Annotations: tc.annotations}
}

// TestGate: each reason, the order in which they are asked, and messages that say what to do.
func TestGate(t *testing.T) {
	for _, tc := range gateCases {
		t.Run(tc.name, func(t *testing.T) {
			meta := tc.meta()
			before := meta.DeepCopy()
			ok, reason, msg := inject.Gate(meta, tc.namespaceLabels, gateScope)
			if reason != tc.want || ok != (tc.want == inject.GateOpen) {
				t.Errorf("Gate() = %v, %q, %q; want reason %q", ok, reason, msg, tc.want)
			}
			if (msg == "") != ok || !strings.Contains(msg, tc.message) {
				t.Errorf("message %q, want one containing %q (and none when the gate is open)", msg, tc.message)
			}
			if !cmp.Equal(before, meta) {
				t.Errorf("Gate modified the pod's metadata")
			}
		})
	}
}

// TestGateWithoutOperatorNamespace: kube-system is excluded by any scope, an empty one too; an
// empty operator namespace excludes nothing.
func TestGateWithoutOperatorNamespace(t *testing.T) {
	for ns, want := range map[string]inject.GateReason{"kube-system": inject.GateExcludedNamespace, "sidecarset-system": inject.GateOpen, "": inject.GateOpen} {
		if _, got, _ := inject.Gate(&metav1.ObjectMeta{Namespace: ns, Labels: optIn(nil)}, nil, inject.Scope{}); got != want {
			t.Errorf("namespace %q: %q, want %q", ns, got, want)
		}
	}
}

// TestScopeNamespaces: kube-system, the operator's, then the configured ones, each once.
func TestScopeNamespaces(t *testing.T) {
	for _, tc := range []struct {
		scope inject.Scope
		want  []string
	}{
		{inject.Scope{}, []string{"kube-system"}},
		{gateScope, []string{"kube-system", "sidecarset-system", "legacy"}},
		{inject.Scope{OperatorNamespace: "kube-system", ExcludedNamespaces: []string{"legacy", "sidecarset-system", "legacy", ""}},
			[]string{"kube-system", "legacy", "sidecarset-system"}},
	} {
		if diff := cmp.Diff(tc.want, tc.scope.Namespaces()); diff != "" {
			t.Errorf("%+v: namespaces (-want +got):\n%s", tc.scope, diff)
		}
	}
}

// TestGateDeclaration: the gate as data (OptInSelector, NamespaceRequirements and
// MirrorPodAnnotation, as the API server applies them) lets through exactly the pods Gate
// does. A namespace's name is its kubernetes.io/metadata.name label, as the API server sets it.
func TestGateDeclaration(t *testing.T) {
	pods, err := metav1.LabelSelectorAsSelector(inject.OptInSelector())
	if err != nil {
		t.Fatal(err)
	}
	namespaces, err := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchExpressions: gateScope.NamespaceRequirements()})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range gateCases {
		t.Run(tc.name, func(t *testing.T) {
			nsLabels := labels.Set{corev1.LabelMetadataName: tc.namespace}
			for k, v := range tc.namespaceLabels {
				nsLabels[k] = v
			}
			_, mirror := tc.annotations[inject.MirrorPodAnnotation]
			declared := pods.Matches(labels.Set(tc.labels)) && namespaces.Matches(nsLabels) && !mirror
			if ok, _, _ := inject.Gate(tc.meta(), tc.namespaceLabels, gateScope); ok != declared {
				t.Errorf("Gate() lets the pod through: %v; the declaration: %v", ok, declared)
			}
		})
	}
}
