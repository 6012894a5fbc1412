//go:build e2e

package realnode

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

const helmRelease = "sidecarset"

// TestHelmInstallUpgradeUninstall takes the Helm path of docs/install.md on the real node, in
// place of what `make deploy` installed (restored afterwards): the release namespace labelled to
// allow host networking, `helm install --wait` with hack/node.sh helm-values, a pod injected and
// running; `helm upgrade --wait` to another image tag, which leaves that pod alone, creates no
// pod without its sidecar while it replaces the one replica, and injects the next pod; `helm uninstall --wait`, after which only what docs/operations.md says stays is
// left: the CRD and the two certificate Secrets (with the namespace, which the test made).
func TestHelmInstallUpgradeUninstall(t *testing.T) {
	must(t, undeployLeavesNothing())
	t.Cleanup(func() { restoreDeploy(t) })
	values, err := output(node, "helm-values")
	must(t, err)
	nextImage := registry + "/sidecarset-operator:e2e-next"
	_, err = output(node, "push", "sidecarset-operator:e2e-next", filepath.Join(root, "bin", "manager-image.tar"))
	must(t, err)

	// The release namespace, as docs/install.md has it made on the local node.
	must(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}}}))
	start := time.Now()
	helm(t, "install", helmRelease, filepath.Join(root, "dist", "chart"), "--namespace", operatorNamespace,
		"-f", values, "--set", "image.tag=e2e", "--wait", "--timeout", "3m")
	must(t, waitForOperator())
	t.Logf("helm install --wait returned and the webhooks served in %s", time.Since(start).Round(100*time.Millisecond))
	manifest := helmObjects(t)

	ns := newNamespace(t, "realnode-helm")
	set := &appsv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "realnode-helm"},
		Spec: appsv1alpha1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "helm"}},
			Containers: []appsv1alpha1.SidecarContainer{{Container: probed("agent", image("agent:v1"))}},
		},
	}
	createSet(t, set)
	newDeployment(t, ns, "helm", 1)
	waitForCounts(t, set, 1)
	before := podsOf(t, ns, "helm")[0]

	// Pods created during the upgrade: the one replica is replaced, so some are refused
	// (failurePolicy Fail), and none is created without its sidecar.
	creations := startAdmissions(t, ns, "helm", "agent", 100*time.Millisecond)
	start = time.Now()
	helm(t, "upgrade", helmRelease, filepath.Join(root, "dist", "chart"), "--namespace", operatorNamespace,
		"--reuse-values", "--set", "image.tag=e2e-next", "--wait", "--timeout", "3m")
	must(t, waitForOperator())
	took := time.Since(start)
	creations.halt()
	during := creations.tally(start)
	t.Logf("helm upgrade --wait to %s returned and the webhooks served in %s; pods created meanwhile: %d, refused %d (first: %v), without the sidecar %d",
		nextImage, took.Round(100*time.Millisecond), during.Sent, during.Failed, during.FirstFailure, during.WithoutSidecar)
	if during.Sent == 0 || during.WithoutSidecar != 0 {
		t.Errorf("during helm upgrade %d pods were created, %d without their sidecar; want some, none without", during.Sent, during.WithoutSidecar)
	}
	var dep appsv1.Deployment
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: operatorName}, &dep))
	if got := dep.Spec.Template.Spec.Containers[0].Image; got != nextImage {
		t.Errorf("after helm upgrade the manager runs %s, want %s", got, nextImage)
	}
	// The upgrade changes nothing that runs: the same pod, its containers never restarted.
	after := podsOf(t, ns, "helm")
	if len(after) != 1 || after[0].UID != before.UID || status(&after[0], "agent").RestartCount != 0 || !ready(&after[0]) {
		t.Errorf("after helm upgrade: pods %v, want %s untouched, Ready, its sidecar never restarted", podNames(after), before.Name)
	}
	// And the upgraded operator injects the next pod.
	var scale appsv1.Deployment
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "helm"}, &scale))
	unscaled := client.MergeFrom(scale.DeepCopy())
	scale.Spec.Replicas = ptrTo[int32](2)
	must(t, k8s.Patch(ctx, &scale, unscaled))
	waitForCounts(t, set, 2)
	must(t, k8s.Delete(ctx, set))

	start = time.Now()
	helm(t, "uninstall", helmRelease, "--namespace", operatorNamespace, "--wait", "--timeout", "3m")
	var left []string
	eventually(t, converge, "what helm installed to go", func() (bool, string) {
		left = left[:0]
		for _, o := range manifest {
			cur := &unstructured.Unstructured{}
			cur.SetGroupVersionKind(o.GroupVersionKind())
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(o), cur); !apierrors.IsNotFound(err) {
				left = append(left, fmt.Sprintf("%s %s (%v)", o.GetKind(), o.GetName(), err))
			}
		}
		return len(left) == 0, strings.Join(left, ", ")
	})
	t.Logf("helm uninstall --wait removed the release's %d objects in %s", len(manifest), time.Since(start).Round(100*time.Millisecond))
	// What stays, as docs/operations.md says: the CRD (Helm never deletes crds/) and the
	// Secrets cert-manager wrote.
	must(t, k8s.Get(ctx, client.ObjectKey{Name: "sidecarsets.apps.sidecarset.io"}, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition"}}))
	var secrets corev1.SecretList
	must(t, k8s.List(ctx, &secrets, client.InNamespace(operatorNamespace)))
	var names []string
	for _, s := range secrets.Items {
		if !strings.HasPrefix(s.Name, "sh.helm.release.") {
			names = append(names, s.Name)
		}
	}
	slices.Sort(names)
	if want := []string{"webhook-ca", "webhook-server-cert"}; !slices.Equal(names, want) {
		t.Errorf("Secrets left in %s after helm uninstall: %v, want %v (docs/operations.md names them)", operatorNamespace, names, want)
	}
}

// helm runs bin/helm (make helm) and fails the test with its output on failure.
func helm(t *testing.T, args ...string) {
	t.Helper()
	if _, err := output(filepath.Join(root, "bin", "helm"), args...); err != nil {
		t.Fatal(err)
	}
}

// helmObjects are the objects of the release's manifest (not its CRD, which Helm keeps).
func helmObjects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	out, err := exec.Command(filepath.Join(root, "bin", "helm"), "get", "manifest", helmRelease, "--namespace", operatorNamespace).Output()
	must(t, err)
	objs, err := decodeObjects(out)
	must(t, err)
	if len(objs) < 10 {
		t.Fatalf("helm get manifest holds %d objects, want the chart's", len(objs))
	}
	return objs
}

// restoreDeploy puts back what `make deploy` installed for the other tests: whatever Helm left
// goes with the namespace, then make deploy, and waits until the operator serves.
func restoreDeploy(t *testing.T) {
	_, _ = output(filepath.Join(root, "bin", "helm"), "uninstall", helmRelease, "--namespace", operatorNamespace, "--wait")
	if err := k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}}); err != nil && !apierrors.IsNotFound(err) {
		t.Error(err)
	}
	eventually(t, 2*time.Minute, "namespace "+operatorNamespace+" to go", func() (bool, string) {
		err := k8s.Get(ctx, client.ObjectKey{Name: operatorNamespace}, &corev1.Namespace{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if err := deploy(); err != nil {
		t.Errorf("make deploy after the Helm test: %v", err)
	}
}
