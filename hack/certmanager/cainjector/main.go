// Command cainjector starts cert-manager's CA injector: it copies a CA into the webhook
// configurations, APIServices and CRD conversion webhooks that ask for one with an annotation
// (cert-manager.io/inject-ca-from: the ca.crt of a Certificate's Secret; inject-ca-from-secret:
// a Secret's; inject-apiserver-ca: the API server's own CA). Our operator's webhook
// configurations name its serving Certificate; the chart's name the webhook's CA Secret.
//
// The injectors are cert-manager's (pkg/controller/cainjector), run by a controller-runtime
// manager; this file only reads the configuration and builds the manager. Flags taken: the
// chart's (--config, -v, --leader-election-*, --feature-gates, --metrics-listen-address) and
// --kubeconfig, --namespace and --leader-elect; any other flag is skipped.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	configcainjector "github.com/cert-manager/cert-manager/internal/apis/config/cainjector"
	"github.com/cert-manager/cert-manager/internal/kube"
	configv1alpha1 "github.com/cert-manager/cert-manager/pkg/apis/config/cainjector/v1alpha1"
	"github.com/cert-manager/cert-manager/pkg/cainjector/configfile"
	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	cliflag "k8s.io/component-base/cli/flag"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cert-manager/cert-manager/sidecarset-launchers/launch"
)

// certificatesCRD is the CRD the injectors watch when Certificates are a CA source.
const certificatesCRD = "certificates.cert-manager.io"

func main() {
	logf.InitLogs()
	if err := run(os.Args[1:]); err != nil {
		logf.Log.Error(err, "cert-manager cainjector stopped")
		logf.FlushLogs()
		os.Exit(1)
	}
	logf.FlushLogs()
}

// run configures the injectors and runs them until SIGINT or SIGTERM.
func run(args []string) error {
	cfg, err := configure(args)
	if err != nil {
		return err
	}
	ctrl.SetLogger(logf.Log)
	log := logf.Log.WithName("cainjector")
	log.Info("Starting cert-manager cainjector", "version", util.VersionInfo().GitVersion)

	restCfg, err := kube.BuildClientConfig("", cfg.KubeConfig)
	if err != nil {
		return fmt.Errorf("building the API client configuration: %w", err)
	}
	// The user agent also names the field manager the injectors apply with.
	restCfg = util.RestConfigWithUserAgent(restCfg, "cainjector")

	ctx, stop := launch.SignalContext()
	defer stop()
	mgr, err := newManager(restCfg, cfg)
	if err != nil {
		return err
	}
	if cfg.EnableDataSourceConfig.Certificates {
		// The manager cannot watch Certificates before their CRD exists; the chart installs
		// both at once, so the CRD may still be on its way.
		if err := waitForCRD(ctx, restCfg, mgr.GetScheme(), certificatesCRD); err != nil {
			return err
		}
	}
	if err := cainjector.RegisterAllInjectors(ctx, mgr, setupOptions(cfg)); err != nil {
		return fmt.Errorf("registering the injectors: %w", err)
	}
	return mgr.Start(ctx)
}

// configure returns the cainjector's configuration: defaults, the --config file, then the flags.
func configure(args []string) (*configcainjector.CAInjectorConfiguration, error) {
	file := configfile.New()
	if err := launch.LoadConfig(args, file, configv1alpha1.SchemeGroupVersion, "CAInjectorConfiguration"); err != nil {
		return nil, err
	}
	cfg := file.Config
	if err := launch.ParseFlags("cainjector", args, func(fs *pflag.FlagSet) {
		fs.StringVar(&cfg.KubeConfig, "kubeconfig", cfg.KubeConfig, "kubeconfig to use outside a cluster")
		fs.StringVar(&cfg.Namespace, "namespace", cfg.Namespace, "only inject into objects of this namespace (all when empty)")
		fs.StringVar(&cfg.MetricsListenAddress, "metrics-listen-address", cfg.MetricsListenAddress, "address of the plain-HTTP metrics server; 0 turns it off")
		fs.Var(cliflag.NewMapStringBool(&cfg.FeatureGates), "feature-gates", "cert-manager feature gates, as name=true|false pairs")
		launch.AddLeaderElectionFlags(fs, &cfg.LeaderElectionConfig)
		launch.AddLogFlags(fs, &cfg.Logging)
	}); err != nil {
		return nil, err
	}
	if err := launch.Apply(&cfg.Logging, cfg.FeatureGates); err != nil {
		return nil, err
	}
	return cfg, nil
}

// newManager builds the controller-runtime manager the injectors run in, knowing the kinds they
// read and write. Secrets are read straight from the API server rather than cached: the
// injectors read a few by name, and a cache would hold every Secret in the cluster.
func newManager(restCfg *rest.Config, cfg *configcainjector.CAInjectorConfiguration) (ctrl.Manager, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		kscheme.AddToScheme, cmscheme.AddToScheme, apiextv1.AddToScheme, apiregv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("building the scheme: %w", err)
		}
	}
	var namespaces map[string]cache.Config
	if cfg.Namespace != "" {
		namespaces = map[string]cache.Config{cfg.Namespace: {}}
	}
	le := cfg.LeaderElectionConfig
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:  scheme,
		Cache:   cache.Options{DefaultNamespaces: namespaces},
		Client:  client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		Metrics: metricsserver.Options{BindAddress: cfg.MetricsListenAddress},
		// The Lease's name is cert-manager's, so our launcher and cert-manager's own cainjector
		// never run side by side against one cluster.
		LeaderElection:                le.Enabled,
		LeaderElectionNamespace:       le.Namespace,
		LeaderElectionID:              "cert-manager-cainjector-leader-election",
		LeaderElectionResourceLock:    resourcelock.LeasesResourceLock,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &le.LeaseDuration,
		RenewDeadline:                 &le.RenewDeadline,
		RetryPeriod:                   &le.RetryPeriod,
	})
	if err != nil {
		return nil, fmt.Errorf("building the manager: %w", err)
	}
	return mgr, nil
}

// setupOptions says which kinds of object the injectors fill and from which sources.
func setupOptions(cfg *configcainjector.CAInjectorConfiguration) cainjector.SetupOptions {
	inject := cfg.EnableInjectableConfig
	return cainjector.SetupOptions{
		Namespace:                    cfg.Namespace,
		IgnoreNamespaces:             cfg.IgnoreNamespaces,
		EnableCertificatesDataSource: cfg.EnableDataSourceConfig.Certificates,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   inject.MutatingWebhookConfigurations,
			cainjector.ValidatingWebhookConfigurationName: inject.ValidatingWebhookConfigurations,
			cainjector.APIServiceName:                     inject.APIServices,
			cainjector.CustomResourceDefinitionName:       inject.CustomResourceDefinitions,
		},
	}
}

// waitForCRD polls every second, for up to five minutes, until the named CRD exists.
func waitForCRD(ctx context.Context, restCfg *rest.Config, scheme *runtime.Scheme, name string) error {
	c, err := client.New(restCfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("building a client: %w", err)
	}
	log := logf.Log.WithName("cainjector")
	err = wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Name: name}, &apiextv1.CustomResourceDefinition{})
		if apierrors.IsNotFound(err) {
			log.Info("Waiting for a CRD", "crd", name)
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("waiting for CRD %s: %w", name, err)
	}
	return nil
}
