//go:build e2e

package realnode

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
)

// TestNodeRefusesAnonymousCallers: the node's kubelet, on 127.0.0.1, answers 401 to a caller
// without credentials (any user of the machine could otherwise exec into the node's pods: the
// operator's, cert-manager's), serves one whose certificate the cluster CA signed and whose user
// the API server authorizes, and shows a serving certificate of the cluster CA; the API server
// reaches it with its own kubelet client certificate. The node's registry refuses a push without
// the credentials hack/node.sh made (which could replace an image the node runs).
func TestNodeRefusesAnonymousCallers(t *testing.T) {
	var n corev1.Node
	must(t, k8s.Get(ctx, client.ObjectKey{Name: "real-node-0"}, &n))
	kubelet := fmt.Sprintf("https://127.0.0.1:%d", n.Status.DaemonEndpoints.KubeletEndpoint.Port)
	cfg, err := config.GetConfig()
	must(t, err)
	admin, err := rest.TLSConfigFor(cfg) // the cluster CA and the admin's client certificate
	must(t, err)
	anonymous := &tls.Config{RootCAs: admin.RootCAs, MinVersion: tls.VersionTLS12}
	get := func(tlsConfig *tls.Config, path string) (int, error) {
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
		resp, err := hc.Get(kubelet + path)
		if err != nil {
			return 0, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}

	for _, path := range []string{"/pods", "/exec/cert-manager/a-pod/a-container?command=id", "/containerLogs/cert-manager/a-pod/a-container"} {
		if code, err := get(anonymous, path); err != nil || code != http.StatusUnauthorized {
			t.Errorf("GET %s without a client certificate: %d, %v; want 401 Unauthorized", path, code, err)
		}
	}
	// The admin's certificate passes: the kubelet authenticates it by the cluster CA and the API
	// server authorizes it. Both connections checked the kubelet's serving certificate against the
	// cluster CA, for 127.0.0.1.
	if code, err := get(admin, "/pods"); err != nil || code != http.StatusOK {
		t.Errorf("GET /pods with the admin's client certificate: %d, %v; want 200 OK", code, err)
	}
	// Through the API server, which calls the kubelet with its kubelet client certificate: the
	// operator's log. (Not nodes/proxy: the API server refuses to proxy to a loopback address.)
	var pods corev1.PodList
	must(t, k8s.List(ctx, &pods, client.InNamespace(operatorNamespace)))
	if len(pods.Items) == 0 {
		t.Fatalf("no pod in %s", operatorNamespace)
	}
	if _, err := clientset.CoreV1().Pods(operatorNamespace).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{Container: pods.Items[0].Spec.Containers[0].Name, TailLines: ptr.To[int64](1)}).DoRaw(ctx); err != nil {
		t.Errorf("the operator's log through the API server (its kubelet client certificate): %v", err)
	}

	ref, err := name.NewTag(registry+"/anonymous-push:test", name.Insecure)
	must(t, err)
	var terr *transport.Error
	if err := remote.Write(ref, empty.Image); !errors.As(err, &terr) || terr.StatusCode != http.StatusUnauthorized {
		t.Errorf("a push to the node's registry without its credentials: %v, want 401 Unauthorized", err)
	}
	if _, err := remote.Head(ref); err == nil {
		t.Errorf("%s exists after a push without credentials", ref)
	}
}
