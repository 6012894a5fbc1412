// Command controller starts the part of cert-manager's controller our tests use: the control
// loops that issue and renew Certificates into Secrets from SelfSigned and CA Issuers and
// ClusterIssuers (issuer readiness, CertificateRequest approval and signing, and the Certificate
// loops: trigger, key manager, request manager, issuing, readiness, revision manager).
// ACME, Vault, Venafi, the ingress and Gateway shims and the experimental
// CertificateSigningRequest signers are not run.
//
// The control loops are cert-manager's own (pkg/controller/...); this file reads the
// configuration, serves /livez (healthz) and /metrics, holds the leader election Lease and starts
// the loops. Flags taken: the chart's that matter here (--config, -v, --cluster-resource-namespace,
// --leader-election-*, --feature-gates, --enable-certificate-owner-ref, --controllers) and
// --kubeconfig, --master, --namespace, --leader-elect, --concurrent-workers,
// --metrics-listen-address, --healthz-listen-address. Any other flag, such as the chart's ACME
// and ingress-shim flags, is skipped.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	configcontroller "github.com/cert-manager/cert-manager/internal/apis/config/controller"
	configv1alpha1 "github.com/cert-manager/cert-manager/pkg/apis/config/controller/v1alpha1"
	"github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	crca "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	crselfsigned "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	"github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	"github.com/cert-manager/cert-manager/pkg/controller/configfile"
	"github.com/cert-manager/cert-manager/pkg/controller/issuers"
	"github.com/cert-manager/cert-manager/pkg/healthz"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/cert-manager/cert-manager/sidecarset-launchers/launch"

	// The Issuer kinds the issuers and clusterissuers loops can check for readiness: the two
	// the loops below can sign with.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// loops are the control loops this launcher runs, by cert-manager's names for them; each
// package above registers its loop under its name when it is linked in.
var loops = []string{
	issuers.ControllerName,
	clusterissuers.ControllerName,
	approver.ControllerName,
	crselfsigned.CRControllerName,
	crca.CRControllerName,
	trigger.ControllerName,
	keymanager.ControllerName,
	requestmanager.ControllerName,
	issuing.ControllerName,
	readiness.ControllerName,
	revisionmanager.ControllerName,
}

// leaseName is cert-manager's own, so our launcher and cert-manager's controller never run side
// by side against one cluster.
const leaseName = "cert-manager-controller"

func main() {
	logf.InitLogs()
	if err := run(os.Args[1:]); err != nil {
		logf.Log.Error(err, "cert-manager controller stopped")
		logf.FlushLogs()
		os.Exit(1)
	}
	logf.FlushLogs()
}

// run starts the servers and, once this replica leads (or at once without leader election),
// the control loops; it returns when SIGINT or SIGTERM arrives or any of them fails.
func run(args []string) error {
	cfg, err := configure(args)
	if err != nil {
		return err
	}
	names := selectLoops(cfg.Controllers)
	log := logf.Log.WithName("controller")
	log.Info("Starting cert-manager controller", "version", util.VersionInfo().GitVersion, "loops", names)

	ctx, stop := launch.SignalContext()
	defer stop()
	ctx = logf.NewContext(ctx, log)
	factory, err := newContextFactory(ctx, cfg)
	if err != nil {
		return err
	}
	health := healthz.NewServer(cfg.LeaderElectionConfig.HealthzTimeout)

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return serveHealth(ctx, health, cfg.HealthzListenAddress) })
	g.Go(func() error { return serveMetrics(ctx, factory, cfg.MetricsListenAddress) })
	g.Go(func() error {
		runLoops := func(ctx context.Context) error { return startLoops(ctx, factory, names, cfg.NumberOfConcurrentWorkers) }
		if !cfg.LeaderElectionConfig.Enabled {
			return runLoops(ctx)
		}
		return whileLeading(ctx, factory, cfg.LeaderElectionConfig, health.LeaderHealthzAdaptor, runLoops)
	})
	return g.Wait()
}

