//go:build e2e

// Package realnode tests the operator where everything is real: the local cluster's real node
// (hack/node.sh: containerd and the kubelet running the test images of test/images as real
// containers) and the operator itself running from its image, deployed by `make deploy` with
// cert-manager's controller, webhook and cainjector (built from cert-manager's Go modules)
// issuing the webhook certificate the API server trusts. Run it with `make test-e2e-realnode`
// (part of `make test-e2e`), which starts the cluster with its real node and tears it down.
//
// TestMain deploys cert-manager and the operator before the tests, and after them checks that
// `make undeploy` leaves nothing behind.
package realnode

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/sidecarset/sidecarset-operator/internal/operator"
	"github.com/sidecarset/sidecarset-operator/test/testutil"
)

var (
	ctx = context.Background()
	// k8s talks to the local cluster directly (no cache); clientset reads pod logs.
	k8s       client.Client
	clientset kubernetes.Interface
	// root is the repository; node is hack/node.sh.
	root, node string
	// registry is the node's loopback registry (host:port), where every image comes from.
	registry string
	// deployConfig is the kustomization `make deploy` applies (hack/node.sh deploy-config).
	deployConfig string
	// managerImage is the operator's image, pushed to the registry.
	managerImage string
	// cluster takes the common steps (namespaces, SidecarSets, rollouts) through k8s.
	cluster testutil.Cluster
)

const (
	operatorNamespace = "sidecarset-system"
	operatorName      = "sidecarset-controller-manager"
	// converge bounds every wait for the operator or the kubelet.
	converge = 90 * time.Second
)

func TestMain(m *testing.M) {
	start := time.Now()
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "realnode e2e: setup:", err)
		os.Exit(1)
	}
	fmt.Printf("realnode e2e: cert-manager and the operator deployed from their images in %s\n", time.Since(start).Round(100*time.Millisecond))
	code := m.Run()
	if err := undeployLeavesNothing(); err != nil {
		fmt.Fprintln(os.Stderr, "realnode e2e: make undeploy:", err)
		code = 1
	}
	os.Exit(code)
}

func setup() error {
	node = os.Getenv("SIDECARSET_NODE")
	if node == "" || os.Getenv("KUBECONFIG") == "" {
		return fmt.Errorf("run these tests with `make test-e2e-realnode`: it starts the local cluster with a real node " +
			"and sets SIDECARSET_NODE and KUBECONFIG")
	}
	root = filepath.Dir(filepath.Dir(node))
	cfg, err := config.GetConfig()
	if err != nil {
		return err
	}
	ctrl.SetLogger(logr.Discard())
	scheme, err := operator.NewScheme()
	if err != nil {
		return err
	}
	// cert-manager's types, for the certificate rotation test.
	if err := certmanagerv1.AddToScheme(scheme); err != nil {
		return err
	}
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	if clientset, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	cluster = testutil.Cluster{Ctx: ctx, Client: k8s, Converge: converge}
	if registry, err = output(node, "registry"); err != nil {
		return err
	}
	if _, err := output(node, "cert-manager"); err != nil {
		return err
	}
	managerImage = registry + "/sidecarset-operator:e2e"
	if _, err := output("make", "-C", root, "image", "IMG="+managerImage); err != nil {
		return err
	}
	if _, err := output(node, "push", "sidecarset-operator:e2e", filepath.Join(root, "bin", "manager-image.tar")); err != nil {
		return err
	}
	if deployConfig, err = output(node, "deploy-config"); err != nil {
		return err
	}
	return deploy()
}

// deploy runs `make deploy` of the manager image on the node and waits until the operator
// serves.
func deploy() error {
	if _, err := output("make", "-C", root, "deploy", "IMG="+managerImage, "DEPLOY_CONFIG="+deployConfig); err != nil {
		return err
	}
	return waitForOperator()
}

// output runs a command and returns its stdout's last line; on failure, the error holds
// stderr's tail.
func output(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s%s", filepath.Base(name), strings.Join(args, " "), err, tail(stdout.String()), tail(stderr.String()))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	return strings.TrimSpace(lines[len(lines)-1]), nil
}

func tail(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n") + "\n"
}

// eventually polls cond every 200 ms until it holds or timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	return testutil.Eventually(t, timeout, 200*time.Millisecond, what, cond)
}

var must = testutil.Must
