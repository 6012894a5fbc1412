// Package launch holds what our three cert-manager launchers share: reading a component's
// configuration in the order cert-manager's own commands use (cert-manager's defaults, then the
// file --config names, then the flags), tolerating flags a launcher has no use for, applying the
// logging and feature-gate settings, and a context that ends on SIGINT or SIGTERM.
package launch

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/cert-manager/cert-manager/internal/apis/config/shared"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util/configfile"
	utilfeature "github.com/cert-manager/cert-manager/pkg/util/feature"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime/schema"
	logsapi "k8s.io/component-base/logs/api/v1"
)

// SignalContext returns a context that ends when the process gets SIGINT or SIGTERM (the
// kubelet stops a container with SIGTERM), so servers and leases are released on the way out.
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// LoadConfig fills file, one of cert-manager's configfile types, with the component's
// configuration: the file --config names in args when there is one, else an empty document of
// apiVersion gv and the given kind. Decoding defaults every field either way, so the result holds
// exactly the values cert-manager's own command would start from before its flags.
func LoadConfig(args []string, file configfile.ConfigFile, gv schema.GroupVersion, kind string) error {
	path, err := configPath(args)
	if err != nil {
		return err
	}
	if path == "" {
		doc := fmt.Sprintf("apiVersion: %s\nkind: %s\n", gv, kind)
		if err := file.DecodeAndConfigure([]byte(doc)); err != nil {
			return fmt.Errorf("defaulting the %s: %w", kind, err)
		}
		return nil
	}
	// The loader resolves relative paths inside the file against the file's directory, which
	// needs the file's own path to be absolute.
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("resolving --config %s: %w", path, err)
	}
	loader, err := configfile.NewConfigurationFSLoader(nil, abs)
	if err != nil {
		return fmt.Errorf("reading --config %s: %w", abs, err)
	}
	if err := loader.Load(file); err != nil {
		return fmt.Errorf("loading --config %s: %w", abs, err)
	}
	return nil
}

// ParseFlags parses args with the flags add registers, on top of a configuration LoadConfig
// filled, so a flag wins over the file. --config is always accepted. A flag no launcher
// registers is skipped with its value instead of failing: cert-manager's Helm chart may pass
// flags of features a launcher does not run, and a crash there would only restart the pod.
func ParseFlags(name string, args []string, add func(*pflag.FlagSet)) error {
	fs := newFlagSet(name)
	add(fs)
	if fs.Lookup("config") == nil {
		fs.String("config", "", "path to a file holding the component's configuration object")
	}
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("parsing the flags of %s: %w", name, err)
	}
	return nil
}

// AddLogFlags registers the logging flags cert-manager's commands take (-v, --vmodule,
// --logging-format, --log-flush-frequency) on the component's logging configuration.
func AddLogFlags(fs *pflag.FlagSet, logging *logsapi.LoggingConfiguration) {
	logf.AddFlagsNonDeprecated(logging, fs)
}

// Apply puts the parsed logging configuration and feature gates into effect; cert-manager's
// packages read both from process-wide state.
func Apply(logging *logsapi.LoggingConfiguration, gates map[string]bool) error {
	if err := logf.ValidateAndApply(logging); err != nil {
		return fmt.Errorf("applying the logging flags: %w", err)
	}
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(gates); err != nil {
		return fmt.Errorf("setting the feature gates: %w", err)
	}
	return nil
}

// configPath returns the value of --config in args, or "" without one. It parses args a first
// time, knowing no other flag, because the file must be read before the flags that override it.
func configPath(args []string) (string, error) {
	fs := newFlagSet("config")
	path := fs.String("config", "", "")
	// Every other flag is unknown here; -h would make Parse stop with ErrHelp.
	fs.BoolP("help", "h", false, "")
	if err := fs.Parse(args); err != nil {
		return "", fmt.Errorf("looking for --config: %w", err)
	}
	return *path, nil
}

// newFlagSet returns a flag set that returns errors instead of exiting and skips unknown flags.
func newFlagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.ParseErrorsAllowlist.UnknownFlags = true
	return fs
}

// AddLeaderElectionFlags registers the leader election flags the controller and the cainjector
// share (the chart passes the namespace and the three durations).
func AddLeaderElectionFlags(fs *pflag.FlagSet, le *shared.LeaderElectionConfig) {
	fs.BoolVar(&le.Enabled, "leader-elect", le.Enabled, "hold a Lease while running, so one replica works at a time")
	fs.StringVar(&le.Namespace, "leader-election-namespace", le.Namespace, "namespace of the Lease")
	fs.DurationVar(&le.LeaseDuration, "leader-election-lease-duration", le.LeaseDuration, "how long a Lease stays valid without renewal")
	fs.DurationVar(&le.RenewDeadline, "leader-election-renew-deadline", le.RenewDeadline, "how long the leader keeps trying to renew before it gives up")
	fs.DurationVar(&le.RetryPeriod, "leader-election-retry-period", le.RetryPeriod, "how often to try to take or renew the Lease")
}
