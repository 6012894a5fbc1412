package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/rollout"
)

func newRolloutCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout",
		Short: "Look at a SidecarSet's rollout before it happens, or refresh its pinned images",
		Args:  cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			return usageError("rollout needs a subcommand, plan SIDECARSET or refresh SIDECARSET; got %q", strings.Join(args, " "))
		},
	}
	cmd.AddCommand(newPlanCommand(o), newRefreshCommand(o))
	return cmd
}

func newRefreshCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "refresh SIDECARSET",
		Short: "Have the operator resolve a digest-pinned SidecarSet's images again",
		Long: `refresh sets the SidecarSet's sidecarset.io/refresh-images annotation to the current time. The
operator then reads again the digest each of the set's tags names (spec.imagePolicy.pin: Digest)
and pins the new ones: a tag that moved since makes a new revision, which rolls out as any other
(updateStrategy: partition, maxUnavailable, paused). Until then, a moved tag changes no pod;
status.images[].latest and the ImagesPinned condition say where it moved.

status.imagesRefreshed takes the annotation's value once every image resolved.`,
		Example: `  kubectl sidecarset rollout refresh mesh-proxy
  kubectl get sidecarset mesh-proxy -o jsonpath='{.status.imagesRefreshed} {.status.images}'`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError("rollout refresh takes one SidecarSet name; got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.kubeClient()
			if err != nil {
				return clusterError(err)
			}
			var set appsv1alpha1.SidecarSet
			if err := c.Get(cmd.Context(), client.ObjectKey{Name: args[0]}, &set); err != nil {
				if apierrors.IsNotFound(err) {
					return &exitError{code: ExitRefused, err: fmt.Errorf("SidecarSet %q does not exist", args[0])}
				}
				return clusterError(err)
			}
			if !inject.PinsDigests(&set) {
				return &exitError{code: ExitRefused, err: fmt.Errorf("SidecarSet %q does not pin its images to digests "+
					"(spec.imagePolicy.pin is not Digest): its pods get its images by tag, and there is nothing to refresh", set.Name)}
			}
			token := time.Now().UTC().Format(time.RFC3339Nano)
			raw, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
				appsv1alpha1.RefreshImagesAnnotation: token}}})
			if err != nil {
				return err
			}
			if err := c.Patch(cmd.Context(), &set, client.RawPatch(types.MergePatchType, raw)); err != nil {
				return clusterError(fmt.Errorf("setting %s on SidecarSet %s: %w", appsv1alpha1.RefreshImagesAnnotation, set.Name, err))
			}
			_, err = fmt.Fprintf(o.streams.Out, "sidecarset/%s: refresh %s asked; status.imagesRefreshed says %s once its images are resolved again\n",
				set.Name, token, token)
			return err
		},
	}
}

