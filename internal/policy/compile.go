package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/version"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/podrules"
	"github.com/sidecarset/sidecarset-operator/internal/revision"
)

const (
	// ManagedByLabel and ManagedByValue mark the objects the operator renders.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "sidecarset-operator"
	// SetLabel names, on a rendered policy and binding, the SidecarSet they were rendered from.
	SetLabel = "sidecarset.io/sidecarset"
	// HashAnnotation is, on a rendered policy, the hash of what it injects.
	HashAnnotation = "sidecarset.io/hash"
)

// Options are the operator-wide settings a policy repeats from the webhook.
type Options struct {
	// Scope is the engine's gate scope: the operator's own namespace (never injected, so the
	// operator's own pods always start, and where probe pods are created) and
	// --excluded-namespaces. The binding renders the gate from it (renderBinding).
	inject.Scope
	// LazyPod: the API server reads the pod lazily for a policy with matchConditions, its
	// conditions and mutations sharing what they read (Kubernetes 1.37 and later); older ones
	// convert the whole pod for each. With it, a policy leaves out the pods already routed in a
	// matchCondition, and its mutation reads only the fields it uses.
	LazyPod bool
}

// Compiled is the policy and binding that inject one SidecarSet.
type Compiled struct {
	Policy  *admissionregistrationv1.MutatingAdmissionPolicy
	Binding *admissionregistrationv1.MutatingAdmissionPolicyBinding
	// Hash is the hash the policy records (the set's hash).
	Hash string
	// Unsupported is nil when the policy injects the set's pods itself. Otherwise it says why
	// the policy routes every pod the set selects to the webhook.
	Unsupported *Unsupported
	// Probe is the binding that sends the operator's probe pods (ProbePod) to the policy, with
	// ProbeKey; nil when there is no operator namespace to probe in. A probe pod the policy
	// annotates with Digest shows that the API server runs this rendering.
	Probe    *admissionregistrationv1.MutatingAdmissionPolicyBinding
	ProbeKey string
	Digest   string
}

// Unsupported names what keeps a SidecarSet on the webhook in policy mode.
type Unsupported struct {
	// Field is the path in the SidecarSet, e.g. spec.containers[0].transferEnv.
	Field string
	// Reason says why CEL cannot inject it as the engine does.
	Reason string
}

func (u *Unsupported) String() string { return u.Field + ": " + u.Reason }

// Name is the name of the policy and the binding rendered from the named SidecarSet.
func Name(set string) string { return "sidecarset-" + set }

// Compile renders set's policy and binding. others are every other SidecarSet: a pod that one
// of them also selects goes to the webhook, which orders several sets' sidecars by name. It
// fails, as the engine does, on a set whose selectors the validating webhook refuses (one
// written while it was down); such an other set selects nothing, as in the engine.
//
// revs are the stored revisions (any set's): a set that pins one (spec.injectionStrategy.revision)
// injects that revision's content, as the webhook does; while the revision it pins is not
// stored, the policy routes the set's pods to the webhook, which injects the current spec and
// warns (a policy cannot warn).
func Compile(set *appsv1alpha1.SidecarSet, others []*appsv1alpha1.SidecarSet, revs []*appsv1.ControllerRevision, opts Options) (*Compiled, error) {
	return compile(set, others, revs, opts, nil)
}

// CompileRouted renders set's policy and binding as Compile does, except that the policy routes
// every pod the set selects to the webhook, for the reason why (see Stopped).
func CompileRouted(set *appsv1alpha1.SidecarSet, others []*appsv1alpha1.SidecarSet, revs []*appsv1.ControllerRevision, opts Options, why *Unsupported) (*Compiled, error) {
	return compile(set, others, revs, opts, why)
}

// Stopped is why a SidecarSet stopped by a conflict with an older one stays on the webhook: the
// webhook injects nothing of it while the conflict lasts, and decides so at each admission from
// its own view of the sets, which a policy cannot share.
func Stopped(older string) *Unsupported {
	return &Unsupported{Field: "spec", Reason: fmt.Sprintf(
		"it conflicts with the older SidecarSet %q, which keeps injecting; the webhook injects nothing of this one while the conflict lasts (condition Conflict)", older)}
}

