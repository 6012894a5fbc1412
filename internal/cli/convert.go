package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/printers"
	sigsjson "sigs.k8s.io/json"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// kruiseAPIVersion is the OpenKruise SidecarSet API that convert reads.
const kruiseAPIVersion = "apps.kruise.io/v1alpha1"

func newConvertCommand(o *options) *cobra.Command {
	var in fileFlags
	cmd := &cobra.Command{
		Use:   "convert -f FILE|DIR|-",
		Short: "Turn OpenKruise SidecarSets (apps.kruise.io/v1alpha1) into this operator's",
		Long: `convert reads OpenKruise SidecarSets (` + kruiseAPIVersion + `) and prints the same sets as
apps.sidecarset.io/v1alpha1 SidecarSets, with OpenKruise's defaults made explicit where ours
differ (updateStrategy.type RollingUpdate, maxUnavailable 1, containers injected before the app
containers). A field with no equivalent here is refused, naming the field: nothing is printed and
the exit code is 1. Other objects are passed through unchanged. What works differently (pods
opt in with the label sidecarset.io/inject=true) is said on standard error.

docs/kruise.md has the field-by-field table.`,
		Example: `  kubectl sidecarset convert -f kruise-sidecarsets.yaml > sidecarsets.yaml`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			docs, err := readInput(o, in)
			if err != nil {
				return err
			}
			var (
				out     []*unstructured.Unstructured
				refused []string
				sets    int
			)
			for _, d := range docs {
				if d.Object.GroupVersionKind().Group != "apps.kruise.io" || d.Object.GetKind() != "SidecarSet" {
					out = append(out, d.Object)
					continue
				}
				set, err := ConvertKruise(d.Object)
				if err != nil {
					refused = append(refused, fmt.Sprintf("%s: SidecarSet %s: %v", d.Source, d.Object.GetName(), err))
					continue
				}
				sets++
				out = append(out, set)
			}
			if len(refused) > 0 {
				return &exitError{code: ExitRefused, err: errors.New(strings.Join(refused, "\n"))}
			}
			if sets == 0 {
				return &exitError{code: ExitRefused, err: fmt.Errorf("%s holds no OpenKruise SidecarSet (%s)", in.file, kruiseAPIVersion)}
			}
			var p printers.YAMLPrinter
			for _, obj := range out {
				if err := p.PrintObj(obj, o.streams.Out); err != nil {
					return err
				}
			}
			fmt.Fprintf(o.streams.ErrOut, "converted %d SidecarSet(s). Pods get their sidecars only when labelled %s=%s "+
				"(OpenKruise injects every pod a selector matches): add the label to the pod templates of the workloads to inject\n",
				sets, appsv1alpha1.InjectLabel, appsv1alpha1.InjectLabelValue)
			return nil
		},
	}
	in.add(cmd, "the OpenKruise SidecarSets")
	return cmd
}

// ConvertKruise turns an OpenKruise SidecarSet into this operator's: the fields both have are
// carried as they are, OpenKruise's defaults where ours differ are written out, and every field
// with no equivalent is refused, all of them named in one error.
func ConvertKruise(doc *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if doc.GetAPIVersion() != kruiseAPIVersion {
		return nil, fmt.Errorf("apiVersion %s: convert reads %s", doc.GetAPIVersion(), kruiseAPIVersion)
	}
	spec, _, err := unstructured.NestedMap(doc.Object, "spec")
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	c := &converter{}
	c.spec(spec)
	// What is left must be this operator's spec, field for field: decoding it strictly names
	// every field that has no equivalent.
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	var typed appsv1alpha1.SidecarSetSpec
	strict, err := sigsjson.UnmarshalStrict(raw, &typed)
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	for _, e := range strict {
		c.refuse(prefixed(e.Error()), "no equivalent in this operator")
	}
	if len(c.refused) > 0 {
		return nil, errors.New("fields with no equivalent here:\n  " + strings.Join(c.refused, "\n  "))
	}
	out := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	out.SetGroupVersionKind(appsv1alpha1.GroupVersion.WithKind("SidecarSet"))
	out.SetName(doc.GetName())
	out.SetLabels(doc.GetLabels())
	out.SetAnnotations(withoutKruise(doc.GetAnnotations()))
	return out, nil
}

// converter rewrites an OpenKruise spec in place into this operator's shape and collects what it
// cannot carry.
type converter struct{ refused []string }

func (c *converter) refuse(field, why string) {
	c.refused = append(c.refused, field+": "+why)
}

