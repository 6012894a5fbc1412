package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/explain"
)

// input opens -f: a file, or - for standard input.
func input(o *options, file string) (io.Reader, func(), error) {
	if file == "-" {
		return o.streams.In, func() {}, nil
	}
	f, err := os.Open(file) //nolint:gosec // G304: the plugin reads the file its user names
	if err != nil {
		return nil, nil, &exitError{code: ExitRefused, err: err}
	}
	return f, func() { _ = f.Close() }, nil
}

// readInput reads the objects -f names, in order: standard input, a file, or the files of a
// directory (inputFiles), one stream of documents each of which names its file.
func readInput(o *options, f fileFlags) ([]Document, error) {
	if f.file == "" {
		return nil, usageError("-f FILE (or - for standard input) is required")
	}
	if f.file == "-" && o.sidecarSets == "-" {
		return nil, usageError("-f and --sidecarsets cannot both read standard input")
	}
	files := []string{f.file}
	if f.file != "-" {
		var err error
		if files, err = inputFiles(f.file, f.recursive); err != nil {
			return nil, &exitError{code: ExitRefused, err: err}
		}
	}
	var docs []Document
	for _, file := range files {
		more, err := readFile(o, file)
		if err != nil {
			return nil, err
		}
		docs = append(docs, more...)
	}
	return docs, nil
}

func readFile(o *options, file string) ([]Document, error) {
	r, done, err := input(o, file)
	if err != nil {
		return nil, err
	}
	defer done()
	docs, err := ReadDocuments(r, file)
	if err != nil {
		return nil, &exitError{code: ExitRefused, err: err}
	}
	return docs, nil
}

func newInjectCommand(o *options) *cobra.Command {
	var in fileFlags
	var quiet bool
	cmd := &cobra.Command{
		Use:   "inject -f FILE|DIR|-",
		Short: "Print the manifests as the pod webhook would inject them",
		Long: `inject prints the objects of FILE with the pods they describe injected exactly as the pod webhook
would inject them at creation: Pods, and the pod templates of ` + SupportedKinds + `.
Every other object (Services, CustomResourceDefinitions, custom resources, workloads of API
versions Kubernetes no longer serves) is printed unchanged and named on standard error.
SidecarSets, namespaces and LimitRanges come from the cluster; or SidecarSets from
--sidecarsets FILE, namespace labels from --namespace-labels and LimitRanges from the
LimitRange objects of FILE (then no cluster is needed).

FILE may be a directory: its .yaml, .yml and .json files are read in lexical order (with -R,
those of the directories under it too) and printed as one stream in that order; - reads
standard input, such as the output of kustomize build (documents, Lists, comments).

What happened to each pod, and the webhook's warnings, go to standard error. A pod the webhook
refuses is an error: nothing is printed and the exit code is ` + strconv.Itoa(ExitRefused) + `.`,
		Example: `  kubectl sidecarset inject -f deploy.yaml | kubectl apply -f -
  kubectl sidecarset inject -f deploy.yaml --sidecarsets sidecarsets.yaml --namespace-labels team=shop
  kustomize build overlays/prod | kubectl sidecarset inject -f - --sidecarsets sets.yaml
  kubectl sidecarset inject -R -f manifests/ --sidecarsets sets.yaml`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			docs, err := readInput(o, in)
			if err != nil {
				return err
			}
			e, err := o.engine(cmd.Context(), o.streams.In, docs)
			if err != nil {
				return err
			}
			report := func(line string) {
				if !quiet {
					fmt.Fprintln(o.streams.ErrOut, line)
				}
			}
			if err := e.Inject(cmd.Context(), docs, o.namespace(), report); err != nil {
				return err
			}
			var p printers.YAMLPrinter
			for _, d := range docs {
				if err := p.PrintObj(d.Object, o.streams.Out); err != nil {
					return err
				}
			}
			return nil
		},
	}
	in.add(cmd, "the objects to inject")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "do not report what happened to each pod on standard error")
	addSetFlags(cmd, o)
	return cmd
}