func compile(set *appsv1alpha1.SidecarSet, others []*appsv1alpha1.SidecarSet, revs []*appsv1.ControllerRevision, opts Options, routed *Unsupported) (*Compiled, error) {
	content, pin := Resolve(set, revs)
	// A set pinning digests is rendered with its images pinned (engine.Set); while some wait
	// to be resolved, the webhook injects its last revision, and the policy routes its pods there.
	engine, waiting, err := revision.Compile(set, content, func(name string) *appsv1.ControllerRevision {
		for _, r := range revs {
			if r.Name == name {
				return r
			}
		}
		return nil
	})
	if engine == nil {
		return nil, err
	}
	if waiting != nil && routed == nil {
		routed = &Unsupported{Field: "spec.imagePolicy", Reason: "its images wait to be resolved to digests (condition ImagesPinned): " +
			"the webhook injects its last revision meanwhile"}
	}
	content = engine.Set
	othersCEL, err := selectedByOthers(set.Name, others)
	if err != nil {
		return nil, err
	}
	out := &Compiled{Hash: engine.Hash, Unsupported: routed}
	if out.Unsupported == nil {
		out.Unsupported = pin
	}
	if out.Unsupported == nil {
		out.Unsupported = Check(content)
	}
	set = content
	// lazy: the pod is read lazily (Options.LazyPod), and a matchCondition leaves out the pods
	// already routed; otherwise the mutation does.
	lazy := opts.LazyPod
	var mutation string
	var variables []admissionregistrationv1.Variable // the injecting branch's
	switch {
	case out.Unsupported != nil:
		mutation = routeOps
	case set.Spec.InjectionStrategy.Paused:
		// A paused set injects nothing new; a pod recording it (an exported pod) is the
		// webhook's, which keeps what the record names.
		mutation = "!(" + recordedCEL + ") ? [] : " + routeOps
	default:
		inj, err := injection(set, out.Hash, othersCEL)
		if err != nil {
			return nil, fmt.Errorf("SidecarSet %q: %w", set.Name, err)
		}
		// A lazily read pod's lists hold Go structs that a patch cannot carry: a set that
		// copies the pod's mounts, devices or env vars reads it whole.
		lazy = lazy && !inj.copies
		mutation = inj.route + " ? " + routeOps + " : " + inj.ops
		variables = inj.variables
	}
	if !lazy {
		mutation = "(" + routedCEL + ") ? [] : " + mutation
	}
	out.Policy = renderPolicy(set, out.Hash, mutation, variables, lazy)
	out.Binding = renderBinding(set, opts)
	if probes(opts) {
		out.Digest = digest(out.Policy)
		withProbe(out.Policy, opts.OperatorNamespace, out.Digest)
		out.ProbeKey = digest([]string{out.Digest, digest(out.Binding)})
		out.Probe = renderProbe(set, opts.OperatorNamespace, out.ProbeKey)
	}
	return out, nil
}

// Resolve returns set as it injects, as the webhook's snapshot resolves it: for a set that pins
// a revision, the set with that revision's content. While the pinned revision is not stored (or
// cannot be read), or with policy Partial, it returns set and why its pods go to the webhook.
func Resolve(set *appsv1alpha1.SidecarSet, revs []*appsv1.ControllerRevision) (*appsv1alpha1.SidecarSet, *Unsupported) {
	if u := drawn(set); u != nil {
		return set, u
	}
	content, missing := revision.Resolve(set, revs)
	if missing == "" {
		return content, nil
	}
	return set, &Unsupported{Field: "spec.injectionStrategy.revision",
		Reason: "it pins " + missing + ": the webhook injects the current spec and says so in a warning"}
}

