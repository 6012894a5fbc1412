// Package manifests checks what `kustomize build config/default` renders (the file `make test`
// writes and names in SIDECARSET_TEST_MANIFESTS): least-privilege RBAC, a production-grade
// manager Deployment, the pod webhook's selectors, and cert-manager objects that decode into
// cert-manager's own types.
package manifests

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// rendered decodes every object of the rendered config/default, keyed by "Kind/name".
func rendered(t *testing.T) map[string]runtime.Object {
	t.Helper()
	path := os.Getenv("SIDECARSET_TEST_MANIFESTS")
	if path == "" {
		t.Fatal("SIDECARSET_TEST_MANIFESTS is not set: run the tests with `make test`, which renders config/default")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, certmanagerv1.AddToScheme, appsv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	decoder := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	objs := map[string]runtime.Object{}
	reader := utilyaml.NewYAMLReader(bufioReader(raw))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var meta metav1.PartialObjectMetadata
		if err := utilyaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		if meta.Kind == "CustomResourceDefinition" {
			objs[meta.Kind+"/"+meta.Name] = nil // checked by the integration tests, which install it
			continue
		}
		obj, _, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("decoding %s %s strictly: %v", meta.Kind, meta.Name, err)
		}
		objs[meta.Kind+"/"+meta.Name] = obj
	}
	return objs
}

func get[T runtime.Object](t *testing.T, objs map[string]runtime.Object, key string) T {
	t.Helper()
	obj, ok := objs[key].(T)
	if !ok {
		keys := make([]string, 0, len(objs))
		for k := range objs {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		t.Fatalf("config/default renders no %s; it renders %v", key, keys)
	}
	return obj
}

// TestManagerRoleIsLeastPrivilege fails when the manager's ClusterRole grants anything beyond
// what the operator needs: it reads Pods, Namespaces and LimitRanges (and a Node's kubelet version), patches
// and evicts Pods (reading their controllers), reads SidecarSets and writes their status, and
// records Events.
func TestManagerRoleIsLeastPrivilege(t *testing.T) {
	role := get[*rbacv1.ClusterRole](t, rendered(t), "ClusterRole/sidecarset-manager-role")
	allowed := map[string][]string{
		"/pods":        {"get", "list", "watch", "patch"}, // patch: in-place sidecar updates
		"/pods/resize": {"patch"},                         // in-place resize of sidecars
		"/namespaces":  {"get", "list", "watch"},
		"/limitranges": {"get", "list", "watch"}, // a sidecar that breaks one is refused by name
		"/nodes":       {"get"},                  // the kubelet version, before patching a native sidecar
		// updateStrategy.recreate/remediate: Evict; the owner is read to see it recreates the pod.
		"/pods/eviction":                        {"create"},
		"apps/replicasets":                      {"get"},
		"apps/statefulsets":                     {"get"},
		"apps/daemonsets":                       {"get"},
		"/replicationcontrollers":               {"get"},
		"/events":                               {"create", "patch"},
		"events.k8s.io/events":                  {"create", "patch"},
		"apps.sidecarset.io/sidecarsets":        {"get", "list", "watch"},
		"apps.sidecarset.io/sidecarsets/status": {"get", "update", "patch"},
	}
	for _, rule := range role.Rules {
		if len(rule.NonResourceURLs) > 0 || len(rule.ResourceNames) > 0 {
			t.Errorf("unexpected rule %+v", rule)
		}
		for _, g := range rule.APIGroups {
			for _, r := range rule.Resources {
				for _, v := range rule.Verbs {
					if !slices.Contains(allowed[g+"/"+r], v) {
						t.Errorf("manager-role grants %q on %q in group %q; allowed there: %v", v, r, g, allowed[g+"/"+r])
					}
				}
			}
		}
	}
}

func TestManagerDeploymentIsProductionGrade(t *testing.T) {
	objs := rendered(t)
	dep := get[*appsv1.Deployment](t, objs, "Deployment/sidecarset-controller-manager")
	if dep.Namespace != "sidecarset-system" || dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 {
		t.Errorf("want 2 replicas in sidecarset-system, got %v in %s", dep.Spec.Replicas, dep.Namespace)
	}
	pod := dep.Spec.Template.Spec
	if pod.Affinity == nil || pod.Affinity.PodAntiAffinity == nil {
		t.Error("no pod anti-affinity")
	}
	if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext is not restricted: %+v", pod.SecurityContext)
	}
	c := pod.Containers[0]
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext is not restricted: %+v", c.SecurityContext)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() || c.LivenessProbe == nil || c.ReadinessProbe == nil {
		t.Error("manager needs requests, limits, liveness and readiness probes")
	}
	if !slices.Contains(c.Args, "--leader-elect") {
		t.Errorf("manager args %v lack --leader-elect", c.Args)
	}
	pdb := get[*policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget/sidecarset-controller-manager")
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(dep.Spec.Template.Labels)) {
		t.Errorf("the PodDisruptionBudget does not select the manager's pods: %v", err)
	}
	ns := get[*corev1.Namespace](t, objs, "Namespace/sidecarset-system")
	if ns.Labels["sidecarset.io/injection"] != "disabled" || ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("operator namespace labels = %v", ns.Labels)
	}
}

