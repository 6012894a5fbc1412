//go:build e2e

package realnode

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"testing"
	"time"

	cmutil "github.com/cert-manager/cert-manager/pkg/api/util"
	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset-operator/test/builders"
	"github.com/sidecarset/sidecarset-operator/test/testutil"
)

const (
	// webhookAddress is where the operator on the real node serves its webhooks
	// (config/local-node).
	webhookAddress = "127.0.0.1:19443"
	servingCert    = "sidecarset-serving-cert"
	servingSecret  = "webhook-server-cert"
	caSecret       = "webhook-ca"
)

// TestCertificateRotationUnderLoad: cert-manager renews the webhook's serving certificate three
// times (as `cmctl renew` does: the Certificate's Issuing condition set) while opted-in pods are
// created five times a second. Every creation is admitted with its sidecar; the replica presents
// each renewed certificate without a restart, once the kubelet has mounted it; the caBundle the
// API server trusts stays the CA's, which signs every certificate presented.
func TestCertificateRotationUnderLoad(t *testing.T) {
	const rotations = 3
	ns := newNamespace(t, "rotation")
	createSet(t, builders.SidecarSet("rotation-agent", builders.Selecting("rotation"), builders.WithImage(image("agent:v1"))))
	var ca corev1.Secret
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: caSecret}, &ca))
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca.Data["tls.crt"]) {
		t.Fatalf("Secret %s holds no CA certificate", caSecret)
	}
	caBundle := webhookCABundle(t)
	if inBundle := pemCertificates(t, caBundle); len(inBundle) != 1 || !inBundle[0].Equal(pemCertificates(t, ca.Data["tls.crt"])[0]) {
		t.Fatalf("the webhooks' caBundle (%d certificates) is not the CA in Secret %s", len(inBundle), caSecret)
	}
	restarts := operatorRestarts(t)

	load := startAdmissions(t, ns, "rotation", "rotation-agent", 200*time.Millisecond)
	start := time.Now()
	time.Sleep(2 * time.Second)
	served := []*x509.Certificate{presented(t)}
	var pickups []time.Duration
	for i := 1; i <= rotations; i++ {
		before := secretCertificate(t)
		renew(t, i)
		eventually(t, converge, fmt.Sprintf("cert-manager to write renewal %d into Secret %s", i, servingSecret), func() (bool, string) {
			now := secretCertificate(t)
			return !now.Equal(before), "serial " + now.SerialNumber.String()
		})
		renewed := secretCertificate(t)
		pickups = append(pickups, eventually(t, 2*converge, fmt.Sprintf("the replica to present renewal %d", i), func() (bool, string) {
			now := presented(t)
			return now.Equal(renewed), fmt.Sprintf("presents serial %s, the Secret holds %s", now.SerialNumber, renewed.SerialNumber)
		}))
		served = append(served, renewed)
		time.Sleep(2 * time.Second)
	}
	load.halt()
	got := load.tally(start)

	t.Logf("%d renewals of the serving certificate, presented %v after each was written; %d pods created meanwhile, %d failed, %d without the sidecar",
		rotations, pickups, got.Sent, got.Failed, got.WithoutSidecar)
	if got.Failed != 0 || got.WithoutSidecar != 0 {
		t.Errorf("during the renewals %d of %d creations failed (first: %v) and %d came back without the sidecar; want 0 and 0",
			got.Failed, got.Sent, got.FirstFailure, got.WithoutSidecar)
	}
	if least := rotations * 5; got.Sent < least {
		t.Errorf("only %d creations were sent during %d renewals; want at least %d for the test to mean something", got.Sent, rotations, least)
	}
	for i, c := range served {
		if _, err := c.Verify(x509.VerifyOptions{Roots: roots, DNSName: "sidecarset-webhook-service.sidecarset-system.svc"}); err != nil {
			t.Errorf("certificate %d presented (serial %s) does not verify against the CA: %v", i, c.SerialNumber, err)
		}
		for _, d := range served[:i] {
			if d.Equal(c) {
				t.Errorf("certificate %d (serial %s) was presented before: a renewal did not change it", i, c.SerialNumber)
			}
		}
	}
	if now := webhookCABundle(t); !bytes.Equal(now, caBundle) {
		// Byte for byte: the API server reconnects with whatever the caBundle holds.
		t.Errorf("the webhooks' caBundle changed with the serving certificate's renewal; the CA should have stayed")
	}
	if now := operatorRestarts(t); now != restarts {
		t.Errorf("the operator restarted %d times during the renewals; want it to read each certificate without a restart", now-restarts)
	}
}

// renew asks cert-manager to issue the serving certificate again, as `cmctl renew` does.
func renew(t *testing.T, i int) {
	t.Helper()
	cert := &certmanagerv1.Certificate{}
	cert.Namespace, cert.Name = operatorNamespace, servingCert
	must(t, testutil.EditStatus(ctx, k8s, cert, func(c *certmanagerv1.Certificate) {
		cmutil.SetCertificateCondition(c, c.Generation, certmanagerv1.CertificateConditionIssuing, cmmeta.ConditionTrue,
			"ManuallyTriggered", fmt.Sprintf("Renewal %d by the rotation e2e test", i))
	}))
}

// secretCertificate is the serving certificate in its Secret.
func secretCertificate(t *testing.T) *x509.Certificate {
	t.Helper()
	var s corev1.Secret
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: servingSecret}, &s))
	return pemCertificates(t, s.Data["tls.crt"])[0]
}

// pemCertificates parses every certificate in data, and fails the test if there is none.
func pemCertificates(t *testing.T, data []byte) []*x509.Certificate {
	t.Helper()
	var certs []*x509.Certificate
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		c, err := x509.ParseCertificate(block.Bytes)
		must(t, err)
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		t.Fatalf("no PEM certificate in %d bytes", len(data))
	}
	return certs
}

// presented is the certificate the operator's webhook server presents.
func presented(t *testing.T) *x509.Certificate {
	t.Helper()
	conn, err := tls.Dial("tcp", webhookAddress, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // read, and verified by the caller
	must(t, err)
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().PeerCertificates[0]
}

func webhookCABundle(t *testing.T) []byte {
	t.Helper()
	var hooks admissionregistrationv1.MutatingWebhookConfiguration
	must(t, k8s.Get(ctx, client.ObjectKey{Name: "sidecarset-mutating-webhook-configuration"}, &hooks))
	return hooks.Webhooks[0].ClientConfig.CABundle
}

// operatorRestarts is the restart count of the operator's container, summed over its pods.
func operatorRestarts(t *testing.T) int32 {
	t.Helper()
	var n int32
	for _, p := range operatorPods(t) {
		for _, st := range p.Status.ContainerStatuses {
			n += st.RestartCount
		}
	}
	return n
}
