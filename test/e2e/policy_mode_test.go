//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/policy"
	"github.com/sidecarset/sidecarset-operator/internal/revision"
	"github.com/sidecarset/sidecarset-operator/test/testutil"
)

// TestPolicyModeOperatorDown runs the operator in policy mode, with the pod webhook registered
// as config/components/policy-mode registers it, then stops it: an opted-in pod that one
// SidecarSet alone selects is still created with its sidecar, by the API server (in webhook
// mode the same pod is refused, see TestOperatorOutage); a pod that needs the webhook (its
// container clashes with the sidecar) is refused as before, by the unreachable webhook.
func TestPolicyModeOperatorDown(t *testing.T) {
	ns := newNamespace(t, "policy", nil)
	set := createAgentSet(t, "e2e-policy", "policy")
	startPolicyMode(t)
	eventually(t, converge, "the set's policy, and PolicyCompiled in its status", func() (bool, string) {
		var p admissionregistrationv1.MutatingAdmissionPolicy
		if err := k8s.Get(ctx, client.ObjectKey{Name: policy.Name(set.Name)}, &p); err != nil {
			return false, err.Error()
		}
		return policyCompiled(t, set, metav1.ConditionTrue, "Compiled", "")
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

// startPolicyMode stops the suite's operator and runs one in policy mode for the test, the pod
// webhook registered as config/components/policy-mode registers it; after the test the
// rendered policies go and the suite's operator comes back.
func startPolicyMode(t *testing.T) {
	t.Helper()
	stopOperator(t, "operator-0", "TERM")
	t.Cleanup(func() { must(t, startOperator("operator-0")) })
	must(t, run("operator-start", "policy", "--leader-elect", "--leader-election-namespace", operatorNamespace, "--injection=policy"))
	t.Cleanup(func() {
		_ = run("operator-stop", "policy")
		deletePolicies(t)
	})
	routePodWebhook(t)
}

// deletePolicies deletes the policies and bindings an operator in policy mode rendered.
func deletePolicies(t *testing.T) {
	t.Helper()
	managed := client.MatchingLabels{policy.ManagedByLabel: policy.ManagedByValue}
	must(t, k8s.DeleteAllOf(ctx, &admissionregistrationv1.MutatingAdmissionPolicyBinding{}, managed))
	must(t, k8s.DeleteAllOf(ctx, &admissionregistrationv1.MutatingAdmissionPolicy{}, managed))
}

// policyCompiled reports whether set's status has the PolicyCompiled condition with status and
// reason for its current generation, its message containing message; what it has otherwise.
func policyCompiled(t testing.TB, set *appsv1alpha1.SidecarSet, status metav1.ConditionStatus, reason, message string) (bool, string) {
	t.Helper()
	var cur appsv1alpha1.SidecarSet
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), &cur))
	c := meta.FindStatusCondition(cur.Status.Conditions, appsv1alpha1.ConditionPolicyCompiled)
	if c == nil {
		return false, "conditions " + strings.Join(conditionTypes(cur.Status.Conditions), ",")
	}
	ok := c.Status == status && c.Reason == reason && strings.Contains(c.Message, message) && c.ObservedGeneration == cur.Generation
	return ok, fmt.Sprintf("PolicyCompiled=%s %s (generation %d of %d): %s", c.Status, c.Reason, c.ObservedGeneration, cur.Generation, c.Message)
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
	var saved *admissionregistrationv1.MutatingWebhook
	must(t, testutil.Edit(ctx, k8s, cfg, func(cur *admissionregistrationv1.MutatingWebhookConfiguration) {
		saved = cur.Webhooks[j].DeepCopy()
		cur.Webhooks[j].MatchConditions = conditions
	}))
	t.Cleanup(func() {
		must(t, testutil.Edit(ctx, k8s, cfg, func(cur *admissionregistrationv1.MutatingWebhookConfiguration) { cur.Webhooks[j] = *saved }))
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
	return eachContainer(cs, func(c *corev1.Container) string { return c.Name })
}

func containerImages(cs []corev1.Container) []string {
	return eachContainer(cs, func(c *corev1.Container) string { return c.Image })
}

func eachContainer(cs []corev1.Container, f func(*corev1.Container) string) []string {
	out := make([]string, len(cs))
	for i := range cs {
		out[i] = f(&cs[i])
	}
	return out
}

// TestPolicyModePinnedRevision: in policy mode, a set that pins a stored revision is injected by
// its policy with that revision's content (image and record), its status saying
// PolicyCompiled=True; once the revision is deleted, the status names the missing revision and
// the policy leaves the set's pods to the webhook, which injects the current spec.
func TestPolicyModePinnedRevision(t *testing.T) {
	ns := newNamespace(t, "pinned", nil)
	set := createAgentSet(t, "e2e-pinned", "pinned")
	first := inject.Hash(&set.Spec)
	startPolicyMode(t)
	stored := &appsv1.ControllerRevision{}
	eventually(t, converge, "the set's first content stored as a revision", func() (bool, string) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: revision.Name(set.Name, first)}, stored)
		return err == nil, fmt.Sprint(err)
	})
	// The operator writes the set's status meanwhile: retry on conflicts.
	editSet(t, set, func(cur *appsv1alpha1.SidecarSet) {
		cur.Spec.Containers[0].Image = "registry.example/agent:2.0"
		cur.Spec.InjectionStrategy.Revision = &appsv1alpha1.RevisionRef{Name: stored.Name}
	})

	labels := map[string]string{"app": "pinned", appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue}
	sidecar := func(image, hash string) func() (bool, string) {
		return func() (bool, string) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pinned", Labels: labels}, Spec: podSpec()}
			if err := k8s.Create(ctx, pod, client.DryRunAll); err != nil {
				return false, err.Error()
			}
			recorded, _ := inject.InjectedHash(pod.Annotations, set.Name)
			ok := len(pod.Spec.Containers) == 2 && pod.Spec.Containers[1].Image == image && recorded == hash
			return ok, fmt.Sprintf("containers %v (images %v), record %q; want the sidecar with %s and hash %s",
				containerNames(pod.Spec.Containers), containerImages(pod.Spec.Containers), recorded, image, hash)
		}
	}
	eventually(t, converge, "PolicyCompiled=True for the pinned revision", func() (bool, string) {
		return policyCompiled(t, set, metav1.ConditionTrue, "Compiled", "")
	})
	// The policy, not the webhook (which the route matchCondition keeps away), injects the pin.
	eventually(t, 30*time.Second, "the policy to inject the pinned revision", sidecar("registry.example/agent:1.0", first))

	must(t, k8s.Delete(ctx, stored))
	eventually(t, converge, "PolicyCompiled=False naming the missing revision", func() (bool, string) {
		return policyCompiled(t, set, metav1.ConditionFalse, "Unsupported", "revision "+stored.Name+", which is not stored")
	})
	var cur appsv1alpha1.SidecarSet
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), &cur))
	eventually(t, 30*time.Second, "the webhook to inject the current spec", sidecar("registry.example/agent:2.0", inject.Hash(&cur.Spec)))
}