// Check reports the first part of set's content that a policy cannot inject as the engine
// does (the set then stays on the webhook), or nil. A set that pins a revision is checked with
// that revision's content (see Resolve).
func Check(set *appsv1alpha1.SidecarSet) *Unsupported {
	if u := drawn(set); u != nil {
		return u
	}
	// Every field a rule routes, or no rule classifies, keeps the set on the webhook (see
	// SpecFields and SidecarFields): deny by default.
	if u := routedField(set); u != nil {
		return u
	}
	transferred := 0
	hostPorts, containerPorts := sets.New[string](), sets.New[string]()
	for _, list := range []struct {
		field      string
		containers []appsv1alpha1.SidecarContainer
	}{{"spec.initContainers", set.Spec.InitContainers}, {"spec.containers", set.Spec.Containers}} {
		for i := range list.containers {
			c := &list.containers[i]
			path := fmt.Sprintf("%s[%d]", list.field, i)
			for _, t := range c.TransferEnv {
				transferred += len(transferNames(t))
			}
			if transferred > MaxTransfers {
				return &Unsupported{Field: path + ".transferEnv", Reason: fmt.Sprintf(
					"the set transfers more than %d env vars, the most a policy copies (the patch of the largest set must stay within the API server's size limit for one CEL expression)", MaxTransfers)}
			}
			if u := containerPortTaken(c, list.field == "spec.initContainers", path, containerPorts); u != nil {
				return u
			}
			if list.field != "spec.containers" {
				continue // init containers run one at a time: the engine compares no host ports
			}
			for pi, p := range podrules.DefaultedContainer(&c.Container, false, false).Ports {
				if p.HostPort == 0 {
					continue
				}
				key := podrules.HostPortKey(p)
				if hostPorts.Has(key) {
					return &Unsupported{Field: fmt.Sprintf("%s.ports[%d].hostPort", path, pi),
						Reason: "another of the set's containers binds host port " + key + ": the webhook refuses such pods with its message"}
				}
				hostPorts.Insert(key)
			}
		}
	}
	return nil
}

// containerPortTaken reports a port of c, a sidecar that runs alongside the app, that another
// of the set's does too (number and protocol): the engine refuses every pod such a set selects.
// taken collects the ports seen.
func containerPortTaken(c *appsv1alpha1.SidecarContainer, init bool, path string, taken sets.Set[string]) *Unsupported {
	if init && !podrules.NativeSidecar(&c.Container) {
		return nil // a plain init container runs alone
	}
	for pi, p := range podrules.DefaultedContainer(&c.Container, init, false).Ports {
		key := fmt.Sprintf("%d/%s", p.ContainerPort, p.Protocol)
		if taken.Has(key) {
			return &Unsupported{Field: fmt.Sprintf("%s.ports[%d].containerPort", path, pi),
				Reason: "another of the set's sidecars declares container port " + key + ": the webhook refuses such pods with its message"}
		}
		taken.Insert(key)
	}
	return nil
}

// routeOps adds the route label and the route annotation; the pod webhook's matchCondition in
// policy mode takes either (0.1.0's took the annotation alone, which its policies still write
// while an upgrade replaces them). The pod has labels: the policy's objectSelector requires the
// opt-in label.
var routeOps = fmt.Sprintf(`[JSONPatch{op: "add", path: "/metadata/labels/" + jsonpatch.escapeKey(%s), value: %s}] + `,
	quote(appsv1alpha1.WebhookRouteLabel), quote(appsv1alpha1.WebhookRouteValue)) +
	addAnnotations(annotation{key: appsv1alpha1.WebhookRouteAnnotation, value: quote(appsv1alpha1.WebhookRouteValue)})

// annotation is one annotation a patch adds: its key, and its value as a CEL string expression.
type annotation struct {
	key, value string
	// ifAbsent: only when the pod does not set it already.
	ifAbsent bool
}

// addAnnotations adds annotations one key at a time to a pod that has annotations, and creates
// the map holding them all on a pod that has none (adding the map to a pod that has one would
// replace it).
func addAnnotations(entries ...annotation) string {
	ops := make([]string, len(entries))
	values := make([]string, len(entries))
	for i, e := range entries {
		key := quote(e.key)
		ops[i] = fmt.Sprintf(`[JSONPatch{op: "add", path: "/metadata/annotations/" + jsonpatch.escapeKey(%s), value: %s}]`, key, e.value)
		if e.ifAbsent {
			ops[i] = fmt.Sprintf("(%s in object.metadata.annotations ? [] : %s)", key, ops[i])
		}
		values[i] = fmt.Sprintf("%s: dyn(%s)", key, e.value)
	}
	return fmt.Sprintf(`(has(object.metadata.annotations) ? %s : [JSONPatch{op: "add", path: "/metadata/annotations", value: {%s}}])`,
		strings.Join(ops, " + "), strings.Join(values, ", "))
}

