//go:build e2e

package e2e

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/policy"
)

// TestPolicyModeOperatorDown runs the operator in policy mode, with the pod webhook registered
// as config/components/policy-mode registers it, then stops it: an opted-in pod that one
// SidecarSet alone selects is still created with its sidecar, by the API server (in webhook
// mode the same pod is refused, see TestOperatorOutage); a pod that needs the webhook (its
// container clashes with the sidecar) is refused as before, by the unreachable webhook.
func TestPolicyModeOperatorDown(t *testing.T) {
	ns := newNamespace(t, "policy", nil)
	set := newSet(t, "e2e-policy", "policy")
	stopOperator(t, "operator-0", "TERM")
	t.Cleanup(func() { must(t, startOperator("operator-0")) })
	must(t, run("operator-start", "policy", "--leader-elect", "--leader-election-namespace", operatorNamespace, "--injection=policy"))
	t.Cleanup(func() {
		_ = run("operator-stop", "policy")
		managed := client.MatchingLabels{policy.ManagedByLabel: policy.ManagedByValue}
		must(t, k8s.DeleteAllOf(ctx, &admissionregistrationv1.MutatingAdmissionPolicyBinding{}, managed))
		must(t, k8s.DeleteAllOf(ctx, &admissionregistrationv1.MutatingAdmissionPolicy{}, managed))
	})
	routePodWebhook(t)

	eventually(t, converge, "the set's policy, and PolicyCompiled in its status", func() (bool, string) {
		var p admissionregistrationv1.MutatingAdmissionPolicy
		if err := k8s.Get(ctx, client.ObjectKey{Name: policy.Name(set.Name)}, &p); err != nil {
			return false, err.Error()
		}
		var cur appsv1alpha1.SidecarSet
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), &cur))
		i := slices.IndexFunc(cur.Status.Conditions, func(c metav1.Condition) bool { return c.Type == appsv1alpha1.ConditionPolicyCompiled })
		if i < 0 || cur.Status.Conditions[i].Status != metav1.ConditionTrue {
			return false, "conditions " + strings.Join(conditionTypes(cur.Status.Conditions), ",")
		}
		return true, ""
	})
	stopOperator(t, "policy", "TERM")

	labels := map[string]string{"app": "policy", appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue}
	// The API server loads a new policy within a few seconds: until then a dry run is not
	// injected (the webhook's matchCondition already applies, so it is not called either).
	eventually(t, 30*time.Second, "the API server to run the set's policy", func() (bool, string) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "injected", Labels: labels}, Spec: podSpec()}
		if err := k8s.Create(ctx, pod, client.DryRunAll); err != nil {
			return false, err.Error()
		}
		return len(pod.Spec.Containers) == 2, "containers " + strings.Join(containerNames(pod.Spec.Containers), ",")
	})
	stored := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "injected", Labels: labels}, Spec: podSpec()}
	must(t, k8s.Create(ctx, &stored))
	var cur appsv1alpha1.SidecarSet
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), &cur))
	if names := containerNames(stored.Spec.Containers); !slices.Equal(names, []string{"app", "e2e-policy-agent"}) {
		t.Errorf("containers %v, want [app e2e-policy-agent]", names)
	}
	if hash, _ := inject.InjectedHash(stored.Annotations, set.Name); hash != cur.Status.Hash {
		t.Errorf("record %q, want the set's hash %s", stored.Annotations[appsv1alpha1.StatusAnnotation], cur.Status.Hash)
	}

	clash := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "clash", Labels: labels}, Spec: podSpec()}
	clash.Spec.Containers = append(clash.Spec.Containers, corev1.Container{Name: "e2e-policy-agent", Image: "registry.example/mine:1"})
	if err := k8s.Create(ctx, clash); err == nil || !strings.Contains(err.Error(), "inject.sidecarset.io") {
		t.Fatalf("a pod routed to the webhook was not refused by the (unreachable) webhook: %v", err)
	}
}

// policyModeMatchConditions are the pod webhook's matchConditions in
// config/components/policy-mode.
func policyModeMatchConditions(t testing.TB) []admissionregistrationv1.MatchCondition {
	t.Helper()
	raw, err := os.ReadFile("../../config/components/policy-mode/pod_webhook_route_patch.yaml")
	must(t, err)
	var ops []struct {
		Path  string                                   `json:"path"`
		Value []admissionregistrationv1.MatchCondition `json:"value"`
	}
	must(t, yaml.Unmarshal(raw, &ops))
	if len(ops) != 1 || ops[0].Path != "/webhooks/0/matchConditions" {
		t.Fatalf("unexpected policy-mode webhook patch: %+v", ops)
	}
	return ops[0].Value
}

// routePodWebhook gives the pod webhook, for one test, the matchConditions of
// config/components/policy-mode.
func routePodWebhook(t *testing.T) {
	t.Helper()
	conditions := policyModeMatchConditions(t)
	cfg, j := podWebhook(t)
	saved := cfg.Webhooks[j].DeepCopy()
	cfg.Webhooks[j].MatchConditions = conditions
	must(t, k8s.Update(ctx, cfg))
	t.Cleanup(func() {
		var cur admissionregistrationv1.MutatingWebhookConfiguration
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(cfg), &cur))
		cur.Webhooks[j] = *saved
		must(t, k8s.Update(ctx, &cur))
	})
}

// podWebhook is the configuration registering the operator's pod webhook, and its index there.
func podWebhook(t testing.TB) (*admissionregistrationv1.MutatingWebhookConfiguration, int) {
	t.Helper()
	var list admissionregistrationv1.MutatingWebhookConfigurationList
	must(t, k8s.List(ctx, &list))
	for i := range list.Items {
		j := slices.IndexFunc(list.Items[i].Webhooks, func(w admissionregistrationv1.MutatingWebhook) bool { return w.Name == "inject.sidecarset.io" })
		if j >= 0 {
			return &list.Items[i], j
		}
	}
	t.Fatal("no mutating webhook named inject.sidecarset.io is registered")
	return nil, 0
}

func conditionTypes(cs []metav1.Condition) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Type + "=" + string(c.Status)
	}
	return out
}

func containerNames(cs []corev1.Container) []string {
	out := make([]string, len(cs))
	for i := range cs {
		out[i] = cs[i].Name
	}
	return out
}
