package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// A written policy is not yet in force: each API server loads policies and bindings from its
// informers and compiles them about once a second, so a pod created right after the write may
// pass without the policy. The operator therefore probes: it dry-runs a pod in its own
// namespace through a second binding of each policy (the probe binding), and the policy answers
// such a pod with nothing but the digest of its rendering. The answer proves that this very
// rendering runs. The probe binding's selector carries a key that changes whenever the policy
// or the set's binding changes, and it is written after both: an API server that matches the
// probe pod with it has loaded the set's binding (the bindings' informer delivers them in
// order) and compiled the policy it answers for.
const (
	// ProbeLabel is, on a probe pod and in its binding's objectSelector, the probe key.
	ProbeLabel = "sidecarset.io/probe"
	// ProbeAnnotation is what a policy adds to a probe pod: the digest of its rendering.
	ProbeAnnotation = "sidecarset.io/probe"
)

// ProbeName is the name of the probe binding of the named SidecarSet's policy. It never equals
// a Name, which begins with "sidecarset-".
func ProbeName(set string) string { return "probe.sidecarset-" + set }

// probes reports whether the policies are probed: the probe pods need the operator's namespace
// (never kube-system, which no policy ever sees: see renderPolicy).
func probes(opts Options) bool {
	return opts.OperatorNamespace != "" && !slices.Contains(inject.Scope{}.Namespaces(), opts.OperatorNamespace)
}

// withProbe makes the policy answer probe pods: a pod in the operator's namespace reaches the
// policy only through the probe binding (the set's binding leaves that namespace out), and gets
// the digest and nothing else, whatever the set injects or routes.
func withProbe(p *admissionregistrationv1.MutatingAdmissionPolicy, namespace, digest string) {
	m := p.Spec.Mutations[0].JSONPatch
	m.Expression = fmt.Sprintf("request.namespace == %s ? %s : (%s)", quote(namespace),
		addAnnotations(annotation{key: ProbeAnnotation, value: quote(digest)}), m.Expression)
}

// renderProbe is the probe binding of set's policy: probe pods with key, in the operator's
// namespace only.
func renderProbe(set *appsv1alpha1.SidecarSet, namespace, key string) *admissionregistrationv1.MutatingAdmissionPolicyBinding {
	return binding(set, ProbeName(set.Name), &admissionregistrationv1.MatchResources{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: namespace}},
		ObjectSelector:    &metav1.LabelSelector{MatchLabels: map[string]string{ProbeLabel: key}},
	})
}

// digest is a short digest of obj's JSON.
func digest(obj any) string {
	raw, err := json.Marshal(obj)
	if err != nil {
		panic(fmt.Sprintf("encoding %T: %v", obj, err)) // API objects always encode
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}

// ProbePod is the pod the operator dry-runs in its namespace to see whether the API server runs
// the policy whose probe binding has key: the policy adds ProbeAnnotation. It opts in, as the
// policy's objectSelector asks. The pod passes the restricted Pod Security level and any
// LimitRange; it is never stored.
func ProbePod(namespace, key string) *corev1.Pod {
	small := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1m"), corev1.ResourceMemory: resource.MustParse("8Mi")}
	labels := inject.OptInSelector().MatchLabels
	labels[ProbeLabel] = key
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "sidecarset-probe-", Namespace: namespace, Labels: labels},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "probe", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: small, Limits: small},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
}