// selectedByOthers is a CEL condition: another SidecarSet selects the pod.
func selectedByOthers(self string, others []*appsv1alpha1.SidecarSet) (string, error) {
	var terms []string
	sorted := slices.Clone(others)
	slices.SortFunc(sorted, func(a, b *appsv1alpha1.SidecarSet) int { return strings.Compare(a.Name, b.Name) })
	for _, o := range sorted {
		if o.Name == self {
			continue
		}
		var waiting *inject.ImagesNotResolvedError
		if _, err := inject.Compile(o); err != nil && !errors.As(err, &waiting) {
			continue // refused by validation; the webhook injects nothing with it either
		}
		pods, err := selectorCEL(o.Spec.Selector, "object.metadata.labels")
		if err != nil {
			return "", fmt.Errorf("SidecarSet %q: spec.selector: %w", o.Name, err)
		}
		namespaces, err := selectorCEL(o.Spec.NamespaceSelector, "namespaceObject.metadata.labels")
		if err != nil {
			return "", fmt.Errorf("SidecarSet %q: spec.namespaceSelector: %w", o.Name, err)
		}
		terms = append(terms, fmt.Sprintf("(%s && %s)", pods, namespaces))
	}
	if len(terms) == 0 {
		return "false", nil
	}
	return strings.Join(terms, " || "), nil
}

// routedCEL: another policy sent the pod to the webhook already (every policy, 0.1.0's too,
// adds the annotation); or it is a mirror pod (a static pod's API object: the kubelet runs its
// manifest), which nothing injects. The route label alone is not read: only a pod's author
// writes it alone, and the webhook, called for it, keeps what the policy injected (the same
// record) and removes it.
var routedCEL = hasAnnotation(appsv1alpha1.WebhookRouteAnnotation) + " || " + hasAnnotation(inject.MirrorPodAnnotation)

// recordedCEL: the pod records injected sidecars (an exported pod, or one another policy
// injected); the webhook keeps what the record names.
var recordedCEL = hasAnnotation(appsv1alpha1.StatusAnnotation)

// renderPolicy renders set's policy around its mutation. lazy: a matchCondition leaves out the
// routed pods, which the mutation does otherwise.
func renderPolicy(set *appsv1alpha1.SidecarSet, hash, mutation string, variables []admissionregistrationv1.Variable, lazy bool) *admissionregistrationv1.MutatingAdmissionPolicy {
	fail := admissionregistrationv1.Fail
	var conditions []admissionregistrationv1.MatchCondition
	if lazy {
		conditions = []admissionregistrationv1.MatchCondition{{Name: "not-routed", Expression: "!(" + routedCEL + ")"}}
	}
	return &admissionregistrationv1.MutatingAdmissionPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "MutatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        Name(set.Name),
			Labels:      map[string]string{ManagedByLabel: ManagedByValue, SetLabel: set.Name},
			Annotations: map[string]string{HashAnnotation: hash},
		},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			// Whatever a binding selects, a policy never sees kube-system (the namespace every
			// scope excludes) nor a pod that does not opt in. The namespaces the gate leaves out
			// are left out by the set's binding (the probe binding selects the operator's
			// namespace).
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: inject.Scope{}.Namespaces()},
				}},
				ObjectSelector: inject.OptInSelector(),
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
				}}},
			},
			Variables:       variables,
			MatchConditions: conditions,
			Mutations: []admissionregistrationv1.Mutation{{
				PatchType: admissionregistrationv1.PatchTypeJSONPatch,
				JSONPatch: &admissionregistrationv1.JSONPatch{Expression: mutation},
			}},
			FailurePolicy: &fail,
			// The policy sees the pod before any mutating webhook, like ours does
			// (reinvocationPolicy Never): a pod is injected once, at its first pass.
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
		},
	}
}

func hasAnnotation(key string) string {
	return fmt.Sprintf("has(object.metadata.annotations) && %s in object.metadata.annotations", quote(key))
}