func (c *converter) spec(spec map[string]any) {
	if ns, ok := spec["namespace"].(string); ok {
		delete(spec, "namespace")
		if _, both := spec["namespaceSelector"]; both {
			c.refuse("spec.namespace", "set together with spec.namespaceSelector; keep one")
		} else if ns != "" {
			// The namespace's name label, which the API server sets on every namespace.
			spec["namespaceSelector"] = map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": ns}}
		}
	}
	if _, ok := spec["selector"]; !ok {
		c.refuse("spec.selector", "required here: a SidecarSet selects pods by label")
	}
	for _, list := range []struct {
		key    string
		inject string
	}{{"containers", string(appsv1alpha1.BeforeAppContainer)}, {"initContainers", string(appsv1alpha1.AfterAppContainer)}} {
		items, _ := spec[list.key].([]any)
		for i, item := range items {
			if m, ok := item.(map[string]any); ok {
				c.container(fmt.Sprintf("spec.%s[%d]", list.key, i), m, list.inject)
			}
		}
	}
	strategy, _ := spec["updateStrategy"].(map[string]any)
	if strategy == nil {
		strategy = map[string]any{}
		spec["updateStrategy"] = strategy
	}
	// OpenKruise's defaults, which differ from ours (NotUpdate; maxUnavailable unset means 1).
	if t, _ := strategy["type"].(string); t == "" {
		strategy["type"] = string(appsv1alpha1.RollingUpdate)
	}
	if _, ok := strategy["maxUnavailable"]; !ok {
		strategy["maxUnavailable"] = int64(1)
	}
	if injection, ok := spec["injectionStrategy"].(map[string]any); ok {
		c.revision(injection, strategy)
	}
}

// container carries one sidecar: OpenKruise's upgradeStrategy is ours unless it asks for a hot
// upgrade; its default podInjectPolicy is written out; a transferEnv entry that sets both forms
// of a field is reduced to the one OpenKruise uses; resourcesPolicy expressions become CEL.
func (c *converter) container(path string, m map[string]any, defaultInject string) {
	if p, _ := m["podInjectPolicy"].(string); p == "" {
		m["podInjectPolicy"] = defaultInject
	}
	transfers, _ := m["transferEnv"].([]any)
	for _, t := range transfers {
		entry, ok := t.(map[string]any)
		if !ok {
			continue
		}
		// OpenKruise reads the source from the pod when both are set.
		if _, from := entry["sourceContainerNameFrom"]; from {
			delete(entry, "sourceContainerName")
		}
		// And copies the union of envName and envNames, sorted.
		if name, ok := entry["envName"].(string); ok && name != "" {
			if names, both := entry["envNames"].([]any); both {
				union := map[string]bool{name: true}
				for _, n := range names {
					if s, ok := n.(string); ok {
						union[s] = true
					}
				}
				sorted := slices.Sorted(maps.Keys(union))
				merged := make([]any, len(sorted))
				for i, n := range sorted {
					merged[i] = n
				}
				entry["envNames"] = merged
				delete(entry, "envName")
			}
		}
	}
	c.resourcesPolicy(path, m)
	if u, ok := m["upgradeStrategy"].(map[string]any); ok {
		delete(m, "upgradeStrategy")
		switch t, _ := u["upgradeType"].(string); t {
		case "", "ColdUpgrade":
			// What this operator does: the container restarts with its new image in place.
		default:
			c.refuse(path+".upgradeStrategy.upgradeType", fmt.Sprintf("%s has no equivalent: sidecars are updated in place "+
				"by a restart of the one container (docs/kruise.md says why there is no hot upgrade)", t))
		}
	}
}

// revision maps OpenKruise's injection revision (revisionName, customVersion, policy) onto ours.
func (c *converter) revision(injection, strategy map[string]any) {
	r, ok := injection["revision"].(map[string]any)
	if !ok {
		return
	}
	if name, ok := r["revisionName"]; ok {
		delete(r, "revisionName")
		r["name"] = name
	}
	switch p, _ := r["policy"].(string); p {
	case "", string(appsv1alpha1.RevisionPolicyAlways):
		delete(r, "policy")
	case string(appsv1alpha1.RevisionPolicyPartial):
		if partition, ok := strategy["partition"]; ok {
			if _, percent := partition.(string); !percent {
				c.refuse("spec.updateStrategy.partition", fmt.Sprintf("%v is a number: with injectionStrategy.revision.policy Partial, OpenKruise then gives every new pod the current spec, "+
					"while this operator takes the share of new pods that get the pinned revision from the partition, as a percentage: write it as one", partition))
			}
		}
	default:
		c.refuse("spec.injectionStrategy.revision.policy", p+" is not a policy: use Always or Partial")
		delete(r, "policy")
	}
}

// prefixed turns a strict-decoding error about the spec ("unknown field \"x.y\"") into a path
// under spec.
func prefixed(msg string) string {
	if i := strings.Index(msg, `"`); i >= 0 {
		if j := strings.LastIndex(msg, `"`); j > i {
			return "spec." + msg[i+1:j]
		}
	}
	return "spec: " + msg
}

// withoutKruise drops OpenKruise's own annotations (its hashes), which mean nothing here.
func withoutKruise(annotations map[string]string) map[string]string {
	out := maps.Clone(annotations)
	for _, k := range slices.Collect(maps.Keys(out)) {
		if strings.Contains(k, "kruise.io/") {
			delete(out, k)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
