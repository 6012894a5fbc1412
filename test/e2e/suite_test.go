//go:build e2e

// Package e2e tests the operator as it really runs: the manager binary as its own processes
// behind the webhook configurations rendered from config/, on a local cluster whose pods are
// scheduled and turn Ready (kwok). Run it with `make test-e2e`, which starts the cluster,
// installs the CRD and webhooks, and tears everything down afterwards.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/sidecarset/sidecarset-operator/internal/operator"
	"github.com/sidecarset/sidecarset-operator/test/testutil"
)

var (
	// k8s talks to the local cluster directly (no cache).
	k8s client.Client
	ctx = context.Background()
	// demo is hack/demo.sh, which starts and stops operator replicas.
	demo string
	// stateDir is the local cluster's state directory (logs, pids, ports).
	stateDir string
	// restConfig reaches the local cluster's API server (its /metrics too).
	restConfig *rest.Config
	// cluster takes the common steps (namespaces, SidecarSets, rollouts) through k8s.
	cluster testutil.Cluster
)

const operatorNamespace = "sidecarset-system"

func TestMain(m *testing.M) {
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		bad, err := uncataloguedEvents()
		if err != nil || len(bad) > 0 {
			fmt.Fprintln(os.Stderr, "e2e: events outside the event catalog:", err, strings.Join(bad, "\n"))
			code = 1
		}
	}
	if err := run("operator-stop", "--all"); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: stopping operators:", err)
	}
	os.Exit(code)
}

func setup() error {
	demo, stateDir = os.Getenv("SIDECARSET_DEMO"), os.Getenv("SIDECARSET_CLUSTER_DIR")
	if demo == "" || stateDir == "" || os.Getenv("KUBECONFIG") == "" {
		return fmt.Errorf("run these tests with `make test-e2e`: it starts the local cluster and sets " +
			"SIDECARSET_DEMO, SIDECARSET_CLUSTER_DIR and KUBECONFIG")
	}
	cfg, err := config.GetConfig()
	if err != nil {
		return err
	}
	restConfig = cfg
	ctrl.SetLogger(logr.Discard()) // the operators log to their own files
	scheme, err := operator.NewScheme()
	if err != nil {
		return err
	}
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	cluster = testutil.Cluster{Ctx: ctx, Client: k8s, Converge: converge}
	return startOperator("operator-0")
}

// startOperator starts one replica with leader election, as the manager Deployment runs it,
// and waits for its /readyz.
func startOperator(name string) error {
	return run("operator-start", name, "--leader-elect", "--leader-election-namespace", operatorNamespace)
}

// stopOperator stops a replica with a signal: KILL leaves its lease to expire, TERM releases it.
func stopOperator(t *testing.T, name, signal string) {
	t.Helper()
	if err := run("operator-stop", name, signal); err != nil {
		t.Fatal(err)
	}
}

func run(args ...string) error { return runWithEnv(nil, args...) }

// runWithEnv runs hack/demo.sh with args and env added to the environment.
func runWithEnv(env []string, args ...string) error {
	cmd := exec.Command(demo, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", filepath.Base(demo), strings.Join(args, " "), err, out)
	}
	return nil
}

// eventually polls cond every 200 ms until it holds or timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	return testutil.Eventually(t, timeout, 200*time.Millisecond, what, cond)
}