func newExplainCommand(o *options) *cobra.Command {
	var in fileFlags
	cmd := &cobra.Command{
		Use:   "explain (pod NAME | -f FILE|DIR|-)",
		Short: "Say what every SidecarSet does to a pod, and why",
		Long: `explain lists every SidecarSet with its verdict on a pod and the reason: it injects; the pod is not
opted in; the namespace is excluded or opted out; the selector or namespaceSelector does not
match; the set is paused, invalid, or stopped by a conflict with an older set; or the webhook
refuses the pod, naming the set and the field. For a pod that exists, it also says whether the
sidecars each set injected are current, or what keeps them outdated. It reads what inject reads,
from the cluster or, with --sidecarsets, from the files. When the webhook refuses a pod, every
verdict is printed and the exit code is ` + strconv.Itoa(ExitRefused) + `.`,
		Example: `  kubectl sidecarset explain pod web-7d9c6b-x2x4q -n shop
  kubectl sidecarset explain -f deploy.yaml`,
		RunE: func(cmd *cobra.Command, args []string) error {
			pods, docs, err := explainInput(cmd.Context(), o, in, args)
			if err != nil {
				return err
			}
			e, err := o.engine(cmd.Context(), o.streams.In, docs)
			if err != nil {
				return err
			}
			refused, err := printExplanations(cmd.Context(), o.streams.Out, e, pods)
			if err != nil {
				return err
			}
			if len(refused) > 0 {
				return &exitError{code: ExitRefused, err: fmt.Errorf("the webhook refuses %s", strings.Join(refused, ", "))}
			}
			return nil
		},
	}
	in.add(cmd, "explain the pods of these objects")
	addSetFlags(cmd, o)
	return cmd
}

// printExplanations prints the verdicts of every SidecarSet on each pod and returns the names
// of the pods the webhook refuses.
func printExplanations(ctx context.Context, out io.Writer, e *Engine, pods []namedPod) ([]string, error) {
	var refused []string
	w := printers.GetNewTabWriter(out)
	for i, p := range pods {
		list, err := e.Explain(ctx, p.pod, p.existing)
		if err != nil {
			return nil, err
		}
		if explain.Denied(list) {
			refused = append(refused, p.name)
		}
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s\n", p.name)
		fmt.Fprintln(w, "SIDECARSET\tVERDICT\tWHY")
		if len(list) == 0 {
			fmt.Fprintln(w, "(none)\t\tthere are no SidecarSets")
		}
		for _, x := range list {
			fmt.Fprintf(w, "%s\t%s\t%s\n", x.SidecarSet, x.Verdict, x.Why)
			if x.Sidecars != "" {
				fmt.Fprintf(w, "\t\tsidecars: %s\n", x.Sidecars)
			}
		}
	}
	return refused, w.Flush()
}

// namedPod is a pod to explain, and how the output names it.
type namedPod struct {
	pod *corev1.Pod
	// existing is true for a pod read from the cluster.
	existing bool
	name     string
}

// explainInput reads the pods to explain: `pod NAME` from the cluster, or -f, read as inject
// reads it (eachPod); docs are the documents of -f.
func explainInput(ctx context.Context, o *options, in fileFlags, args []string) (pods []namedPod, docs []Document, err error) {
	switch {
	case in.file != "" && len(args) > 0:
		return nil, nil, usageError("give either pod NAME or -f FILE, not both")
	case in.file != "":
		if docs, err = readInput(o, in); err != nil {
			return nil, nil, err
		}
		err = eachPod(docs, o.namespace(), func(p *PodOf, source string) error {
			var pod corev1.Pod
			if err := json.Unmarshal(p.Raw, &pod); err != nil {
				return fmt.Errorf("%s (%s): %w", source, p.Name, err)
			}
			pod.Namespace = p.Namespace
			pods = append(pods, namedPod{pod: &pod, name: p.Name})
			return nil
		}, nil)
		if err != nil {
			return nil, nil, &exitError{code: ExitRefused, err: err}
		}
		if len(pods) == 0 {
			return nil, nil, &exitError{code: ExitRefused, err: fmt.Errorf("%s holds no pod and no workload (%s)", in.file, SupportedKinds)}
		}
		return pods, docs, nil
	case len(args) == 2 && (args[0] == "pod" || args[0] == "pods" || args[0] == "po"):
		pod, err := clusterPod(ctx, o, args[1])
		if err != nil {
			return nil, nil, err
		}
		return []namedPod{{pod: pod, existing: true, name: "Pod " + pod.Namespace + "/" + pod.Name}}, nil, nil
	}
	return nil, nil, usageError("explain needs pod NAME or -f FILE; got %q", strings.Join(args, " "))
}

// clusterPod reads the pod explain pod NAME names.
func clusterPod(ctx context.Context, o *options, name string) (*corev1.Pod, error) {
	if o.sidecarSets != "" {
		return nil, usageError("explain pod NAME reads the pod from the cluster; use -f with --sidecarsets")
	}
	c, err := o.kubeClient()
	if err != nil {
		return nil, err
	}
	var pod corev1.Pod
	key := client.ObjectKey{Namespace: o.namespace(), Name: name}
	if err := c.Get(ctx, key, &pod); apierrors.IsNotFound(err) {
		return nil, &exitError{code: ExitRefused, err: fmt.Errorf("pod %s not found", key)}
	} else if err != nil {
		return nil, clusterError(fmt.Errorf("reading pod %s: %w", key, err))
	}
	return &pod, nil
}

