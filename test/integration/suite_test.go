// Package integration runs the operator, exactly as main.go wires it, against a real
// kube-apiserver (envtest), with the CRD and webhook configurations rendered from
// config/default. Every assertion reads through a client that bypasses the manager's cache.
package integration

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/operator"
	"github.com/sidecarset/sidecarset-operator/internal/policy"
	ourwebhook "github.com/sidecarset/sidecarset-operator/internal/webhook"
)

var (
	// k8s is a direct (uncached) client of the test API server.
	k8s client.Client
	// ctx lives as long as the suite.
	ctx context.Context
	// op is the operator running in this process.
	op *operator.Operator
	// upgradeable records what the operator tells OLM through its OperatorCondition.
	upgradeable = &recordedCondition{}
	// adminConfig is the test API server's admin config; manifestsDir holds the rendered
	// kustomizations (default.yaml, policy-mode.yaml).
	adminConfig  *rest.Config
	manifestsDir string
	// hooks are envtest's webhook serving options: its certificate and CA, for test webhooks.
	hooks *envtest.WebhookInstallOptions
)

func TestMain(m *testing.M) {
	code, err := runSuite(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration suite:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func runSuite(m *testing.M) (int, error) {
	manifests := os.Getenv("SIDECARSET_TEST_MANIFESTS")
	if manifests == "" || os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return 0, fmt.Errorf("run the integration tests with `make test`: it builds kube-apiserver and etcd " +
			"(KUBEBUILDER_ASSETS) and renders config/default (SIDECARSET_TEST_MANIFESTS)")
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true)))
	env := &envtest.Environment{
		CRDInstallOptions:     envtest.CRDInstallOptions{Paths: []string{manifests}, ErrorIfPathMissing: true},
		WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: []string{manifests}},
		ErrorIfCRDPathMissing: true,
	}
	productionAdmissionChain(env)
	if err := turnGatesOff(env, os.Getenv("SIDECARSET_TEST_FEATURE_GATES")); err != nil {
		return 0, err
	}
	cfg, err := env.Start()
	if err != nil {
		return 0, fmt.Errorf("starting envtest: %w", err)
	}
	adminConfig, manifestsDir = cfg, filepath.Dir(manifests)
	if kubernetesMinor, err = serverMinor(cfg); err != nil {
		return 0, err
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping envtest:", err)
		}
	}()
	if adminKubeconfig, err = writeKubeconfig(env); err != nil {
		return 0, err
	}
	defer func() { _ = os.Remove(adminKubeconfig) }()
	var cancel context.CancelFunc
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	// The manager runs as its ServiceAccount with exactly the RBAC config/default grants it, so
	// a permission the markers forgot fails these tests.
	managerCfg, err := asManagerServiceAccount(ctx, cfg, manifests)
	if err != nil {
		return 0, err
	}
	hooks = &env.WebhookInstallOptions
	stopped, err := startManager(ctx, cfg, managerCfg, &env.WebhookInstallOptions)
	if err != nil {
		return 0, err
	}
	defer stopBeforeTimeout(env)()
	code := m.Run()
	cancel()
	if err := <-stopped; err != nil {
		return code, fmt.Errorf("manager: %w", err)
	}
	return code, nil
}

// stopBeforeTimeout stops env's control plane shortly before the test binary's -timeout
// panics, which ends the process without running TestMain's deferred calls: the kube-apiserver
// and etcd the suite started would be left running. It returns what cancels the watch.
func stopBeforeTimeout(env *envtest.Environment) (cancel func()) {
	flag.Parse()
	f := flag.Lookup("test.timeout")
	if f == nil {
		return func() {}
	}
	timeout, _ := f.Value.(flag.Getter).Get().(time.Duration)
	// Room for envtest to stop both (each is given 20 s to exit before it is killed).
	const margin = 60 * time.Second
	if timeout <= margin {
		return func() {}
	}
	timer := time.AfterFunc(timeout-margin, func() {
		fmt.Fprintf(os.Stderr, "integration suite: the -timeout of %s ends the tests in %s; stopping the control plane the suite started\n", timeout, margin)
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping envtest:", err)
		}
	})
	return func() { timer.Stop() }
}

// kubernetesMinor is the suite's API server's minor version: 1.<kubernetesMinor>. The suite
// runs against the oldest version the operator supports and the newest (make test-versions).
var kubernetesMinor int

// serverGitVersion is the suite's API server's version (its /version's gitVersion).
var serverGitVersion string

// policyOptions are the options the operator renders policies with for the suite's API server,
// in scope.
func policyOptions(scope inject.Scope) policy.Options {
	return policy.Options{Scope: scope, LazyPod: policy.ReadsPodLazily(serverGitVersion)}
}

// serverMinor reads the API server's version: its minor, and its gitVersion into
// serverGitVersion.
func serverMinor(cfg *rest.Config) (int, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return 0, err
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return 0, fmt.Errorf("reading the API server's version: %w", err)
	}
	serverGitVersion = v.GitVersion
	minor, err := strconv.Atoi(strings.TrimSuffix(v.Minor, "+"))
	if err != nil {
		return 0, fmt.Errorf("the API server's minor version %q: %w", v.Minor, err)
	}
	return minor, nil
}