// renderBinding binds the policy to the pods the set selects, in the namespaces the engine's
// gate lets through (inject.Scope.NamespaceRequirements) that the set's namespaceSelector
// selects. The gate's other rules are the policy's: its objectSelector (opt-in) and its routed
// variable (mirror pods).
func renderBinding(set *appsv1alpha1.SidecarSet, opts Options) *admissionregistrationv1.MutatingAdmissionPolicyBinding {
	namespaces := &metav1.LabelSelector{}
	if set.Spec.NamespaceSelector != nil {
		namespaces = set.Spec.NamespaceSelector.DeepCopy()
	}
	namespaces.MatchExpressions = append(namespaces.MatchExpressions, opts.NamespaceRequirements()...)
	match := &admissionregistrationv1.MatchResources{ObjectSelector: set.Spec.Selector.DeepCopy(), NamespaceSelector: namespaces}
	return binding(set, Name(set.Name), match)
}

// binding binds set's policy, under name, to what match selects.
func binding(set *appsv1alpha1.SidecarSet, name string, match *admissionregistrationv1.MatchResources) *admissionregistrationv1.MutatingAdmissionPolicyBinding {
	return &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "MutatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{ManagedByLabel: ManagedByValue, SetLabel: set.Name},
		},
		Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: Name(set.Name), MatchResources: match},
	}
}

// compiledInjection is the injecting branch of a policy: its variables, its patch, and the
// CEL condition on which it routes the pod to the webhook instead.
type compiledInjection struct {
	variables []admissionregistrationv1.Variable
	ops       string
	route     string
	// copies: the patch copies values of the pod's (appCopies).
	copies bool
}

// injection renders what the engine does for a pod that no other set selects, that records
// nothing and that clashes with nothing of the set's: sidecars placed by podInjectPolicy, the
// volumes they mount and the pull secrets the pod lacks added, the record written. others is
// the condition that another set selects the pod (selectedByOthers).
func injection(set *appsv1alpha1.SidecarSet, hash, others string) (*compiledInjection, error) {
	spec := &set.Spec
	var ops []string
	ac := &appCopies{}
	for _, l := range []struct {
		path       string
		containers []appsv1alpha1.SidecarContainer
	}{{"/spec/initContainers", spec.InitContainers}, {"/spec/containers", spec.Containers}} {
		listOps, err := containerOps(l.path, l.containers, ac)
		if err != nil {
			return nil, err
		}
		ops = append(ops, listOps...)
	}
	volumes, external := mounted(spec)
	if len(volumes) > 0 {
		ops = append(ops, createList("/spec/volumes", "object.spec.volumes"))
		for _, v := range volumes {
			lit, err := literal(v)
			if err != nil {
				return nil, fmt.Errorf("spec.volumes %q: %w", v.Name, err)
			}
			ops = append(ops, addOp("/spec/volumes/-", lit))
		}
	}
	// A name listed twice is added once, as the engine adds it.
	var secretNames []string
	for _, s := range spec.ImagePullSecrets {
		if !slices.Contains(secretNames, s.Name) {
			secretNames = append(secretNames, s.Name)
		}
	}
	if len(secretNames) > 0 {
		ops = append(ops,
			`(variables.secrets.size() == 0 || has(object.spec.imagePullSecrets) ? [] : [JSONPatch{op: "add", path: "/spec/imagePullSecrets", value: []}])`,
			`variables.secrets.map(n, JSONPatch{op: "add", path: "/spec/imagePullSecrets/-", value: {"name": n}})`)
	}
	// What the patch reads more than once is a variable; so is a long condition or record,
	// which would take the mutation past the API server's length limit for one expression.
	// The rest is written into the mutation: the API server evaluates each variable a policy
	// reads as a program of its own.
	var vars []admissionregistrationv1.Variable
	if len(secretNames) > 0 {
		vars = append(vars, admissionregistrationv1.Variable{Name: "secrets", Expression: fmt.Sprintf(
			"%s.filter(n, !(has(object.spec.imagePullSecrets) && object.spec.imagePullSecrets.exists(s, s.name == n)))", quoteAll(secretNames))})
	}
	vars = append(vars, ac.variables...)
	inline := func(name, expr string) string {
		if len(expr) <= maxInlined {
			return "(" + expr + ")"
		}
		vars = append(vars, admissionregistrationv1.Variable{Name: name, Expression: expr})
		return "variables." + name
	}
	ops = append(ops, annotationOps(inline("record", record(set.Name, hash, spec, volumes, secretNames)), len(spec.Containers) > 0))
	route := []string{"(" + recordedCEL + ")"}
	if others != "false" {
		route = append(route, inline("others", others))
	}
	route = append(route, inline("clash", clash(spec, volumes, external)))
	if uncopied, ok := ac.uncopiedVariable(); ok {
		route = append(route, inline(uncopied.Name, uncopied.Expression))
	}
	return &compiledInjection{variables: vars, ops: "(" + strings.Join(ops, " + ") + ")", route: strings.Join(route, " || "),
		copies: len(ac.variables) > 0}, nil
}