// TestPolicyModeStatusAndRollout: pods the API server injected by a set's policy (none reaches
// the webhook) are counted in the set's status as the webhook's are, and the in-place updater
// rolls a new sidecar image through them: same pods, app container untouched.
func TestPolicyModeStatusAndRollout(t *testing.T) {
	ns := newNamespace(t, "policy-rollout", nil)
	set := createSet(t, &appsv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-policy-rollout"},
		Spec: appsv1alpha1.SidecarSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "policy-rolled"}},
			Containers:     []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "agent", Image: "registry.example/agent:1.0"}}},
			UpdateStrategy: appsv1alpha1.UpdateStrategy{Type: appsv1alpha1.RollingUpdate},
		},
	})
	startPolicyMode(t)
	eventually(t, converge, "PolicyCompiled=True", func() (bool, string) {
		return policyCompiled(t, set, metav1.ConditionTrue, "Compiled", "")
	})
	calls := func() float64 {
		return sum(families(t, ""), "apiserver_admission_webhook_admission_duration_seconds",
			map[string]string{"name": "inject.sidecarset.io", "operation": "CREATE"})
	}
	// The API server loads the new policy within seconds; pods created before would be left alone.
	eventually(t, 30*time.Second, "the API server to run the set's policy", func() (bool, string) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe",
			Labels: map[string]string{"app": "policy-rolled", appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue}}, Spec: podSpec()}
		if err := k8s.Create(ctx, pod, client.DryRunAll); err != nil {
			return false, err.Error()
		}
		return len(pod.Spec.Containers) == 2, "containers " + strings.Join(containerNames(pod.Spec.Containers), ",")
	})
	before := calls()
	newDeployment(t, ns, "policy-rolled", 3)
	waitForCounts(t, set, counts{3, 3, 3, 3}, converge)
	if after := calls(); after != before {
		t.Errorf("the pod webhook took %v admission seconds for these pods; the policy alone should have injected them", after-before)
	}
	uids := map[string]types.UID{}
	for _, p := range podsOf(t, ns, "policy-rolled") {
		uids[p.Name] = p.UID
	}

	editSet(t, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "registry.example/agent:2.0" })
	waitForRollout(t, set, "Complete", "3 of 3 matched pods carry hash")
	waitForCounts(t, set, counts{3, 3, 3, 3}, converge)
	for _, p := range podsOf(t, ns, "policy-rolled") {
		agent, app := containerNamed(p.Spec.Containers, "agent"), containerNamed(p.Spec.Containers, "app")
		if uids[p.Name] != p.UID || agent == nil || app == nil || agent.Image != "registry.example/agent:2.0" || app.Image != "registry.example/app:1.0" {
			t.Errorf("pod %s (uid %s, before %s): containers %+v", p.Name, p.UID, uids[p.Name], p.Spec.Containers)
		}
	}
}