// configure returns the controller's configuration: defaults, the --config file, then the flags.
func configure(args []string) (*configcontroller.ControllerConfiguration, error) {
	file := configfile.New()
	if err := launch.LoadConfig(args, file, configv1alpha1.SchemeGroupVersion, "ControllerConfiguration"); err != nil {
		return nil, err
	}
	cfg := file.Config
	if err := launch.ParseFlags("controller", args, func(fs *pflag.FlagSet) {
		fs.StringVar(&cfg.KubeConfig, "kubeconfig", cfg.KubeConfig, "kubeconfig to use outside a cluster")
		fs.StringVar(&cfg.APIServerHost, "master", cfg.APIServerHost, "API server address, overriding the kubeconfig's")
		fs.StringVar(&cfg.Namespace, "namespace", cfg.Namespace, "only watch this namespace (all when empty)")
		fs.StringVar(&cfg.ClusterResourceNamespace, "cluster-resource-namespace", cfg.ClusterResourceNamespace, "namespace of the Secrets ClusterIssuers refer to")
		fs.StringSliceVar(&cfg.Controllers, "controllers", cfg.Controllers, "loops to run: * for all of this launcher's, name to run only the named ones, -name to leave one out")
		fs.BoolVar(&cfg.EnableCertificateOwnerRef, "enable-certificate-owner-ref", cfg.EnableCertificateOwnerRef, "make each Certificate the owner of its Secret")
		fs.IntVar(&cfg.NumberOfConcurrentWorkers, "concurrent-workers", cfg.NumberOfConcurrentWorkers, "workers per loop")
		fs.StringVar(&cfg.MetricsListenAddress, "metrics-listen-address", cfg.MetricsListenAddress, "address of the plain-HTTP metrics server; 0 turns it off")
		fs.StringVar(&cfg.HealthzListenAddress, "healthz-listen-address", cfg.HealthzListenAddress, "address of the /livez server")
		fs.Var(cliflag.NewMapStringBool(&cfg.FeatureGates), "feature-gates", "cert-manager feature gates, as name=true|false pairs")
		launch.AddLeaderElectionFlags(fs, &cfg.LeaderElectionConfig.LeaderElectionConfig)
		launch.AddLogFlags(fs, &cfg.Logging)
	}); err != nil {
		return nil, err
	}
	if err := launch.Apply(&cfg.Logging, cfg.FeatureGates); err != nil {
		return nil, err
	}
	return cfg, nil
}

// selectLoops applies --controllers to this launcher's loops the way cert-manager reads it:
// "*" (the default) means all, a bare name selects it (and only the named ones then run), and
// "-name" leaves one out. Names of loops this launcher does not run select nothing.
func selectLoops(flag []string) []string {
	var only, without []string
	for _, name := range flag {
		switch {
		case name == "*":
		case strings.HasPrefix(name, "-"):
			without = append(without, strings.TrimPrefix(name, "-"))
		default:
			only = append(only, name)
		}
	}
	var names []string
	for _, name := range loops {
		if (len(only) == 0 || slices.Contains(only, name)) && !slices.Contains(without, name) {
			names = append(names, name)
		}
	}
	return names
}

// newContextFactory builds the clients and shared informers every loop is built from.
func newContextFactory(ctx context.Context, cfg *configcontroller.ControllerConfiguration) (*controller.ContextFactory, error) {
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		APIServerHost:      cfg.APIServerHost,
		Kubeconfig:         cfg.KubeConfig,
		KubernetesAPIQPS:   cfg.KubernetesAPIQPS,
		KubernetesAPIBurst: cfg.KubernetesAPIBurst,
		Namespace:          cfg.Namespace,
		IssuerOptions: controller.IssuerOptions{
			ClusterResourceNamespace:        cfg.ClusterResourceNamespace,
			IssuerAmbientCredentials:        cfg.IssuerAmbientCredentials,
			ClusterIssuerAmbientCredentials: cfg.ClusterIssuerAmbientCredentials,
		},
		CertificateOptions: controller.CertificateOptions{
			EnableOwnerRef:                           cfg.EnableCertificateOwnerRef,
			CopiedAnnotationPrefixes:                 cfg.CopiedAnnotationPrefixes,
			CertificateRequestMinimumBackoffDuration: cfg.CertificateRequestMinimumBackoffDuration,
			CertificateRequestMaximumBackoffDuration: cfg.CertificateRequestMaximumBackoffDuration,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("building the controller context: %w", err)
	}
	return factory, nil
}