// TestPodWebhookOnlySeesOptedInPods: the pod webhook's registration selects the pods and
// namespaces the engine's gate lets through (inject.Gate, for config/default's operator
// namespace); the gate's mirror-pod rule is the handler's alone.
func TestPodWebhookOnlySeesOptedInPods(t *testing.T) {
	objs := rendered(t)
	cfg := get[*admissionregistrationv1.MutatingWebhookConfiguration](t, objs, "MutatingWebhookConfiguration/sidecarset-mutating-webhook-configuration")
	hook := cfg.Webhooks[0]
	if want := inject.OptInSelector(); !apiequality.Semantic.DeepEqual(hook.ObjectSelector, want) {
		t.Errorf("objectSelector = %+v, want the gate's %+v", hook.ObjectSelector, want)
	}
	nsSel, err := metav1.LabelSelectorAsSelector(hook.NamespaceSelector)
	if err != nil {
		t.Fatal(err)
	}
	scope := inject.Scope{OperatorNamespace: "sidecarset-system"}
	for _, ns := range []string{"kube-system", "sidecarset-system", "shop"} {
		for _, nsLabels := range []map[string]string{nil, {appsv1alpha1.NamespaceInjectionLabel: appsv1alpha1.NamespaceInjectionDisabled}} {
			want, _, _ := inject.Gate(&metav1.ObjectMeta{Namespace: ns, Labels: inject.OptInSelector().MatchLabels}, nsLabels, scope)
			set := labels.Set{corev1.LabelMetadataName: ns}
			for k, v := range nsLabels {
				set[k] = v
			}
			if got := nsSel.Matches(set); got != want {
				t.Errorf("namespaceSelector matches %v = %v; the gate lets its pods through: %v", set, got, want)
			}
		}
	}
	if *hook.SideEffects != admissionregistrationv1.SideEffectClassNone || *hook.FailurePolicy != admissionregistrationv1.Fail ||
		*hook.ReinvocationPolicy != admissionregistrationv1.NeverReinvocationPolicy || *hook.TimeoutSeconds > 10 {
		t.Errorf("pod webhook settings: sideEffects %v failurePolicy %v reinvocation %v timeout %v",
			*hook.SideEffects, *hook.FailurePolicy, *hook.ReinvocationPolicy, *hook.TimeoutSeconds)
	}
	if !strings.HasSuffix(cfg.Annotations["cert-manager.io/inject-ca-from"], "/sidecarset-serving-cert") {
		t.Errorf("cert-manager CA injection annotation = %q", cfg.Annotations["cert-manager.io/inject-ca-from"])
	}
}

func TestCertManagerObjectsDecode(t *testing.T) {
	objs := rendered(t)
	cert := get[*certmanagerv1.Certificate](t, objs, "Certificate/sidecarset-serving-cert")
	if cert.Spec.IssuerRef.Name != "sidecarset-ca-issuer" || cert.Spec.SecretName != "webhook-server-cert" ||
		!slices.Contains(cert.Spec.DNSNames, "sidecarset-webhook-service.sidecarset-system.svc") {
		t.Errorf("certificate spec = %+v", cert.Spec)
	}
	// Renewing the serving certificate keeps its CA, and so the webhooks' caBundle.
	caIssuer := get[*certmanagerv1.Issuer](t, objs, "Issuer/sidecarset-ca-issuer")
	ca := get[*certmanagerv1.Certificate](t, objs, "Certificate/sidecarset-webhook-ca")
	if caIssuer.Spec.CA == nil || caIssuer.Spec.CA.SecretName != ca.Spec.SecretName || !ca.Spec.IsCA ||
		ca.Spec.IssuerRef.Name != "sidecarset-selfsigned-issuer" || ca.Spec.Duration == nil || ca.Spec.Duration.Duration < 5*365*24*time.Hour {
		t.Errorf("CA issuer %+v, CA certificate %+v: want a CA Issuer signing with a long-lived CA Certificate's Secret", caIssuer.Spec, ca.Spec)
	}
	issuer := get[*certmanagerv1.Issuer](t, objs, "Issuer/sidecarset-selfsigned-issuer")
	if issuer.Spec.SelfSigned == nil {
		t.Errorf("issuer is not self-signed: %+v", issuer.Spec)
	}
	dep := get[*appsv1.Deployment](t, objs, "Deployment/sidecarset-controller-manager")
	if !slices.ContainsFunc(dep.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
		return v.Secret != nil && v.Secret.SecretName == cert.Spec.SecretName
	}) {
		t.Errorf("the manager does not mount the certificate's secret %s", cert.Spec.SecretName)
	}
}

func bufioReader(raw []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(raw)) }

// TestManagerNamespacedRoleIsLeastPrivilege: in its own namespace the manager may only keep
// SidecarSet revisions and read (get, never list or watch) the pull secrets sets pinning
// digests name and the ConfigMaps holding the keys and trusted roots they verify with, bound to its ServiceAccount there.
func TestManagerNamespacedRoleIsLeastPrivilege(t *testing.T) {
	objs := rendered(t)
	role := get[*rbacv1.Role](t, objs, "Role/sidecarset-manager-role")
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"get"}},
		{APIGroups: []string{"apps"}, Resources: []string{"controllerrevisions"}, Verbs: []string{"create", "delete", "get", "list", "update", "watch"}},
	}
	if role.Namespace != "sidecarset-system" || !apiequality.Semantic.DeepEqual(role.Rules, want) {
		t.Errorf("namespaced manager role %s/%s: %+v; want %+v", role.Namespace, role.Name, role.Rules, want)
	}
	binding := get[*rbacv1.RoleBinding](t, objs, "RoleBinding/sidecarset-manager-rolebinding")
	if binding.Namespace != role.Namespace || binding.RoleRef.Kind != "Role" || binding.RoleRef.Name != role.Name ||
		len(binding.Subjects) != 1 || binding.Subjects[0].Name != "sidecarset-controller-manager" || binding.Subjects[0].Namespace != role.Namespace {
		t.Errorf("binding %+v", binding)
	}
}
