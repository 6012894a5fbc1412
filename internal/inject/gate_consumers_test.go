package inject_test

import (
	"context"
	"slices"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/cli"
	"github.com/sidecarset/sidecarset-operator/internal/explain"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/opmetrics"
	"github.com/sidecarset/sidecarset-operator/internal/policy"
	"github.com/sidecarset/sidecarset-operator/internal/policy/policytest"
	"github.com/sidecarset/sidecarset-operator/internal/rollout"
	"github.com/sidecarset/sidecarset-operator/internal/snapshot"
	"github.com/sidecarset/sidecarset-operator/internal/webhook"
)

// gateWorld is what every consumer of the gate is given: one SidecarSet that selects app=web
// pods anywhere, the operator's scope, and the labels of each namespace.
type gateWorld struct {
	set        *appsv1alpha1.SidecarSet
	scope      inject.Scope
	namespaces map[string]map[string]string
}

func (w gateWorld) namespaceLabels(_ context.Context, name string) (map[string]string, error) {
	return w.namespaces[name], nil
}

// gateConsumer answers, in one consumer's own way, whether the set injects the pod.
type gateConsumer struct {
	name    string
	injects func(t *testing.T, w gateWorld, pod *corev1.Pod) bool
}

// gateConsumers are every part of the operator that decides whether a pod is injected, each
// asked through its public entry point as the product calls it.
var gateConsumers = []gateConsumer{
	{"webhook", webhookInjects},
	{"status", statusCountsInjectable},
	{"kubectl sidecarset explain", explainInjects},
	{"kubectl sidecarset inject", cliInjects},
	{"policy mode", policyInjects},
}

// TestGateConsumersAgree: for a pod of every kind the gate keeps out (a mirror pod, each kind of
// excluded namespace, a pod without the opt-in label) and one it lets through, the webhook,
// status, explain, the plugin's inject and the policy mode's rendering all give the gate's
// verdict. A consumer that restates the gate, or leaves a part of it out, fails here.
func TestGateConsumersAgree(t *testing.T) {
	w := gateWorld{
		set:   webSet("log-agent", corev1.Container{Name: "log-agent", Image: "fluent/fluent-bit:3.2.4"}),
		scope: inject.Scope{OperatorNamespace: "sidecarset-system", ExcludedNamespaces: []string{"legacy"}},
		namespaces: map[string]map[string]string{"shop": {"team": "shop"}, "kube-system": nil, "sidecarset-system": nil, "legacy": nil,
			"quiet": {appsv1alpha1.NamespaceInjectionLabel: appsv1alpha1.NamespaceInjectionDisabled}},
	}
	for _, tc := range []struct {
		name      string
		namespace string
		edit      func(*corev1.Pod)
		want      inject.GateReason
	}{
		{name: "an opted-in pod", namespace: "shop", want: inject.GateOpen},
		{name: "a mirror pod", namespace: "shop", want: inject.GateMirrorPod,
			edit: func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "3c9a1f2e"} }},
		{name: "kube-system", namespace: "kube-system", want: inject.GateExcludedNamespace},
		{name: "the operator's namespace", namespace: "sidecarset-system", want: inject.GateExcludedNamespace},
		{name: "a namespace of --excluded-namespaces", namespace: "legacy", want: inject.GateExcludedNamespace},
		{name: "a namespace labelled injection disabled", namespace: "quiet", want: inject.GateNamespaceOptedOut},
		{name: "a pod without the opt-in label", namespace: "shop", want: inject.GateNotOptedIn,
			edit: func(p *corev1.Pod) { delete(p.Labels, appsv1alpha1.InjectLabel) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := webPod(corev1.Container{Name: "app", Image: "registry.example/web:1"})
			pod.Namespace = tc.namespace
			if tc.edit != nil {
				tc.edit(pod)
			}
			if _, got, _ := inject.Gate(&pod.ObjectMeta, w.namespaces[tc.namespace], w.scope); got != tc.want {
				t.Fatalf("the gate says %q, the case is about %q", got, tc.want)
			}
			want := tc.want == inject.GateOpen
			for _, c := range gateConsumers {
				before := pod.DeepCopy()
				if got := c.injects(t, w, pod); got != want {
					t.Errorf("%s: injects %v; the gate says %q", c.name, got, tc.want)
				}
				if !equalJSON(t, before, pod) {
					t.Fatalf("%s modified the pod", c.name)
				}
			}
		})
	}
}