func newPlanCommand(o *options) *cobra.Command {
	var output, file string
	cmd := &cobra.Command{
		Use:   "plan (SIDECARSET | -f FILE|-)",
		Short: "Say what the rollout's next step does to each pod the SidecarSet selects, and why",
		Long: `plan says, for each pod a SidecarSet selects, what the operator's rollout does to it and when:
current; restarting (updated, and its kubelet does not run the new sidecars yet: the old
container is stopping, with the pod's grace period and how long it has waited, or the new one
starting; it holds the budget); update in place; evict (its controller recreates it with the
current sidecars, updateStrategy.recreate: Evict); remediate (evict a pod the set never
injected, updateStrategy.remediate: Evict); or leave it, with the reason. NEXT STEP says whether the
rollout's next step starts it (now), or why it waits: budget (maxUnavailable), paused,
partition, workload busy (another pod of its workload is being recreated), starting.

With -f, it plans the SidecarSet of FILE (the change about to be applied) in place of the
cluster's copy, over the cluster's pods: what applying it would start.

It runs the operator's own rollout code over the pods as they are now, as the operator does
right after it starts; PodDisruptionBudgets are not read (an eviction they hold waits for a
later step). It only reads the cluster: SidecarSets, the opted-in pods, their namespaces and
nodes, and the SidecarSet revisions in --operator-namespace.`,
		Example: `  kubectl sidecarset rollout plan mesh-proxy
  kubectl sidecarset rollout plan -f mesh-proxy.yaml
  kubectl sidecarset rollout plan mesh-proxy -o json`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 || (len(args) == 0 && file == "") {
				return usageError("rollout plan takes one SidecarSet name, or -f FILE; got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != "json" {
				return usageError("--output must be json; got %q", output)
			}
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			in, err := gatherPlan(cmd.Context(), o, name, file)
			if err != nil {
				return err
			}
			plan, err := planRollout(*in)
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(o.streams.Out)
				enc.SetIndent("", "  ")
				return enc.Encode(plan)
			}
			return printPlan(o.streams.Out, plan)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json: print the plan as JSON instead of a table")
	cmd.Flags().StringVarP(&file, "filename", "f", "", "plan this SidecarSet (YAML or JSON, - for standard input) in place of the cluster's copy")
	return cmd
}

// gatherPlan reads what the operator's rollout reads: the set, the SidecarSets and revisions
// (the engine), the opted-in pods the set's selector matches, their namespaces' labels, and
// whether the API server serves in-place resize. Reads only.
func gatherPlan(ctx context.Context, o *options, name, file string) (*planInput, error) {
	c, err := o.kubeClient()
	if err != nil {
		return nil, err
	}
	e, err := o.engine(ctx, o.streams.In, nil)
	if err != nil {
		return nil, err
	}
	set, err := plannedSet(ctx, c, e, o, name, file)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(e.revisions, func(r *appsv1.ControllerRevision) bool { return r.Labels[appsv1alpha1.RevisionSetLabel] == set.Name }) {
		fmt.Fprintf(o.streams.ErrOut, "warning: no revisions of SidecarSet %s in namespace %s (set --operator-namespace to the operator's): "+
			"the content pods were injected with is unknown, so pods are planned as if it were not stored\n", set.Name, o.operatorNamespace)
	}
	pods, err := optedInPods(ctx, c, set)
	if err != nil {
		return nil, err
	}
	nsLabels := map[string]map[string]string{}
	for _, pod := range pods {
		if _, ok := nsLabels[pod.Namespace]; !ok {
			if nsLabels[pod.Namespace], err = e.NamespaceLabels(ctx, pod.Namespace); err != nil {
				return nil, err
			}
		}
	}
	env, err := o.inPlaceEnv(ctx, c, e)
	if err != nil {
		return nil, err
	}
	return &planInput{set: set, engine: e, pods: pods, namespaceLabels: func(ns string) map[string]string { return nsLabels[ns] },
		env: env, now: time.Now()}, nil
}

// inPlaceEnv is what the rollout reads besides the pods, as the operator finds it: whether the
// API server serves pods/resize, the nodes' kubelet versions (each read once), and the annotation
// keys sets may patch.
func (o *options) inPlaceEnv(ctx context.Context, c client.Reader, e *Engine) (rollout.InPlaceEnv, error) {
	resize, err := o.servesPodResize()
	if err != nil {
		return rollout.InPlaceEnv{}, err
	}
	nodes := &nodeVersions{reader: c, warn: o.streams.ErrOut}
	return rollout.InPlaceEnv{Revisions: true, Resize: resize, AllowedAnnotations: e.injector.AllowedAnnotations,
		KubeletVersion: func(node string) (*version.Version, error) { return nodes.of(ctx, node) }}, nil
}

// plannedSet is the SidecarSet to plan: the cluster's copy, or FILE's, which then takes the
// copy's place in the engine. A FILE that changes the spec makes a new generation, which
// resumes a halted rollout; one that does not keeps the copy's status.
func plannedSet(ctx context.Context, c client.Reader, e *Engine, o *options, name, file string) (*appsv1alpha1.SidecarSet, error) {
	var set *appsv1alpha1.SidecarSet
	if file != "" {
		var err error
		if set, err = setFromFile(o, file, name); err != nil {
			return nil, err
		}
		name = set.Name
	}
	var live appsv1alpha1.SidecarSet
	err := c.Get(ctx, client.ObjectKey{Name: name}, &live)
	switch {
	case apierrors.IsNotFound(err) && set == nil:
		return nil, &exitError{code: ExitRefused, err: fmt.Errorf("SidecarSet %q not found", name)}
	case err != nil && !apierrors.IsNotFound(err):
		return nil, clusterError(fmt.Errorf("reading SidecarSet %s: %w", name, err))
	case set == nil:
		return &live, nil
	}
	set.UID, set.ResourceVersion, set.Generation, set.Status = live.UID, "", 0, appsv1alpha1.SidecarSetStatus{}
	if err == nil && equality.Semantic.DeepEqual(set.Spec, live.Spec) {
		set.Generation, set.Status = live.Generation, live.Status
	}
	e.store.Upsert(set)
	return set, nil
}

// setFromFile reads the SidecarSet to plan from -f: the one named, or the only one.
func setFromFile(o *options, file, name string) (*appsv1alpha1.SidecarSet, error) {
	r, done, err := input(o, file)
	if err != nil {
		return nil, err
	}
	defer done()
	sets, err := ReadSidecarSets(r, file)
	if err != nil {
		return nil, &exitError{code: ExitRefused, err: err}
	}
	if i := slices.IndexFunc(sets, func(s *appsv1alpha1.SidecarSet) bool { return s.Name == name }); name != "" && i >= 0 {
		return sets[i], nil
	}
	switch {
	case name != "":
		return nil, &exitError{code: ExitRefused, err: fmt.Errorf("%s holds no SidecarSet %q", file, name)}
	case len(sets) != 1:
		return nil, usageError("%s holds %d SidecarSets; name the one to plan: rollout plan NAME -f %s", file, len(sets), file)
	}
	return sets[0], nil
}

// optedInPods lists the opted-in pods (the engine's inject.OptInSelector) of every namespace,
// only those the set's selector matches when it parses (an invalid set is reported by the plan).
func optedInPods(ctx context.Context, c client.Reader, set *appsv1alpha1.SidecarSet) ([]*corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil || set.Spec.Selector == nil {
		sel = labels.Everything()
	}
	optIn, err := metav1.LabelSelectorAsSelector(inject.OptInSelector())
	if err != nil {
		return nil, err
	}
	requirements, _ := optIn.Requirements()
	var list corev1.PodList
	if err := c.List(ctx, &list, client.MatchingLabelsSelector{Selector: sel.Add(requirements...)}); err != nil {
		return nil, clusterError(fmt.Errorf("listing opted-in pods: %w", err))
	}
	pods := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		pods[i] = &list.Items[i]
	}
	return pods, nil
}

