// Package cli is the kubectl-sidecarset plugin: offline injection (inject), explanations of
// what every SidecarSet does to a pod (explain), a SidecarSet's status (status), and what the
// next step of its rollout does to each pod (rollout plan). It runs the pod webhook's own
// handler and engine, and the rollout's own step, so its answers are the operator's.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/webhook"
)

var scheme = runtime.NewScheme()

func init() {
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := appsv1alpha1.AddToScheme(scheme); err != nil {
		panic(err)
	}
}

// exitError carries an exit code with the message.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageError(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...)}
}

func clusterError(err error) error {
	return &exitError{code: ExitCluster, err: err}
}

type options struct {
	streams           genericiooptions.IOStreams
	config            *genericclioptions.ConfigFlags
	sidecarSets       string
	operatorNamespace string
	excluded          []string // --excluded-namespaces
	allowedKeys       []string // --patch-pod-metadata-allowed-keys
	namespaceLabels   map[string]string
	// client, when set, is used instead of one built from config (tests).
	client client.Client
}

// Run runs the plugin with the arguments and returns the exit code; errors are printed on
// streams.ErrOut as "error: ...", never as a stack trace.
func Run(ctx context.Context, args []string, streams genericiooptions.IOStreams) int {
	return run(ctx, args, &options{streams: streams})
}

func run(ctx context.Context, args []string, o *options) int {
	cmd := newRootCommand(o)
	cmd.SetArgs(args)
	cmd.SetIn(o.streams.In)
	cmd.SetOut(o.streams.Out)
	cmd.SetErr(o.streams.ErrOut)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var exit *exitError
	if errors.As(err, &exit) && exit.code == ExitChanges {
		fmt.Fprintln(o.streams.ErrOut, err) // a finding, not an error
		return exit.code
	}
	fmt.Fprintf(o.streams.ErrOut, "error: %v\n", err)
	if errors.As(err, &exit) {
		return exit.code
	}
	var denied *DeniedError
	if errors.As(err, &denied) {
		return ExitRefused
	}
	if isFlagError(err) || strings.HasPrefix(err.Error(), "unknown command") {
		return ExitUsage
	}
	return ExitRefused
}

// isFlagError tells cobra's argument and flag errors, which it returns unwrapped, apart.
func isFlagError(err error) bool {
	var flagErr *flagError
	return errors.As(err, &flagErr)
}

type flagError struct{ error }

func newRootCommand(o *options) *cobra.Command {
	o.config = genericclioptions.NewConfigFlags(true)
	cmd := &cobra.Command{
		Use:   "kubectl-sidecarset",
		Short: "Inject, explain and inspect SidecarSets with the operator's own engine",
		Long: `kubectl sidecarset answers the day-two questions about SidecarSets with the pod webhook's own
engine: what a manifest looks like injected (inject), why a pod did or did not get a sidecar
(explain), where a SidecarSet stands (status), what its rollout's next step does to each pod,
before it happens (rollout plan), and what upgrading the operator to this version would change
(upgrade-check).

` + exitCodesHelp(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &flagError{err} })
	o.config.AddFlags(cmd.PersistentFlags())
	cmd.PersistentFlags().StringVar(&o.operatorNamespace, "operator-namespace", "sidecarset-system",
		"namespace the operator runs in: never injected, and where SidecarSet revisions are stored")
	cmd.PersistentFlags().StringSliceVar(&o.excluded, "excluded-namespaces", nil,
		"namespaces never injected besides kube-system and the operator's, as the operator's flag of that name says")
	cmd.PersistentFlags().StringSliceVar(&o.allowedKeys, "patch-pod-metadata-allowed-keys", nil,
		"annotation keys SidecarSets may patch onto pods, as the operator's flag of that name says (exact keys or prefix/*); empty allows none")
	cmd.AddCommand(newInjectCommand(o), newExplainCommand(o), newStatusCommand(o), newRolloutCommand(o), newConvertCommand(o), newUpgradeCheckCommand(o))
	return cmd
}

// addSetFlags adds the flags that say where SidecarSets and namespace labels come from.
func addSetFlags(cmd *cobra.Command, o *options) {
	cmd.Flags().StringVar(&o.sidecarSets, "sidecarsets", "",
		"read SidecarSets from this file (YAML or JSON, - for standard input) instead of the cluster; no cluster is needed then")
	cmd.Flags().StringToStringVar(&o.namespaceLabels, "namespace-labels", nil,
		"labels of the pods' namespace (key=value,...), used with --sidecarsets instead of reading the namespace from the cluster")
}