// maxInlined is the longest condition or record written into a policy's mutation; a longer one
// is a variable. The API server parses at most 100,000 characters of one expression: the
// mutation of the largest set the CRD allows keeps within it (TestLargestSetCompiles).
const maxInlined = 2000

// containerOps places one list's sidecars: BeforeAppContainer ones in front of the pod's
// own, in the set's order, the others after them.
func containerOps(path string, containers []appsv1alpha1.SidecarContainer, ac *appCopies) ([]string, error) {
	if len(containers) == 0 {
		return nil, nil
	}
	var ops []string
	if path == "/spec/initContainers" {
		ops = append(ops, createList(path, "object.spec.initContainers"))
	}
	before := 0
	for i := range containers {
		lit, err := containerLiteral(&containers[i], ac)
		if err != nil {
			return nil, fmt.Errorf("container %q: %w", containers[i].Name, err)
		}
		at := path + "/-"
		if containers[i].PodInjectPolicy == appsv1alpha1.BeforeAppContainer {
			at = fmt.Sprintf("%s/%d", path, before)
			before++
		}
		ops = append(ops, addOp(at, lit))
	}
	return ops, nil
}

func addOp(path, value string) string {
	return fmt.Sprintf(`[JSONPatch{op: "add", path: %s, value: %s}]`, quote(path), value)
}

// createList adds an empty list where the pod has none, so that the adds after it, in the
// same patch, have a list to go into.
func createList(path, field string) string {
	return fmt.Sprintf(`(has(%s) ? [] : [JSONPatch{op: "add", path: %s, value: []}])`, field, quote(path))
}

// mounted returns the set's volumes that its sidecars mount, in the set's order, and the names
// they mount that the set does not define (the pod must have them).
func mounted(spec *appsv1alpha1.SidecarSetSpec) ([]corev1.Volume, []string) {
	names := sets.New[string]()
	for _, list := range [][]appsv1alpha1.SidecarContainer{spec.InitContainers, spec.Containers} {
		for i := range list {
			for _, m := range list[i].VolumeMounts {
				names.Insert(m.Name)
			}
			for _, d := range list[i].VolumeDevices {
				names.Insert(d.Name)
			}
		}
	}
	var volumes []corev1.Volume
	for _, v := range spec.Volumes {
		if names.Has(v.Name) {
			volumes = append(volumes, v)
			names.Delete(v.Name)
		}
	}
	return volumes, sets.List(names)
}

