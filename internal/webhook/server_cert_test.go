package webhook

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// writeCertificate writes a self-signed certificate for 127.0.0.1 with the given serial number
// and validity, and its key, to dir's tls.crt and tls.key.
func writeCertificate(t *testing.T, dir string, serial int64, notAfter time.Time) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "webhook"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    notAfter.Add(-48 * time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	// Like the kubelet, replace each file whole rather than write into it.
	for name, block := range map[string]*pem.Block{"tls.crt": {Type: "CERTIFICATE", Bytes: der}, "tls.key": {Type: "EC PRIVATE KEY", Bytes: keyDER}} {
		tmp := filepath.Join(dir, "."+name)
		if err := os.WriteFile(tmp, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// startCertDirServer starts a Server on a free local port serving the certificate in dir, and
// returns it and its address once it has started.
func startCertDirServer(t *testing.T, dir string) (*Server, string) {
	t.Helper()
	port := freePort(t)
	s := NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: dir})
	s.SetDrain(0)
	runServer(t, s)
	addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(port))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := s.servedCertificate(); err == nil {
			return s, addr
		}
		if time.Now().After(deadline) {
			t.Fatal("the server did not start within 10s")
		}
	}
}

// servedSerial is the serial number of the certificate the server at addr presents.
func servedSerial(t *testing.T, addr string) int64 {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test's own server
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// TestReadyMeansServingTheCurrentCertificate: the readiness check passes only while the server
// presents the certificate its files hold now. A renewed certificate on disk is read by the
// check itself (not ten seconds later by the watcher's poll), so a ready replica never presents
// a replaced certificate; one the server cannot read, or that has expired, makes it not ready,
// naming the file or the expiry.
func TestReadyMeansServingTheCurrentCertificate(t *testing.T) {
	dir := t.TempDir()
	later := time.Now().Add(24 * time.Hour)
	writeCertificate(t, dir, 1, later)
	s, addr := startCertDirServer(t, dir)
	check := s.StartedChecker()
	if err := check(nil); err != nil {
		t.Fatalf("ready check on a fresh certificate: %v", err)
	}
	if got := servedSerial(t, addr); got != 1 {
		t.Fatalf("serves certificate %d, want 1", got)
	}

	t.Run("renewed on disk", func(t *testing.T) {
		for serial := int64(2); serial <= 4; serial++ {
			writeCertificate(t, dir, serial, later)
			if err := check(nil); err != nil {
				t.Fatalf("ready check right after renewal %d: %v", serial, err)
			}
			if got := servedSerial(t, addr); got != serial {
				t.Errorf("after a passing ready check the server presents certificate %d, want the renewed %d", got, serial)
			}
		}
	})
	t.Run("a key that does not match", func(t *testing.T) {
		keep, err := os.ReadFile(filepath.Join(dir, "tls.key"))
		if err != nil {
			t.Fatal(err)
		}
		other := t.TempDir()
		writeCertificate(t, other, 5, later)
		crt, err := os.ReadFile(filepath.Join(other, "tls.crt"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "tls.crt"), crt, 0o600); err != nil {
			t.Fatal(err)
		}
		err = check(nil)
		if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "tls.crt")) {
			t.Errorf("ready check with tls.crt and tls.key of different pairs = %v, want an error naming %s", err, filepath.Join(dir, "tls.crt"))
		}
		if got := servedSerial(t, addr); got != 4 {
			t.Errorf("with an unreadable pair on disk the server presents %d, want the last good one, 4", got)
		}
		// The pair made whole again (the kubelet's next write): ready.
		if err := os.WriteFile(filepath.Join(dir, "tls.key"), keep, 0o600); err != nil {
			t.Fatal(err)
		}
		writeCertificate(t, dir, 6, later)
		if err := check(nil); err != nil {
			t.Errorf("ready check once the pair is whole again: %v", err)
		}
	})
	t.Run("expired", func(t *testing.T) {
		writeCertificate(t, dir, 7, time.Now().Add(-time.Minute))
		err := check(nil)
		if err == nil || !strings.Contains(err.Error(), "expired") {
			t.Errorf("ready check presenting an expired certificate = %v, want an error saying it expired", err)
		}
	})
}
