//go:build e2e

package realnode

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/test/builders"
)

// waitForOperator waits until the operator's Deployment is available and its webhooks answer:
// cert-manager has issued the serving certificate, its cainjector has put the CA into the webhook
// configurations, and a server-side dry run of a SidecarSet passes the validating webhook.
func waitForOperator() error {
	deadline := time.Now().Add(3 * time.Minute)
	var last string
	for time.Now().Before(deadline) {
		ok, why := operatorServing()
		if ok {
			return nil
		}
		last = why
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("the operator deployed from %s did not serve within 3 minutes: %s", managerImage, last)
}

func operatorServing() (bool, string) {
	var dep appsv1.Deployment
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: operatorName}, &dep); err != nil {
		return false, err.Error()
	}
	if dep.Status.AvailableReplicas < 1 {
		return false, fmt.Sprintf("Deployment %s: %d available replicas", operatorName, dep.Status.AvailableReplicas)
	}
	var hooks admissionregistrationv1.MutatingWebhookConfiguration
	if err := k8s.Get(ctx, client.ObjectKey{Name: "sidecarset-mutating-webhook-configuration"}, &hooks); err != nil {
		return false, err.Error()
	}
	for _, h := range hooks.Webhooks {
		if len(h.ClientConfig.CABundle) == 0 {
			return false, "webhook " + h.Name + " has no caBundle yet (cert-manager's cainjector)"
		}
	}
	probe := builders.SidecarSet("dry-run-probe", builders.Selecting("dry-run-probe"), builders.WithImage(registry+"/agent:v1"))
	if err := k8s.Create(ctx, probe, client.DryRunAll); err != nil {
		return false, "a dry-run SidecarSet: " + err.Error()
	}
	return true, ""
}

// TestOperatorRunsFromItsImage: the manager runs on the real node from the image `make image`
// built, holds the leader election lease, and its webhook presents the certificate cert-manager
// issued (the caBundle the cainjector wrote is that certificate's CA). One replica: on one node
// with the host's network, a second would need the same ports.
func TestOperatorRunsFromItsImage(t *testing.T) {
	var pods corev1.PodList
	must(t, k8s.List(ctx, &pods, client.InNamespace(operatorNamespace), client.MatchingLabels{"control-plane": "controller-manager"}))
	if len(pods.Items) != 1 {
		t.Fatalf("%d operator pods, want 1", len(pods.Items))
	}
	pod := pods.Items[0]
	if pod.Spec.NodeName != "real-node-0" || len(pod.Status.ContainerStatuses) != 1 {
		t.Fatalf("operator pod %s on node %q with statuses %+v", pod.Name, pod.Spec.NodeName, pod.Status.ContainerStatuses)
	}
	st := pod.Status.ContainerStatuses[0]
	if !inject.SameImage(managerImage, st.Image, st.ImageID) || !st.Ready || st.RestartCount != 0 ||
		!strings.HasPrefix(st.ContainerID, "containerd://") {
		t.Errorf("operator container runs %s (%s), ready %v, %d restarts, id %s; want %s ready with no restart in containerd",
			st.Image, st.ImageID, st.Ready, st.RestartCount, st.ContainerID, managerImage)
	}
	// The replica's identity is its hostname, which a pod on the host's network shares with
	// the node (this machine).
	host, err := os.Hostname()
	must(t, err)
	var lease coordinationv1.Lease
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: "sidecarset-operator.sidecarset.io"}, &lease))
	if holder := ptr.Deref(lease.Spec.HolderIdentity, ""); !strings.HasPrefix(holder, host+"_") || lease.Spec.RenewTime == nil ||
		time.Since(lease.Spec.RenewTime.Time) > 30*time.Second {
		t.Errorf("leader election lease held by %q, renewed %v; want the operator pod (identity %s_...) renewing it", holder, lease.Spec.RenewTime, host)
	}
	var secret corev1.Secret
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: "webhook-server-cert"}, &secret))
	var hooks admissionregistrationv1.MutatingWebhookConfiguration
	must(t, k8s.Get(ctx, client.ObjectKey{Name: "sidecarset-mutating-webhook-configuration"}, &hooks))
	if ca := secret.Data["ca.crt"]; len(ca) == 0 || !bytes.Equal(hooks.Webhooks[0].ClientConfig.CABundle, ca) {
		t.Errorf("the webhook's caBundle (%d bytes) is not the CA of cert-manager's certificate (%d bytes)",
			len(hooks.Webhooks[0].ClientConfig.CABundle), len(ca))
	}
}

// undeployLeavesNothing runs `make undeploy` and waits until no object that `make deploy`
// applied exists any more (the namespace, and with it the operator's pods, included).
func undeployLeavesNothing() error {
	start := time.Now()
	if _, err := output("make", "-C", root, "undeploy", "DEPLOY_CONFIG="+deployConfig); err != nil {
		return err
	}
	rendered, err := exec.Command(filepath.Join(root, "bin", "kustomize"), "build", deployConfig).Output()
	if err != nil {
		return fmt.Errorf("kustomize build %s: %w", deployConfig, err)
	}
	objs, err := decodeObjects(rendered)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var left []string
		for _, o := range objs {
			cur := &unstructured.Unstructured{}
			cur.SetGroupVersionKind(o.GroupVersionKind())
			err := k8s.Get(ctx, client.ObjectKeyFromObject(o), cur)
			if err == nil {
				left = append(left, o.GetKind()+" "+o.GetName())
			} else if !apierrors.IsNotFound(err) && !strings.Contains(err.Error(), "no matches for kind") {
				left = append(left, fmt.Sprintf("%s %s (%v)", o.GetKind(), o.GetName(), err))
			}
		}
		if len(left) == 0 {
			fmt.Printf("realnode e2e: make undeploy removed all %d objects of make deploy in %s\n", len(objs), time.Since(start).Round(100*time.Millisecond))
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("2 minutes after make undeploy these objects of make deploy remain: %s", strings.Join(left, ", "))
		}
		time.Sleep(time.Second)
	}
}

// decodeObjects decodes a stream of YAML or JSON documents, leaving out empty ones.
func decodeObjects(raw []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, err
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}