// startLoops builds the named loops, then starts the shared informers they registered while
// being built, and runs the loops until ctx ends or one fails.
func startLoops(ctx context.Context, factory *controller.ContextFactory, names []string, workers int) error {
	base, err := factory.Build()
	if err != nil {
		return fmt.Errorf("building the controller context: %w", err)
	}
	known := controller.Known()
	g, ctx := errgroup.WithContext(ctx)
	for _, name := range names {
		newLoop, ok := known[name]
		if !ok {
			return fmt.Errorf("control loop %s is not linked into this launcher", name)
		}
		loop, err := newLoop(factory)
		if err != nil {
			return fmt.Errorf("building control loop %s: %w", name, err)
		}
		g.Go(func() error { return loop.Run(workers, ctx) })
	}
	base.SharedInformerFactory.Start(ctx.Done())
	base.KubeSharedInformerFactory.Start(ctx.Done())
	return g.Wait()
}

// whileLeading runs lead once this replica holds the Lease. It returns nil when ctx ends, lead's
// error when lead fails, and an error once lead has stopped after the Lease was lost: the
// process then exits and the kubelet restarts it, which is simpler than campaigning again.
func whileLeading(ctx context.Context, factory *controller.ContextFactory, cfg configcontroller.LeaderElectionConfig,
	watchdog *leaderelection.HealthzAdaptor, lead func(context.Context) error) error {
	base, err := factory.Build("leader-election")
	if err != nil {
		return fmt.Errorf("building the leader election client: %w", err)
	}
	host, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("reading the host name for the Lease: %w", err)
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, cfg.Namespace, leaseName,
		base.Client.CoreV1(), base.Client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: host})
	if err != nil {
		return fmt.Errorf("building the Lease lock: %w", err)
	}

	outer := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// done holds lead's result; lead ending also ends the elector.
	done := make(chan error, 1)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   cfg.LeaseDuration,
		RenewDeadline:   cfg.RenewDeadline,
		RetryPeriod:     cfg.RetryPeriod,
		ReleaseOnCancel: true,
		WatchDog:        watchdog,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				done <- lead(ctx)
				cancel()
			},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return fmt.Errorf("building the leader elector: %w", err)
	}
	elector.Run(ctx)
	if outer.Err() != nil {
		return nil // shutting down
	}
	if err := <-done; err != nil {
		return err
	}
	return errors.New("stopped leading (the Lease was lost) before shutdown")
}

// serveHealth serves /livez on addr until ctx ends; it reports unhealthy when this replica
// leads but has stopped renewing the Lease.
func serveHealth(ctx context.Context, health *healthz.Server, addr string) error {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listening for healthz on %s: %w", addr, err)
	}
	return health.Start(ctx, ln)
}

// serveMetrics serves cert-manager's Prometheus metrics over plain HTTP on addr until ctx ends;
// "0" or "" turns the server off.
func serveMetrics(ctx context.Context, factory *controller.ContextFactory, addr string) error {
	if addr == "0" || addr == "" {
		return nil
	}
	base, err := factory.Build("metrics")
	if err != nil {
		return fmt.Errorf("building the metrics context: %w", err)
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listening for metrics on %s: %w", addr, err)
	}
	srv := base.Metrics.NewServer(ln)
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdown); err != nil {
			logf.FromContext(ctx).Error(err, "Stopping the metrics server")
		}
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving metrics on %s: %w", addr, err)
	}
	return nil
}