// clash is a CEL condition: the engine would not simply add the set to this pod. The pod
// already has a container or init container of an injected name, or a volume of an added
// name (the engine keeps an identical one and refuses a different one), lacks a volume the
// sidecars mount that the set does not define (refused), shares the host's network while a
// sidecar or init container declares ports, sets pod-level resources while a sidecar declares
// resources, or binds a host port while a sidecar binds one (the engine compares
// the defaulted host ports, and refuses the pod when two are the same).
func clash(spec *appsv1alpha1.SidecarSetSpec, volumes []corev1.Volume, external []string) string {
	var names []string
	ports, hostPorts := false, false
	for _, list := range [][]appsv1alpha1.SidecarContainer{spec.InitContainers, spec.Containers} {
		for i := range list {
			names = append(names, list[i].Name)
			ports = ports || len(list[i].Ports) > 0 // a node port on the host's network, in any list
		}
	}
	for i := range spec.Containers {
		for _, p := range spec.Containers[i].Ports {
			hostPorts = hostPorts || p.HostPort != 0
		}
	}
	// The pod's lists are walked once each, and no list of their names is built: this runs
	// for every pod the policy sees, in the API server.
	podVolumes := "(has(object.spec.volumes) ? object.spec.volumes.map(v, v.name) : [])"
	terms := []string{
		"!has(object.spec.containers) || object.spec.containers.size() == 0",
		fmt.Sprintf("object.spec.containers.exists(c, c.name in %[1]s) || has(object.spec.initContainers) && object.spec.initContainers.exists(c, c.name in %[1]s)", quoteAll(names)),
	}
	if len(volumes) > 0 {
		added := make([]string, len(volumes))
		for i, v := range volumes {
			added[i] = v.Name
		}
		terms = append(terms, fmt.Sprintf("has(object.spec.volumes) && object.spec.volumes.exists(v, v.name in %s)", quoteAll(added)))
	}
	if len(external) > 0 {
		terms = append(terms, fmt.Sprintf("!%s.all(n, n in %s)", quoteAll(external), podVolumes))
	}
	if ports {
		terms = append(terms, "(has(object.spec.hostNetwork) && object.spec.hostNetwork)")
	}
	if hostPorts {
		terms = append(terms, "object.spec.containers.exists(c, has(c.ports) && c.ports.exists(p, has(p.hostPort) && p.hostPort != 0))")
	}
	if term, ok := portsTaken(spec); ok {
		terms = append(terms, term)
	}
	if declaresResources(spec) || spec.PodResources == appsv1alpha1.PodResourcesPad {
		// The engine adds the pod's containers' resources up against its pod-level ones, and
		// pads them for the sidecars (podResources: Pad).
		terms = append(terms, "has(object.spec.resources)")
	}
	return strings.Join(terms, " || ")
}

// declaresResources reports whether a sidecar of the set declares requests or limits.
func declaresResources(spec *appsv1alpha1.SidecarSetSpec) bool {
	for _, list := range [][]appsv1alpha1.SidecarContainer{spec.InitContainers, spec.Containers} {
		for i := range list {
			if len(list[i].Resources.Requests) > 0 || len(list[i].Resources.Limits) > 0 {
				return true
			}
		}
	}
	return false
}

// portsTaken is a CEL condition: a container or init container of the pod declares a port with
// the number or the name of a port of one of the set's sidecars that run alongside the app
// (the engine refuses such a pod, or warns of the name); none when they declare no port.
// Protocols and plain init containers, which the engine tells apart, are not: such pods are
// the webhook's too.
func portsTaken(spec *appsv1alpha1.SidecarSetSpec) (string, bool) {
	numbers, names := sets.New[int32](), sets.New[string]()
	for _, l := range []struct {
		containers []appsv1alpha1.SidecarContainer
		init       bool
	}{{spec.InitContainers, true}, {spec.Containers, false}} {
		for i := range l.containers {
			c := &l.containers[i]
			if l.init && !podrules.NativeSidecar(&c.Container) {
				continue // a plain init container runs alone
			}
			for _, p := range c.Ports {
				numbers.Insert(p.ContainerPort)
				if p.Name != "" {
					names.Insert(p.Name)
				}
			}
		}
	}
	if numbers.Len() == 0 {
		return "", false
	}
	nums := make([]string, 0, numbers.Len())
	for _, n := range sets.List(numbers) {
		nums = append(nums, fmt.Sprint(n))
	}
	declares := fmt.Sprintf("exists(c, has(c.ports) && c.ports.exists(p, p.containerPort in [%s] || has(p.name) && p.name in %s))",
		strings.Join(nums, ", "), quoteAll(sets.List(names)))
	return fmt.Sprintf("object.spec.containers.%s || has(object.spec.initContainers) && object.spec.initContainers.%s", declares, declares), true
}

// record is a CEL string: the status annotation the engine writes, byte for byte (a pod with
// an earlier record is routed, so this set's entry is the only one).
func record(name, hash string, spec *appsv1alpha1.SidecarSetSpec, volumes []corev1.Volume, secretNames []string) string {
	rec := inject.Record{Hash: hash}
	for i := range spec.Containers {
		rec.Containers = append(rec.Containers, spec.Containers[i].Name)
	}
	for i := range spec.InitContainers {
		rec.InitContainers = append(rec.InitContainers, spec.InitContainers[i].Name)
	}
	for _, v := range volumes {
		rec.Volumes = append(rec.Volumes, v.Name)
	}
	// The pull secrets the pod lacks go in last: imagePullSecrets is the record's last field
	// (notShared is never set without shareVolumePolicy).
	enc := inject.Records{name: rec}.Encode()
	head := strings.TrimSuffix(enc, "}}")
	if len(secretNames) == 0 {
		return quote(enc)
	}
	return fmt.Sprintf(`%s + (variables.secrets.size() == 0 ? "" : ",\"imagePullSecrets\":[" + variables.secrets.map(n, %s[n]).join(",") + "]") + "}}"`,
		quote(head), encodedNames(secretNames))
}