// needsKubernetes skips a test of a feature that API servers before 1.<minor> do not serve.
// Each such feature has a test of what older servers give instead (the operator's refusal,
// or the pods it reports not updatable), and the version matrix runs both sides.
func needsKubernetes(t *testing.T, minor int, feature string) {
	t.Helper()
	if kubernetesMinor < minor {
		t.Skipf("%s needs Kubernetes 1.%d; this API server is 1.%d (its own behaviour is tested instead)", feature, minor, kubernetesMinor)
	}
}

// featureGates are the API server's feature gates this run sets (SIDECARSET_TEST_FEATURE_GATES,
// as `make test-gates-off` gives them), by name; gates it does not name keep their defaults.
var featureGates = map[string]bool{}

// turnGatesOff passes gates ("Name=false,Other=false", kube-apiserver's --feature-gates) to the
// suite's API server and records them for gateOff.
func turnGatesOff(env *envtest.Environment, gates string) error {
	if gates == "" {
		return nil
	}
	for _, kv := range strings.Split(gates, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(kv), "=")
		on, err := strconv.ParseBool(value)
		if !ok || err != nil {
			return fmt.Errorf("SIDECARSET_TEST_FEATURE_GATES: %q is not Name=true|false", kv)
		}
		featureGates[name] = on
	}
	env.ControlPlane.GetAPIServer().Configure().Set("feature-gates", gates)
	return nil
}

// gateOff reports whether this run turned the API server's feature gate off.
func gateOff(name string) bool {
	on, set := featureGates[name]
	return set && !on
}

// needsGate skips a test of a feature whose gate this run turns off; the tests of what the API
// server does without it run in its place.
func needsGate(t *testing.T, gate, feature string) {
	t.Helper()
	if gateOff(gate) {
		t.Skipf("%s needs the feature gate %s, which this run turns off (its own behaviour is tested instead)", feature, gate)
	}
}

// AdmissionPlugins are the in-tree admission plugins the suite's kube-apiserver runs beyond its
// defaults, as production clusters do. envtest turns ServiceAccount off (it runs no controller
// to create the default ServiceAccount); the tests create it in every namespace they use
// instead, since an injector that undoes what these plugins give a sidecar breaks pods only
// where they run.
const AdmissionPlugins = "ServiceAccount,LimitRanger,AlwaysPullImages,PodSecurity"

func productionAdmissionChain(env *envtest.Environment) {
	env.ControlPlane.GetAPIServer().Configure().
		Disable("disable-admission-plugins").
		Set("enable-admission-plugins", AdmissionPlugins)
}

// startManager starts the operator in this process (talking to the API server as managerCfg)
// and waits until it is ready to admit; cfg is the admin's, for the tests' own client.
func startManager(ctx context.Context, cfg, managerCfg *rest.Config, hooks *envtest.WebhookInstallOptions) (<-chan error, error) {
	scheme, err := operator.NewScheme()
	if err != nil {
		return nil, err
	}
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(managerCfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  operator.CacheOptions(operatorNamespace, operator.InjectionWebhook),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer: ourwebhook.NewServer(webhook.Options{
			Host: hooks.LocalServingHost, Port: hooks.LocalServingPort, CertDir: hooks.LocalServingCertDir,
		}),
	})
	if err != nil {
		return nil, err
	}
	op, err = operator.Setup(ctx, mgr, operator.Options{Namespace: operatorNamespace, Conditions: upgradeable,
		PatchPodMetadataAllowedKeys: []string{allowedAnnotationPrefix + "*"}, RefusalQuietPeriod: refusalQuietPeriod,
		ImageRecheck: imageRecheck})
	if err != nil {
		return nil, err
	}
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()
	if err := waitReady(ctx, mgr, hooks); err != nil {
		return nil, err
	}
	return stopped, nil
}

// allowedAnnotationPrefix is what the suite's operator lets SidecarSets patch onto pods
// (--patch-pod-metadata-allowed-keys=integration.example.com/*).
const allowedAnnotationPrefix = "integration.example.com/"

// refusalQuietPeriod is how long after the latest refusal the suite's sets stop saying
// Refusing (ten minutes in production).
const refusalQuietPeriod = 12 * time.Second

// imageRecheck is how often the suite's operator reads the tags of sets pinning digests again
// (ten minutes in production).
const imageRecheck = 2 * time.Second

// operatorNamespace is the namespace config/default installs into; its Pods are never injected.
const operatorNamespace = "sidecarset-system"

func waitReady(ctx context.Context, mgr ctrl.Manager, hooks *envtest.WebhookInstallOptions) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return errors.New("the manager's caches did not sync within 30s: see the log above (RBAC?)")
	}
	for ctx.Err() == nil {
		if op.Sets.Ready() && mgr.GetWebhookServer().StartedChecker()(nil) == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("manager not ready after 30s (webhook server %s:%d, certs %s)", hooks.LocalServingHost,
		hooks.LocalServingPort, filepath.Clean(hooks.LocalServingCertDir))
}

// adminKubeconfig is a kubeconfig file for the suite's API server, as an admin: what the
// kubectl plugin reads.
var adminKubeconfig string

func writeKubeconfig(env *envtest.Environment) (string, error) {
	user, err := env.AddUser(envtest.User{Name: "plugin-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", fmt.Errorf("adding the plugin's user: %w", err)
	}
	raw, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp("", "sidecarset-it-kubeconfig-")
	if err != nil {
		return "", err
	}
	if _, err := f.Write(raw); err != nil {
		return "", errors.Join(err, f.Close())
	}
	return f.Name(), f.Close()
}
