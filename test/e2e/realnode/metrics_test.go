//go:build e2e

package realnode

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// TestMetricsAsTheDocsSay follows docs/operations.md: a token of the sidecarset-metrics-reader
// ServiceAccount the install includes reads the manager's metrics endpoint (on the local node,
// https://127.0.0.1:18443/metrics), which serves the operator's own metrics (a SidecarSet's
// status gauges, once there is one); without a token the endpoint refuses.
func TestMetricsAsTheDocsSay(t *testing.T) {
	// A SidecarSet, so that the operator has series of its own to serve (its status gauges).
	createSet(t, &appsv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "realnode-metrics"},
		Spec: appsv1alpha1.SidecarSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "metrics"}},
			Containers: []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "agent", Image: image("agent:v1")}}}}})
	tr, err := clientset.CoreV1().ServiceAccounts("sidecarset-system").CreateToken(ctx, "sidecarset-metrics-reader",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("kubectl create token sidecarset-metrics-reader: %v", err)
	}
	get := func(token string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:18443/metrics", nil)
		if err != nil {
			return 0, "", err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // curl -k, as the docs say: the manager's own certificate
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	eventually(t, converge, "the metrics endpoint to serve sidecarset_ metrics to the reader's token", func() (bool, string) {
		code, body, err := get(tr.Status.Token)
		if err != nil {
			return false, err.Error()
		}
		return code == http.StatusOK && strings.Contains(body, `sidecarset_pods{sidecarset="realnode-metrics"`), fmt.Sprintf("HTTP %d", code)
	})
	if code, _, err := get(""); err != nil || code == http.StatusOK {
		t.Errorf("without a token: HTTP %d, %v; want a refusal", code, err)
	}
}

func ptrTo[T any](v T) *T { return &v }
