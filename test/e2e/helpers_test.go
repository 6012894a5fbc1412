//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/test/builders"
	"github.com/sidecarset/sidecarset-operator/test/testutil"
)

var must = testutil.Must

// newNamespace creates a namespace and waits for its default ServiceAccount (testutil.Cluster).
func newNamespace(t testing.TB, prefix string, labels map[string]string) string {
	t.Helper()
	return cluster.NewNamespace(t, prefix, labels)
}

func deleteIgnoreNotFound(t testing.TB, obj client.Object) {
	testutil.DeleteIgnoreNotFound(ctx, t, k8s, obj)
}

// createAgentSet creates a SidecarSet selecting app=<app> with one sidecar, <name>-agent (see
// createSet).
func createAgentSet(t testing.TB, name, app string) *appsv1alpha1.SidecarSet {
	t.Helper()
	return createSet(t, builders.SidecarSet(name, builders.Selecting(app),
		builders.WithContainers(corev1.Container{Name: name + "-agent", Image: "registry.example/agent:1.0"})))
}

// createSet creates a SidecarSet and waits until the operator has observed it
// (testutil.Cluster).
func createSet(t testing.TB, set *appsv1alpha1.SidecarSet) *appsv1alpha1.SidecarSet {
	t.Helper()
	return cluster.CreateSet(t, set)
}

// podSpec runs on the kwok node and passes the restricted Pod Security Standard, which the
// operator's namespace enforces.
func podSpec() corev1.PodSpec { return builders.KwokPodSpec() }

// newDeployment creates a Deployment of opted-in app=<app> pods.
func newDeployment(t testing.TB, ns, app string, replicas int32) *appsv1.Deployment {
	t.Helper()
	return newDeploymentWith(t, ns, app, replicas, nil)
}

// newDeploymentWith is newDeployment with pod annotations.
func newDeploymentWith(t testing.TB, ns, app string, replicas int32, annotations map[string]string) *appsv1.Deployment {
	t.Helper()
	labels := map[string]string{"app": app, appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations}, Spec: podSpec()},
		},
	}
	must(t, k8s.Create(ctx, dep))
	return dep
}

func scale(t testing.TB, dep *appsv1.Deployment, replicas int32) {
	t.Helper()
	patch := client.MergeFrom(dep.DeepCopy())
	dep.Spec.Replicas = ptr.To(replicas)
	must(t, k8s.Patch(ctx, dep, patch))
}

// rolloutRestart does what `kubectl rollout restart` does.
func rolloutRestart(t testing.TB, dep *appsv1.Deployment) {
	t.Helper()
	patch := client.MergeFrom(dep.DeepCopy())
	if dep.Spec.Template.Annotations == nil {
		dep.Spec.Template.Annotations = map[string]string{}
	}
	dep.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] = time.Now().Format(time.RFC3339Nano)
	must(t, k8s.Patch(ctx, dep, patch))
}

type counts struct{ matched, updated, ready, updatedReady int32 }

// waitForCounts waits until the SidecarSet's status shows exactly want for its current
// generation, and returns how long that took.
func waitForCounts(t testing.TB, set *appsv1alpha1.SidecarSet, want counts, timeout time.Duration) time.Duration {
	t.Helper()
	return waitForStatus(t, set, want, 0, timeout)
}

// waitForStatus is waitForCounts that also wants excluded pods (selected in namespaces the
// pod webhook never serves) in status.excludedPods.
func waitForStatus(t testing.TB, set *appsv1alpha1.SidecarSet, want counts, excluded int32, timeout time.Duration) time.Duration {
	t.Helper()
	return eventually(t, timeout, fmt.Sprintf("%s status %+v excluded %d", set.Name, want, excluded), func() (bool, string) {
		var got appsv1alpha1.SidecarSet
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(set), &got); err != nil {
			return false, err.Error()
		}
		st := got.Status
		have := counts{st.MatchedPods, st.UpdatedPods, st.ReadyPods, st.UpdatedReadyPods}
		return have == want && st.ExcludedPods == excluded && st.ObservedGeneration == got.Generation,
			fmt.Sprintf("%+v excluded %d at observedGeneration %d of %d", have, st.ExcludedPods, st.ObservedGeneration, got.Generation)
	})
}

// podsOf lists the live pods of an app in a namespace.
func podsOf(t testing.TB, ns, app string) []corev1.Pod {
	t.Helper()
	return cluster.PodsOf(t, ns, app)
}

func injectedHash(pod *corev1.Pod, set string) string {
	hash, _ := inject.InjectedHash(pod.Annotations, set)
	return hash
}

func hasContainer(pod *corev1.Pod, name string) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// connectionLost reports whether a creation failed because the API server's call to the
// webhook lost its connection, however the loss surfaced: EOF or a reset on reading the
// answer, a broken pipe or a connection the transport had closed already on writing the review.
func connectionLost(err error) bool {
	msg := err.Error()
	if !strings.Contains(msg, "failed to call webhook") {
		return false
	}
	for _, lost := range []string{"EOF", "connection reset", "connection lost", "broken pipe", "use of closed network connection"} {
		if strings.Contains(msg, lost) {
			return true
		}
	}
	return false
}

// createAfterStop creates pod right after a replica stopped: a kept-alive connection to that
// replica that the API server took for the webhook call before it saw the connection closed
// fails the creation, and the API server does not retry a webhook call, as behind a Service.
// Such a loss is logged and the creation tried once more; a second loss, or any other error, is
// returned.
func createAfterStop(t *testing.T, pod *corev1.Pod) error {
	t.Helper()
	err := k8s.Create(ctx, pod)
	if err != nil && connectionLost(err) {
		t.Logf("creating pod %s lost the webhook's connection to the stopped replica; trying once more: %v", pod.Name, err)
		err = k8s.Create(ctx, pod)
	}
	return err
}
