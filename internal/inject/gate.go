package inject

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// The gate is the rule that decides whether a pod may be injected at all, before any
// SidecarSet is looked at. It is stated here once, in the engine, as a function (Gate) and as
// data for the forms the API server applies itself (OptInSelector, Scope.NamespaceRequirements,
// MirrorPodAnnotation). The webhook, status, explain, the kubectl plugin and policy mode all
// ask it; none of them restates a part of it. It lives in the engine rather than in a package
// of its own because the engine's set matching (Match) reads the same opt-in label, and
// because every consumer already depends on the engine while the engine depends on none of
// them.

// Scope is where the operator is configured never to inject, besides kube-system, which is
// never injected anywhere: the operator's own namespace and --excluded-namespaces.
type Scope struct {
	// OperatorNamespace is the operator's own namespace, never injected so that its pods start
	// while the webhook is down. Empty when it is not known.
	OperatorNamespace string
	// ExcludedNamespaces are the names of the operator's --excluded-namespaces.
	ExcludedNamespaces []string
}

// GateReason says why the gate keeps a pod from injection. The values are stable: they are
// the reason label of the webhook's sidecarset_pod_admissions_total for a pod let through
// unchanged, and explain tells its verdicts from them.
type GateReason string

// Why a pod is never injected, in the order Gate asks: the first that applies is the reason.
// Each says what the gate reads and how the API server is told the same rule.
const (
	// GateOpen: nothing keeps the pod from injection; the SidecarSets decide.
	GateOpen GateReason = ""
	// GateNotOptedIn: the pod does not carry the label sidecarset.io/inject=true. Reads the
	// pod's labels; the API server applies it as an objectSelector (OptInSelector). A pod that
	// does not opt in is no SidecarSet's business: status does not count it at all.
	GateNotOptedIn GateReason = "NotOptedIn"
	// GateExcludedNamespace: the pod's namespace is kube-system, the operator's own, or one of
	// --excluded-namespaces (Scope). Reads the pod's namespace; the API server applies it as a
	// namespaceSelector on the namespace's name label (Scope.NamespaceRequirements).
	GateExcludedNamespace GateReason = "ExcludedNamespace"
	// GateNamespaceOptedOut: the pod's namespace is labelled sidecarset.io/injection=disabled.
	// Reads the namespace's labels; the API server applies it as a namespaceSelector
	// (Scope.NamespaceRequirements).
	GateNamespaceOptedOut GateReason = "NamespaceOptedOut"
	// GateMirrorPod: the pod is a mirror pod (annotation kubernetes.io/config.mirror), the API
	// server's copy of a static pod: the kubelet runs the manifest on its node, never this
	// object, so injected sidecars would not run (and a mirror pod may not reference ConfigMaps
	// or Secrets). Reads the pod's annotations (MirrorPodAnnotation), which no selector can: in
	// CEL, has(object.metadata.annotations) && key in object.metadata.annotations.
	GateMirrorPod GateReason = "MirrorPod"
)

// MirrorPodAnnotation is the annotation that marks a mirror pod (GateMirrorPod).
const MirrorPodAnnotation = corev1.MirrorPodAnnotationKey

// Gate says whether a pod may be injected at all: ok is false, with the reason and a message
// a user can act on, for a pod that no SidecarSet may inject whatever it selects. pod is the
// pod's metadata (its namespace, labels and annotations are read), namespaceLabels the labels
// of its namespace. Nothing is modified.
func Gate(pod *metav1.ObjectMeta, namespaceLabels map[string]string, scope Scope) (ok bool, reason GateReason, message string) {
	if !OptedIn(pod.Labels) {
		return false, GateNotOptedIn, notOptedInMessage
	}
	if why := scope.excludes(pod.Namespace); why != "" {
		return false, GateExcludedNamespace, fmt.Sprintf("namespace %s is never injected: %s", pod.Namespace, why)
	}
	if namespaceLabels[appsv1alpha1.NamespaceInjectionLabel] == appsv1alpha1.NamespaceInjectionDisabled {
		return false, GateNamespaceOptedOut, fmt.Sprintf("namespace %s is labelled %s=%s; remove the label to allow injection",
			pod.Namespace, appsv1alpha1.NamespaceInjectionLabel, appsv1alpha1.NamespaceInjectionDisabled)
	}
	if mirrorPod(pod.Annotations) {
		return false, GateMirrorPod, mirrorPodMessage
	}
	return true, GateOpen, ""
}

// The messages of the reasons that do not name the namespace: constants, as status asks the
// gate for every pod of every set.
const (
	notOptedInMessage = "the pod does not carry the label " + appsv1alpha1.InjectLabel + "=" + appsv1alpha1.InjectLabelValue +
		"; the API server calls the webhook only for pods that do"
	mirrorPodMessage = "mirror pods are never injected: the kubelet runs the static pod's manifest, not this object"
)

// excludes says why the namespace is one the scope never injects by name, or "" when it is not.
func (s Scope) excludes(namespace string) string {
	switch {
	case namespace == metav1.NamespaceSystem:
		return "it holds the cluster's own components"
	case namespace == s.OperatorNamespace && namespace != "":
		return "it is the operator's own, whose pods must start even while the webhook is down"
	case slices.Contains(s.ExcludedNamespaces, namespace) && namespace != "":
		return "the operator's --excluded-namespaces names it"
	}
	return ""
}

// Namespaces lists the namespaces the scope never injects by name: kube-system, the operator's
// own, then --excluded-namespaces, each once.
func (s Scope) Namespaces() []string {
	out := []string{metav1.NamespaceSystem}
	for _, ns := range append([]string{s.OperatorNamespace}, s.ExcludedNamespaces...) {
		if ns != "" && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out
}

// NamespaceRequirements are the gate's namespace rules as requirements on a Namespace's labels
// (its name is its label kubernetes.io/metadata.name): none of the scope's namespaces, and not
// labelled sidecarset.io/injection=disabled. A namespaceSelector made of them selects the
// namespaces whose pods the gate lets through.
func (s Scope) NamespaceRequirements() []metav1.LabelSelectorRequirement {
	return []metav1.LabelSelectorRequirement{
		{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: s.Namespaces()},
		{Key: appsv1alpha1.NamespaceInjectionLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{appsv1alpha1.NamespaceInjectionDisabled}},
	}
}

// OptInSelector selects the pods that opt in (GateNotOptedIn): the objectSelector of the
// webhook's registration and of a policy, the Pod cache's label selector, and what validation
// adds to a SidecarSet's selector when it asks whether two sets overlap. It is built on each
// call, so that no caller can modify a shared value.
func OptInSelector() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue}}
}

// OptedIn reports whether pod labels carry the opt-in label (the one rule; OptInSelector is its
// selector).
func OptedIn(podLabels map[string]string) bool {
	return podLabels[appsv1alpha1.InjectLabel] == appsv1alpha1.InjectLabelValue
}

// mirrorPod reports whether pod annotations mark a mirror pod.
func mirrorPod(podAnnotations map[string]string) bool {
	_, ok := podAnnotations[MirrorPodAnnotation]
	return ok
}