// encodedNames is a CEL map from each pull secret name to its JSON string, encoded here as the
// engine encodes its record: the record is spliced from these as data, so a name holding a
// quote or a backslash can neither break the JSON nor add an entry of its own.
func encodedNames(names []string) string {
	entries := make([]string, len(names))
	for i, n := range names {
		raw, err := json.Marshal(n)
		if err != nil {
			panic(fmt.Sprintf("encoding a string: %v", err)) // strings always encode
		}
		entries[i] = quote(n) + ": " + quote(string(raw))
	}
	return "{" + strings.Join(entries, ", ") + "}"
}

// annotationOps writes the record and, when sidecars join spec.containers and the pod names
// no default container, pins kubectl's default container to the pod's first one.
func annotationOps(record string, addsContainers bool) string {
	entries := []annotation{{key: appsv1alpha1.StatusAnnotation, value: record}}
	if addsContainers {
		entries = append(entries, annotation{key: appsv1alpha1.DefaultContainerAnnotation, value: "object.spec.containers[0].name", ifAbsent: true})
	}
	return addAnnotations(entries...)
}

// drawn says why a set that pins a revision with policy Partial stays on the webhook: a
// policy has no draw (CEL has no randomness, and cannot hash the admission request's UID).
func drawn(set *appsv1alpha1.SidecarSet) *Unsupported {
	if ref := set.Spec.InjectionStrategy.Revision; ref == nil || ref.Policy != appsv1alpha1.RevisionPolicyPartial {
		return nil
	}
	return &Unsupported{Field: "spec.injectionStrategy.revision.policy", Reason: "Partial draws each new pod for the pinned revision " +
		"or the current spec, and a policy cannot draw: the webhook injects the set"}
}

// lazyPodSince is the first Kubernetes version whose API server reads the pod lazily for a
// policy with matchConditions (Options.LazyPod).
var lazyPodSince = version.MajorMinor(1, 37)

// ReadsPodLazily reports whether an API server of gitVersion (its /version, e.g. v1.37.2 or
// v1.37.2-eks-1a2b3c) reads the pod lazily for a policy with matchConditions. A version that
// does not parse is taken for an older server: the policy is then rendered as for one, which
// is correct everywhere and only costs the API server more.
func ReadsPodLazily(gitVersion string) bool {
	v, err := version.ParseGeneric(gitVersion)
	return err == nil && v.AtLeast(lazyPodSince)
}

// MayMutatePodCreation reports whether a MutatingAdmissionPolicy's matchConstraints may match
// the creation of a pod (core group, resource pods, operation CREATE, wildcards included),
// whatever its selectors and conditions.
func MayMutatePodCreation(p *admissionregistrationv1.MutatingAdmissionPolicy) bool {
	if p.Spec.MatchConstraints == nil {
		return false
	}
	for _, r := range p.Spec.MatchConstraints.ResourceRules {
		if anyOf(r.APIGroups, "") && slices.ContainsFunc(r.Resources, matchesPods) &&
			slices.ContainsFunc(r.Operations, func(op admissionregistrationv1.OperationType) bool {
				return op == admissionregistrationv1.Create || op == admissionregistrationv1.OperationAll
			}) {
			return true
		}
	}
	return false
}

// matchesPods reports whether a rule's resource matches the pods resource itself: "pods" or
// "*", and, as the API server's rule matcher reads a subresource "*" as any subresource or none,
// "pods/*" and "*/*".
func matchesPods(resource string) bool {
	res, sub, _ := strings.Cut(resource, "/")
	return (res == "pods" || res == "*") && (sub == "" || sub == "*")
}

// anyOf: values hold v or the wildcard "*".
func anyOf(values []string, v string) bool {
	return slices.Contains(values, v) || slices.Contains(values, "*")
}