func equalJSON(t *testing.T, a, b any) bool { return string(mustJSON(t, a)) == string(mustJSON(t, b)) }

// webhookInjects: the pod webhook's handler patches the pod.
func webhookInjects(t *testing.T, w gateWorld, pod *corev1.Pod) bool {
	store := snapshot.NewStore()
	store.SetSynced(func() bool { return true })
	store.Upsert(w.set)
	h := &webhook.PodInjector{Sets: store, Scope: w.scope, NamespaceLabels: w.namespaceLabels, Metrics: opmetrics.Unregistered()}
	resp := h.Handle(t.Context(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "uid-1", Operation: admissionv1.Create, Namespace: pod.Namespace,
		Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Object:   runtime.RawExtension{Raw: mustJSON(t, pod)},
	}})
	if !resp.Allowed {
		t.Fatalf("the webhook refused the pod: %v", resp.Result)
	}
	return len(resp.Patches) > 0
}

// statusCountsInjectable: status counts the pod matched (one the set can reach), not excluded
// and not left out.
func statusCountsInjectable(t *testing.T, w gateWorld, pod *corev1.Pod) bool {
	c, err := inject.Compile(w.set)
	if err != nil {
		t.Fatal(err)
	}
	s, selected := rollout.Classify(c, pod, func(ns string) map[string]string { return w.namespaces[ns] }, w.scope)
	return selected && !s.Excluded
}

// cliEngine is the plugin's engine, fed with the world as --sidecarsets, --namespace-labels,
// --operator-namespace and --excluded-namespaces feed it.
func cliEngine(t *testing.T, w gateWorld) *cli.Engine {
	e, err := cli.NewEngine([]*appsv1alpha1.SidecarSet{w.set}, nil, w.scope, w.namespaceLabels, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// explainInjects: kubectl sidecarset explain's verdict for the set is Injects.
func explainInjects(t *testing.T, w gateWorld, pod *corev1.Pod) bool {
	got, err := cliEngine(t, w).Explain(t.Context(), pod, false)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(got, func(x explain.Explanation) bool { return x.SidecarSet == w.set.Name })
	if i < 0 {
		t.Fatalf("explain says nothing of SidecarSet %s: %+v", w.set.Name, got)
	}
	return got[i].Verdict == explain.Injects
}

// cliInjects: kubectl sidecarset inject changes the pod.
func cliInjects(t *testing.T, w gateWorld, pod *corev1.Pod) bool {
	_, out, err := cliEngine(t, w).InjectPod(t.Context(), mustJSON(t, pod), pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	return out.Changed
}

// policyInjects: the API server, running the set's rendered policy through each of its
// bindings (the set's and the probe binding), adds the set's sidecar to the pod.
func policyInjects(t *testing.T, w gateWorld, pod *corev1.Pod) bool {
	compiled, err := policy.Compile(w.set, []*appsv1alpha1.SidecarSet{w.set}, nil, policy.Options{Scope: w.scope})
	if err != nil {
		t.Fatal(err)
	}
	if compiled.Unsupported != nil {
		t.Fatalf("the policy routes every pod to the webhook: %s", compiled.Unsupported)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pod.Namespace, Labels: w.namespaces[pod.Namespace]}}
	injects := false
	for _, b := range []*admissionregistrationv1.MutatingAdmissionPolicyBinding{compiled.Binding, compiled.Probe} {
		if b == nil {
			continue
		}
		out, _, err := policytest.Admit(t.Context(), compiled.Policy, b, pod, ns)
		if err != nil {
			t.Fatalf("binding %s: %v", b.Name, err)
		}
		injects = injects || slices.ContainsFunc(out.Spec.Containers, func(c corev1.Container) bool { return c.Name == "log-agent" })
	}
	return injects
}