// servesPodResize reports whether the API server serves pods/resize, as the operator finds out
// at start.
func (o *options) servesPodResize() (bool, error) {
	dc, err := o.config.ToDiscoveryClient()
	if err != nil {
		return false, clusterError(fmt.Errorf("connecting to the cluster: %w", err))
	}
	list, err := dc.ServerResourcesForGroupVersion("v1")
	if err != nil {
		return false, clusterError(fmt.Errorf("discovering the core API's resources: %w", err))
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "pods/resize" }), nil
}

// nodeVersions reads nodes' kubelet versions, each once. A user who may not read nodes gets a
// warning, and the plan takes their kubelets as recent.
type nodeVersions struct {
	reader client.Reader
	known  map[string]*version.Version
	warn   io.Writer
	warned bool
}

func (n *nodeVersions) of(ctx context.Context, name string) (*version.Version, error) {
	if v, ok := n.known[name]; ok {
		return v, nil
	}
	var node corev1.Node
	err := n.reader.Get(ctx, client.ObjectKey{Name: name}, &node)
	switch {
	case apierrors.IsForbidden(err):
		if !n.warned {
			fmt.Fprintf(n.warn, "warning: cannot read nodes (%v): the plan takes every kubelet to restart native sidecars whose image changes (v1.32 and later)\n", err)
			n.warned = true
		}
	case err != nil && !apierrors.IsNotFound(err):
		return nil, clusterError(fmt.Errorf("reading node %s: %w", name, err))
	}
	v, _ := version.ParseGeneric(node.Status.NodeInfo.KubeletVersion) // nil when it does not parse
	if n.known == nil {
		n.known = map[string]*version.Version{}
	}
	n.known[name] = v
	return v, nil
}
