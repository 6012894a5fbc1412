package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/controllers"
	"github.com/sidecarset/sidecarset-operator/test/testutil"
)

// TestPolicyCompiledOnlyOnceRunning: PolicyCompiled says True only once the API server runs the
// set's policy, so a pod created the moment it says so is injected, for a new set and after a
// spec change, every time. (The API server loads a written policy up to a second or so later:
// a condition that said True once the policy was written failed this at almost every try.)
func TestPolicyCompiledOnlyOnceRunning(t *testing.T) {
	needsKubernetes(t, policyModeMinor, "policy mode (MutatingAdmissionPolicy v1)")
	states := startPolicyReconciler(t)
	registerPolicyModeWebhook(t)
	ns := newNamespace(t, nil)
	for i := range 5 {
		name := fmt.Sprintf("policy-running-%d", i)
		set := createSet(t, agentSet(name, name))
		pod := appPod(ns, "first", name, true)
		pod.Labels[noWebhookLabel] = "true"
		wantImage := func(image string) {
			t.Helper()
			awaitCompiled(t, states, set)
			got := dryRunCreate(t, pod)
			var images []string
			for _, c := range got.Spec.Containers {
				images = append(images, c.Name+"="+c.Image)
			}
			if !cmp.Equal(images, []string{"app=registry.example/app:2.1", name + "-agent=" + image}) {
				t.Errorf("%s: a pod created when PolicyCompiled turned True has containers %v, want the sidecar with %s", name, images, image)
			}
		}
		wantImage(set.Spec.Containers[0].Image)
		must(t, testutil.Edit(ctx, k8s, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "registry.example/agent:2.0" }))
		wantImage("registry.example/agent:2.0")
	}
}

// awaitCompiled waits, polling as often as a status reconciler could, until the condition
// the status reconciler writes from states says True for this generation of set.
func awaitCompiled(t *testing.T, states *controllers.PolicyStates, set *appsv1alpha1.SidecarSet) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var c metav1.Condition
	for time.Now().Before(deadline) {
		if c = states.Condition(set); c.Status == metav1.ConditionTrue {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("%s: PolicyCompiled is still %s (%s): %s", set.Name, c.Status, c.Reason, c.Message)
}