func newStatusCommand(o *options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "status SIDECARSET",
		Short: "Show a SidecarSet's counts, conditions and rollout",
		Example: `  kubectl sidecarset status mesh-proxy
  kubectl sidecarset status mesh-proxy -o yaml`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError("status takes one SidecarSet name; got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.kubeClient()
			if err != nil {
				return err
			}
			var set appsv1alpha1.SidecarSet
			if err := c.Get(cmd.Context(), client.ObjectKey{Name: args[0]}, &set); apierrors.IsNotFound(err) {
				return &exitError{code: ExitRefused, err: fmt.Errorf("SidecarSet %q not found", args[0])}
			} else if err != nil {
				return clusterError(fmt.Errorf("reading SidecarSet %s: %w", args[0], err))
			}
			switch output {
			case "":
				return printStatus(o.streams.Out, &set)
			case "yaml":
				return (&printers.YAMLPrinter{}).PrintObj(statusOnly(&set), o.streams.Out)
			case "json":
				return (&printers.JSONPrinter{}).PrintObj(statusOnly(&set), o.streams.Out)
			}
			return usageError("--output must be yaml or json; got %q", output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "yaml or json: print the SidecarSet's metadata and status instead of the summary")
	return cmd
}

// statusOnly is the set without its spec, with its kind (printers want it).
func statusOnly(set *appsv1alpha1.SidecarSet) *appsv1alpha1.SidecarSet {
	out := &appsv1alpha1.SidecarSet{ObjectMeta: set.ObjectMeta, Status: set.Status}
	out.ManagedFields = nil
	out.SetGroupVersionKind(appsv1alpha1.GroupVersion.WithKind("SidecarSet"))
	return out
}

func printStatus(out io.Writer, set *appsv1alpha1.SidecarSet) error {
	st := set.Status
	w := printers.GetNewTabWriter(out)
	fmt.Fprintf(w, "SidecarSet %s\n", set.Name)
	// A set that refuses pods breaks other teams' deploys: said first.
	if c := meta.FindStatusCondition(st.Conditions, appsv1alpha1.ConditionRefusing); c != nil && c.Status == metav1.ConditionTrue {
		fmt.Fprintf(w, "REFUSING PODS:\t%s (%s)\n", c.Message, c.Reason)
	}
	fmt.Fprintf(w, "Generation:\t%d (observed %d)\n", set.Generation, st.ObservedGeneration)
	if st.ObservedGeneration != set.Generation {
		fmt.Fprintln(w, "\tthe operator has not seen the latest spec yet: the status below is older")
	}
	fmt.Fprintf(w, "Hash:\t%s\n", orNone(st.Hash))
	fmt.Fprintf(w, "Revision:\t%s\n", orNone(st.UpdateRevision))
	strategy := string(set.Spec.UpdateStrategy.Type)
	if s := set.Spec.UpdateStrategy; s.Type == appsv1alpha1.RollingUpdate {
		if s.Partition != nil {
			strategy += fmt.Sprintf(", partition %s", s.Partition.String())
		}
		if s.MaxUnavailable != nil {
			strategy += fmt.Sprintf(", maxUnavailable %s", s.MaxUnavailable.String())
		}
		if s.Paused {
			strategy += ", paused"
		}
	}
	fmt.Fprintf(w, "Update strategy:\t%s\n", strategy)
	fmt.Fprintf(w, "Pods:\tmatched %d, updated %d, ready %d, updated and ready %d, unavailable %d, excluded %d\n",
		st.MatchedPods, st.UpdatedPods, st.ReadyPods, st.UpdatedReadyPods, st.UnavailablePods, st.ExcludedPods)
	fmt.Fprintf(w, "Sidecar resources:\t%s\n", sidecarResources(st.SidecarResources))
	fmt.Fprintln(w, "Conditions:")
	fmt.Fprintln(w, "  TYPE\tSTATUS\tREASON\tMESSAGE")
	for _, c := range st.Conditions {
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	return w.Flush()
}

// sidecarResources says what the set's sidecars request and limit in the pods it injected.
func sidecarResources(r *appsv1alpha1.SidecarResources) string {
	if r == nil {
		return "<none> (no pod injected)"
	}
	list := func(l corev1.ResourceList) string {
		var parts []string
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
			if q, ok := l[name]; ok {
				parts = append(parts, fmt.Sprintf("%s %s", name, q.String()))
			}
		}
		if len(parts) == 0 {
			return "none"
		}
		return strings.Join(parts, ", ")
	}
	return fmt.Sprintf("requests %s; limits %s (in %d pods)", list(r.Requests), list(r.Limits), r.Pods)
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError("%s takes no arguments; got %q (the input goes in -f)", cmd.Name(), strings.Join(args, " "))
	}
	return nil
}