// kubeClient returns the client for the kubeconfig flags.
func (o *options) kubeClient() (client.Client, error) {
	if o.client != nil {
		return o.client, nil
	}
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return nil, clusterError(fmt.Errorf("reading the kubeconfig: %w", err))
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, clusterError(fmt.Errorf("connecting to the cluster: %w", err))
	}
	return c, nil
}

// scope is where the operator never injects, as --operator-namespace and
// --excluded-namespaces say.
func (o *options) scope() inject.Scope {
	return inject.Scope{OperatorNamespace: o.operatorNamespace, ExcludedNamespaces: o.excluded}
}

// namespace is the namespace of the kubeconfig context, or -n.
func (o *options) namespace() string {
	ns, _, err := o.config.ToRawKubeConfigLoader().Namespace()
	if err != nil || ns == "" {
		return corev1.NamespaceDefault
	}
	return ns
}

// engine builds the Engine from --sidecarsets and --namespace-labels, or from the cluster,
// allowing the patched annotation keys --patch-pod-metadata-allowed-keys names. files are the
// documents of -f: with --sidecarsets, their LimitRange objects are the LimitRanges pods are
// judged by, as no cluster is there to read them from.
func (o *options) engine(ctx context.Context, stdin io.Reader, files []Document) (*Engine, error) {
	allowed, err := inject.ParseKeyAllowList(o.allowedKeys)
	if err != nil {
		return nil, &flagError{err}
	}
	e, err := o.sourcedEngine(ctx, stdin, files)
	if err != nil {
		return nil, err
	}
	e.injector.AllowedAnnotations = &allowed
	return e, nil
}

// sourcedEngine builds the Engine from --sidecarsets, --namespace-labels and the LimitRange
// objects of files, or from the cluster.
func (o *options) sourcedEngine(ctx context.Context, stdin io.Reader, files []Document) (*Engine, error) {
	if o.sidecarSets != "" {
		r := stdin
		if o.sidecarSets != "-" {
			f, err := os.Open(o.sidecarSets)
			if err != nil {
				return nil, &exitError{code: ExitRefused, err: err}
			}
			defer func() { _ = f.Close() }()
			r = f
		}
		sets, err := ReadSidecarSets(r, o.sidecarSets)
		if err != nil {
			return nil, &exitError{code: ExitRefused, err: err}
		}
		limitRanges, err := LimitRangesOf(files, o.namespace())
		if err != nil {
			return nil, &exitError{code: ExitRefused, err: err}
		}
		labels := o.namespaceLabels
		return NewEngine(sets, nil, o.scope(), func(context.Context, string) (map[string]string, error) { return labels, nil },
			func(_ context.Context, namespace string) ([]corev1.LimitRange, error) {
				var out []corev1.LimitRange
				for _, lr := range limitRanges {
					if lr.Namespace == namespace {
						out = append(out, lr)
					}
				}
				return out, nil
			})
	}
	if o.namespaceLabels != nil {
		return nil, usageError("--namespace-labels goes with --sidecarsets; with SidecarSets from the cluster, namespaces are read from it too")
	}
	c, err := o.kubeClient()
	if err != nil {
		return nil, err
	}
	var list appsv1alpha1.SidecarSetList
	if err := c.List(ctx, &list); err != nil {
		return nil, clusterError(fmt.Errorf("listing SidecarSets: %w", err))
	}
	var revisions appsv1.ControllerRevisionList
	if err := c.List(ctx, &revisions, client.InNamespace(o.operatorNamespace), client.HasLabels{appsv1alpha1.RevisionSetLabel}); err != nil &&
		!apierrors.IsForbidden(err) {
		return nil, clusterError(fmt.Errorf("listing SidecarSet revisions in %s: %w", o.operatorNamespace, err))
	}
	sets := make([]*appsv1alpha1.SidecarSet, len(list.Items))
	for i := range list.Items {
		sets[i] = &list.Items[i]
	}
	revs := make([]*appsv1.ControllerRevision, len(revisions.Items))
	for i := range revisions.Items {
		revs[i] = &revisions.Items[i]
	}
	return NewEngine(sets, revs, o.scope(), func(ctx context.Context, name string) (map[string]string, error) {
		var ns corev1.Namespace
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &ns); apierrors.IsNotFound(err) {
			return nil, nil // not created yet: no labels, as for a namespace created with the manifest
		} else if err != nil {
			return nil, clusterError(fmt.Errorf("reading namespace %s: %w", name, err))
		}
		return ns.Labels, nil
	}, func(ctx context.Context, namespace string) ([]corev1.LimitRange, error) {
		limitRanges, err := webhook.LimitRangesFrom(c)(ctx, namespace)
		if err != nil {
			return nil, clusterError(fmt.Errorf("listing the LimitRanges of namespace %s: %w", namespace, err))
		}
		return limitRanges, nil
	})
}
