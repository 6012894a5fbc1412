// Command webhook starts cert-manager's webhook: the validating and mutating admission webhooks
// for cert-manager's resources that its Helm chart registers, served over TLS with a certificate
// the webhook signs itself from a CA it keeps in a Secret (the cainjector then copies that CA into
// the chart's webhook configurations), plus /healthz and /livez on its healthz port.
//
// The server is cert-manager's own (the root module's internal/webhook); this file only turns
// flags and the --config file into its configuration. Every flag of cert-manager's webhook is
// accepted (the root module publishes them in pkg/webhook/options); unknown flags are skipped.
package main

import (
	"fmt"
	"os"

	configwebhook "github.com/cert-manager/cert-manager/internal/apis/config/webhook"
	cmwebhook "github.com/cert-manager/cert-manager/internal/webhook"
	configv1alpha1 "github.com/cert-manager/cert-manager/pkg/apis/config/webhook/v1alpha1"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"
	"github.com/cert-manager/cert-manager/pkg/webhook/configfile"
	"github.com/cert-manager/cert-manager/pkg/webhook/options"
	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cert-manager/cert-manager/sidecarset-launchers/launch"
)

func main() {
	logf.InitLogs()
	if err := run(os.Args[1:]); err != nil {
		logf.Log.Error(err, "cert-manager webhook stopped")
		logf.FlushLogs()
		os.Exit(1)
	}
	logf.FlushLogs()
}

// run configures and runs the webhook server until SIGINT or SIGTERM.
func run(args []string) error {
	cfg, err := configure(args)
	if err != nil {
		return err
	}
	// The server is built on controller-runtime, which logs through its own global logger.
	ctrl.SetLogger(logf.Log)
	log := logf.Log.WithName("webhook")
	log.Info("Starting cert-manager webhook", "version", util.VersionInfo().GitVersion,
		"securePort", cfg.SecurePort, "healthzPort", cfg.HealthzPort)

	ctx, stop := launch.SignalContext()
	defer stop()
	srv, err := cmwebhook.NewCertManagerWebhookServer(log, *cfg)
	if err != nil {
		return fmt.Errorf("building the webhook server: %w", err)
	}
	return srv.Run(ctx)
}

// configure returns the webhook's configuration: defaults, the --config file, then the flags.
func configure(args []string) (*configwebhook.WebhookConfiguration, error) {
	file := configfile.New()
	if err := launch.LoadConfig(args, file, configv1alpha1.SchemeGroupVersion, "WebhookConfiguration"); err != nil {
		return nil, err
	}
	cfg := file.Config
	if err := launch.ParseFlags("webhook", args, func(fs *pflag.FlagSet) {
		options.AddConfigFlags(fs, cfg) // the logging flags too
	}); err != nil {
		return nil, err
	}
	if err := launch.Apply(&cfg.Logging, cfg.FeatureGates); err != nil {
		return nil, err
	}
	return cfg, nil
}
