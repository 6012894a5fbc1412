package inject

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/podrules"
)

// A sidecar's resourcesPolicy computes its requests and limits from the Pod's app containers
// when the Pod is injected (and when the rollout resizes it after an app container was
// resized). Its expressions are CEL over doubles: an expression for cpu sees the variable cpu,
// the target containers' combined cpu in cores; one for memory sees memory, in bytes. This
// reads like OpenKruise's calculator, and a Kruise expression translates mechanically
// (kubectl sidecarset convert): 50% is 0.5, 50m is quantity('50m'), max and min are the same.

// ResourceExprCostLimit bounds what evaluating one resource expression may cost (CEL's cost
// units: about one per operation). An expression over scalars costs its size; the limit only
// keeps a pathological one from taking the admission's time.
const ResourceExprCostLimit = 1000

// maxExprArgs is how many arguments max() and min() take at most.
const maxExprArgs = 8

// exprEnvs are the CEL environments of the expressions, one per resource they compute: each
// declares only its own variable, so an expression for cpu cannot read memory.
var exprEnvs = sync.OnceValue(func() map[corev1.ResourceName]*cel.Env {
	out := map[corev1.ResourceName]*cel.Env{}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		env, err := cel.NewEnv(append(exprFunctions(), cel.Variable(string(name), cel.DoubleType))...)
		if err != nil {
			panic(fmt.Sprintf("building the CEL environment of resource expressions: %v", err)) // static declarations
		}
		out[name] = env
	}
	return out
})

// exprFunctions are max and min of 2 to maxExprArgs doubles, and quantity('50m'): a Kubernetes
// quantity as a number of its base unit (cores, bytes).
func exprFunctions() []cel.EnvOption {
	pick := func(better func(a, b float64) bool) func(args ...ref.Val) ref.Val {
		return func(args ...ref.Val) ref.Val {
			best := float64(args[0].(types.Double))
			for _, a := range args[1:] {
				if v := float64(a.(types.Double)); better(v, best) || math.IsNaN(v) {
					best = v
				}
			}
			return types.Double(best)
		}
	}
	var maxOverloads, minOverloads []cel.FunctionOpt
	for n := 2; n <= maxExprArgs; n++ {
		params := slices.Repeat([]*cel.Type{cel.DoubleType}, n)
		maxOverloads = append(maxOverloads, cel.Overload(fmt.Sprintf("max_double_%d", n), params, cel.DoubleType,
			cel.FunctionBinding(pick(func(a, b float64) bool { return a > b }))))
		minOverloads = append(minOverloads, cel.Overload(fmt.Sprintf("min_double_%d", n), params, cel.DoubleType,
			cel.FunctionBinding(pick(func(a, b float64) bool { return a < b }))))
	}
	return []cel.EnvOption{
		cel.Function("max", maxOverloads...),
		cel.Function("min", minOverloads...),
		cel.Function("quantity", cel.Overload("quantity_string", []*cel.Type{cel.StringType}, cel.DoubleType,
			cel.UnaryBinding(func(arg ref.Val) ref.Val {
				q, err := resource.ParseQuantity(string(arg.(types.String)))
				if err != nil {
					return types.NewErr("quantity(%q): %v", string(arg.(types.String)), err)
				}
				return types.Double(q.AsApproximateFloat64())
			}))),
	}
}

// ResourceExpr is one compiled resource expression. It is safe for concurrent use.
type ResourceExpr struct {
	resource corev1.ResourceName
	program  cel.Program
}

// CompileResourceExpr compiles and type-checks the expression that computes one resource
// (cpu or memory) of a sidecar. The error says what is wrong in words a SidecarSet's author
// can act on; validation reports it at the expression's field.
func CompileResourceExpr(name corev1.ResourceName, expr string) (*ResourceExpr, error) {
	env, ok := exprEnvs()[name]
	if !ok {
		return nil, fmt.Errorf("only cpu and memory can be computed, not %q", name)
	}
	checked, iss := env.Compile(expr)
	if iss.Err() != nil {
		msg := iss.Err().Error()
		if strings.Contains(msg, "no matching overload") && strings.Contains(msg, "int") {
			msg += " (numbers are doubles: write 2.0, not 2)"
		}
		return nil, errors.New(msg)
	}
	if t := checked.OutputType(); !t.IsExactType(cel.DoubleType) {
		return nil, fmt.Errorf("the expression gives a %s; it must give a number (a double, such as %s * 0.5 or quantity('64Mi'))", t, name)
	}
	if err := checkQuantityLiterals(checked); err != nil {
		return nil, err
	}
	cost, err := env.EstimateCost(checked, noSizes{})
	if err != nil {
		return nil, fmt.Errorf("estimating the expression's cost: %w", err)
	}
	if cost.Max > ResourceExprCostLimit {
		return nil, fmt.Errorf("the expression may cost %d to evaluate, over the limit of %d; simplify it", cost.Max, ResourceExprCostLimit)
	}
	prg, err := env.Program(checked, cel.CostLimit(ResourceExprCostLimit))
	if err != nil {
		return nil, fmt.Errorf("preparing the expression: %w", err)
	}
	return &ResourceExpr{resource: name, program: prg}, nil
}

// checkQuantityLiterals requires quantity()'s argument to be a string literal that parses, so
// that a typo is refused with the SidecarSet rather than with each Pod.
func checkQuantityLiterals(checked *cel.Ast) error {
	for _, call := range celast.MatchDescendants(celast.NavigateAST(checked.NativeRep()), celast.FunctionMatcher("quantity")) {
		args := call.AsCall().Args()
		if len(args) != 1 || args[0].Kind() != celast.LiteralKind {
			return errors.New("quantity() takes a quoted quantity, such as quantity('50m') or quantity('64Mi')")
		}
		s, ok := args[0].AsLiteral().(types.String)
		if !ok {
			return errors.New("quantity() takes a quoted quantity, such as quantity('50m') or quantity('64Mi')")
		}
		if _, err := resource.ParseQuantity(string(s)); err != nil {
			return fmt.Errorf("quantity(%q): %w", string(s), err)
		}
	}
	return nil
}

// noSizes is a cost estimator that knows no sizes: the expressions only see scalars.
type noSizes struct{}

func (noSizes) EstimateSize(checker.AstNode) *checker.SizeEstimate { return nil }
func (noSizes) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// Eval computes the resource from value, the target containers' combined value in the
// resource's base unit (cores, bytes). The result is rounded up to a whole millicore or byte.
func (e *ResourceExpr) Eval(value float64) (resource.Quantity, error) {
	out, _, err := e.program.Eval(map[string]any{string(e.resource): value})
	if err != nil {
		return resource.Quantity{}, err
	}
	v, ok := out.(types.Double)
	if !ok {
		return resource.Quantity{}, fmt.Errorf("the expression gave %v, not a number", out)
	}
	return toQuantity(e.resource, float64(v))
}

// toQuantity turns a computed value into a quantity of whole millicores (cpu) or bytes
// (memory), rounding up; what differs from a whole one only by double rounding (0.1 * 3) is
// taken as that whole one.
func toQuantity(name corev1.ResourceName, v float64) (resource.Quantity, error) {
	switch {
	case math.IsNaN(v), math.IsInf(v, 0):
		return resource.Quantity{}, fmt.Errorf("the expression gave %v, which is not a quantity", v)
	case v < 0:
		return resource.Quantity{}, fmt.Errorf("the expression gave %s, and a sidecar's %s must not be negative", strconv.FormatFloat(v, 'g', -1, 64), name)
	}
	scaled := v
	if name == corev1.ResourceCPU {
		scaled = v * 1000
	}
	n := math.Round(scaled)
	if math.Abs(scaled-n) > 1e-6 {
		n = math.Ceil(scaled)
	}
	if n >= math.MaxInt64/1000 {
		return resource.Quantity{}, fmt.Errorf("the expression gave %s, which is too large for a %s quantity", strconv.FormatFloat(v, 'g', -1, 64), name)
	}
	if name == corev1.ResourceCPU {
		return *resource.NewMilliQuantity(int64(n), resource.DecimalSI), nil
	}
	return *resource.NewQuantity(int64(n), resource.BinarySI), nil
}

// resourcesPolicy is one sidecar's compiled resourcesPolicy.
type resourcesPolicy struct {
	spec             *appsv1alpha1.ResourcesPolicy
	targets          *regexp.Regexp
	requests, limits map[corev1.ResourceName]*ResourceExpr
}

// compileResourcesPolicy compiles a sidecar's resourcesPolicy (nil when it has none).
func compileResourcesPolicy(p *appsv1alpha1.ResourcesPolicy) (*resourcesPolicy, error) {
	if p == nil {
		return nil, nil
	}
	re, err := regexp.Compile(TargetsRegex(p))
	if err != nil {
		return nil, fmt.Errorf("targetContainersNameRegex: %w", err)
	}
	out := &resourcesPolicy{spec: p, targets: re}
	for _, l := range []struct {
		kind  string
		exprs map[corev1.ResourceName]appsv1alpha1.ResourceExpression
		into  *map[corev1.ResourceName]*ResourceExpr
	}{{"requests", p.ResourcesExpr.Requests, &out.requests}, {"limits", p.ResourcesExpr.Limits, &out.limits}} {
		for name, expr := range l.exprs {
			e, err := CompileResourceExpr(name, string(expr))
			if err != nil {
				return nil, fmt.Errorf("resourcesExpr.%s[%s]: %w", l.kind, name, err)
			}
			if *l.into == nil {
				*l.into = map[corev1.ResourceName]*ResourceExpr{}
			}
			(*l.into)[name] = e
		}
	}
	return out, nil
}

// compileResourcesPolicy compiles the sidecar's resourcesPolicy into the set, if it has one.
func (c *CompiledSet) compileResourcesPolicy(sc *appsv1alpha1.SidecarContainer) error {
	p, err := compileResourcesPolicy(sc.ResourcesPolicy)
	if err != nil {
		return fmt.Errorf("SidecarSet %q: %s.resourcesPolicy.%w", c.Name(), c.sidecarField(sc.Name), err)
	}
	if p == nil {
		return nil
	}
	if c.resourcesPolicies == nil {
		c.resourcesPolicies = map[string]*resourcesPolicy{}
	}
	c.resourcesPolicies[sc.Name] = p
	c.DeclaresResources = true
	return nil
}

// TargetsRegex is a resourcesPolicy's targetContainersNameRegex, ".*" when unset.
func TargetsRegex(p *appsv1alpha1.ResourcesPolicy) string {
	if p.TargetContainersNameRegex == "" {
		return ".*"
	}
	return p.TargetContainersNameRegex
}

// policyTargets are the Pod's containers a sidecar's resourcesPolicy reads: its own
// containers and native sidecars (init containers with restartPolicy Always) whose names the
// regex matches, in the Pod's order. injected tells the containers some SidecarSet injected
// (never targets), sidecars the names of the set's own sidecars (never targets either, even
// when the Pod declares one itself).
func policyTargets(pod *corev1.Pod, re *regexp.Regexp, injected func(name string, init bool) bool, sidecars func(string) bool) []*corev1.Container {
	var out []*corev1.Container
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if podrules.NativeSidecar(c) && !injected(c.Name, true) && !sidecars(c.Name) && re.MatchString(c.Name) {
			out = append(out, c)
		}
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if !injected(c.Name, false) && !sidecars(c.Name) && re.MatchString(c.Name) {
			out = append(out, c)
		}
	}
	return out
}

// combined is the target containers' combined request or limit of one resource, in its base
// unit. unlimited is true for a limit one of them does not set. A container without a request
// requests its limit when it sets one (as the API server defaults it), else nothing.
func (p *resourcesPolicy) combined(targets []*corev1.Container, name corev1.ResourceName, limit bool) (v float64, unlimited bool) {
	var total resource.Quantity
	for i, c := range targets {
		q, ok := c.Resources.Limits[name]
		if !limit {
			if r, set := c.Resources.Requests[name]; set {
				q, ok = r, true
			}
		}
		switch {
		case !ok && limit:
			return 0, true
		case !ok:
			q = resource.Quantity{}
		}
		if p.spec.TargetContainersMode == appsv1alpha1.TargetContainersMax {
			if i == 0 || q.Cmp(total) > 0 {
				total = q.DeepCopy()
			}
			continue
		}
		total.Add(q)
	}
	return total.AsApproximateFloat64(), false
}

// compute is the sidecar's requests and limits for these target containers. The error names
// the expression's field (under field, the sidecar's path in the set) and why.
func (p *resourcesPolicy) compute(targets []*corev1.Container, field string) (corev1.ResourceRequirements, error) {
	var out corev1.ResourceRequirements
	for _, l := range []struct {
		kind  string
		exprs map[corev1.ResourceName]*ResourceExpr
		into  *corev1.ResourceList
		limit bool
	}{{"requests", p.requests, &out.Requests, false}, {"limits", p.limits, &out.Limits, true}} {
		for _, name := range slices.Sorted(mapsKeys(l.exprs)) {
			v, unlimited := p.combined(targets, name, l.limit)
			if unlimited {
				continue // Kruise's rule: an unlimited target leaves the sidecar unlimited too
			}
			q, err := l.exprs[name].Eval(v)
			if err != nil {
				return out, &RefusedError{Reason: ReasonResourcesPolicy, Field: fmt.Sprintf("%s.resourcesPolicy.resourcesExpr.%s[%s]", field, l.kind, name), Detail: fmt.Sprintf(
					"for this pod (%s = %s, the %s of the %s of containers %s): %v; change the expression or the app containers' resources",
					name, strconv.FormatFloat(v, 'g', -1, 64), p.mode(), l.kind, quotedNames(targets), err)}
			}
			if *l.into == nil {
				*l.into = corev1.ResourceList{}
			}
			(*l.into)[name] = q
		}
	}
	for _, name := range slices.Sorted(mapsKeys(out.Requests)) {
		request := out.Requests[name]
		if limit, ok := out.Limits[name]; ok && request.Cmp(limit) > 0 {
			return out, &RefusedError{Reason: ReasonResourcesPolicy, Field: fmt.Sprintf("%s.resourcesPolicy.resourcesExpr.requests[%s]", field, name), Detail: fmt.Sprintf(
				"for this pod the computed %s request (%s) is above the computed limit (%s); a request must not exceed its limit, so change the expressions",
				name, request.String(), limit.String())}
		}
	}
	return out, nil
}

func (p *resourcesPolicy) mode() string {
	if p.spec.TargetContainersMode == appsv1alpha1.TargetContainersMax {
		return "largest"
	}
	return "sum"
}

func quotedNames(cs []*corev1.Container) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = strconv.Quote(c.Name)
	}
	return strings.Join(names, ", ")
}

func mapsKeys[V any](m map[corev1.ResourceName]V) func(func(corev1.ResourceName) bool) {
	return func(yield func(corev1.ResourceName) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// withPolicyResources gives the rendered sidecar the requests and limits its resourcesPolicy
// computes from the Pod's own containers; the sidecar as rendered when it has none. field is
// the sidecar's path in the set (spec.containers[0]).
func (b *builder) withPolicyResources(set *CompiledSet, field string, sc *appsv1alpha1.SidecarContainer, rendered *corev1.Container) (*corev1.Container, error) {
	p := set.resourcesPolicies[sc.Name]
	if p == nil {
		return rendered, nil
	}
	injected := func(name string, init bool) bool {
		if init {
			return b.strip.initContainers.Has(name)
		}
		return b.strip.containers.Has(name)
	}
	r, err := set.policyResources(p, b.pod, field, injected)
	if err != nil {
		return nil, err
	}
	out := *rendered // shallow copy: the rendered container may be the declared one
	out.Resources = r
	// The pod's overrides (spec.overrides) win over the computed values.
	return OverriddenResources(set, &out, b.pod.Annotations), nil
}

// policyResources computes a sidecar's resources for pod; the error is a *RefusedError.
func (c *CompiledSet) policyResources(p *resourcesPolicy, pod *corev1.Pod, field string, injected func(string, bool) bool) (corev1.ResourceRequirements, error) {
	targets := policyTargets(pod, p.targets, injected, c.declares)
	if len(targets) == 0 {
		return corev1.ResourceRequirements{}, &RefusedError{Reason: ReasonResourcesPolicy, SidecarSet: c.Name(), Field: field + ".resourcesPolicy.targetContainersNameRegex", Detail: fmt.Sprintf(
			"no container of the pod matches %q, so the sidecar's resources cannot be computed; change the regex, or keep the pod out of the SidecarSet's selector", TargetsRegex(p.spec))}
	}
	r, err := p.compute(targets, field)
	var refused *RefusedError
	if errors.As(err, &refused) {
		refused.SidecarSet = c.Name()
	}
	return r, err
}

// declares reports whether the set declares a container or init container of that name.
func (c *CompiledSet) declares(name string) bool {
	has := func(sc appsv1alpha1.SidecarContainer) bool { return sc.Name == name }
	return slices.ContainsFunc(c.Set.Spec.Containers, has) || slices.ContainsFunc(c.Set.Spec.InitContainers, has)
}

// policyField is the field of a sidecar's resourcesPolicy (under the sidecar) that computes
// its request or limit (kind) of a resource: specific when an expression computes it (a
// request the API server defaults from the computed limit counts), else the policy itself;
// "" when the sidecar has no resourcesPolicy.
func (c *CompiledSet) policyField(sidecar, kind, name string) (field string, specific bool) {
	p := c.resourcesPolicies[sidecar]
	if p == nil {
		return "", false
	}
	rn := corev1.ResourceName(name)
	if kind == "limits" {
		if _, ok := p.limits[rn]; ok {
			return fmt.Sprintf("resourcesPolicy.resourcesExpr.limits[%s]", name), true
		}
		return "resourcesPolicy", false
	}
	if _, ok := p.requests[rn]; ok {
		return fmt.Sprintf("resourcesPolicy.resourcesExpr.requests[%s]", name), true
	}
	if _, ok := p.limits[rn]; ok {
		return fmt.Sprintf("resourcesPolicy.resourcesExpr.limits[%s]", name), true
	}
	return "resourcesPolicy", false
}

// HasResourcesPolicy reports whether a sidecar of the set computes its resources from the
// app containers (resourcesPolicy).
func (c *CompiledSet) HasResourcesPolicy() bool { return len(c.resourcesPolicies) > 0 }

// PolicyResources is what the set's sidecar of that name gets for requests and limits in pod,
// computed by its resourcesPolicy from the Pod's own containers (those no SidecarSet's record
// lists). ok is false when the sidecar has no resourcesPolicy. The error (a *RefusedError)
// says why the Pod cannot get them.
func (c *CompiledSet) PolicyResources(pod *corev1.Pod, sidecar string) (r corev1.ResourceRequirements, ok bool, err error) {
	p := c.resourcesPolicies[sidecar]
	if p == nil {
		return r, false, nil
	}
	records, err := ParseRecords(pod.Annotations)
	if err != nil {
		return r, true, err
	}
	own := ownedBy(records)
	injected := func(name string, init bool) bool {
		if init {
			return own.initContainers.Has(name)
		}
		return own.containers.Has(name)
	}
	r, err = c.policyResources(p, pod, c.sidecarField(sidecar), injected)
	return r, true, err
}

// sidecarField is the path of the set's sidecar of that name: spec.containers[i] or
// spec.initContainers[i].
func (c *CompiledSet) sidecarField(name string) string {
	has := func(sc appsv1alpha1.SidecarContainer) bool { return sc.Name == name }
	if i := slices.IndexFunc(c.Set.Spec.InitContainers, has); i >= 0 {
		return fmt.Sprintf("spec.initContainers[%d]", i)
	}
	return fmt.Sprintf("spec.containers[%d]", slices.IndexFunc(c.Set.Spec.Containers, has))
}

// sidecarResources is what a sidecar's requests and limits are to be in pod, as the API
// server stores them (requests default to limits): computed by its resourcesPolicy from the
// pod's app containers when it has one, else as the set declares them; the pod's recorded
// overrides (spec.overrides) win over either.
func sidecarResources(set *CompiledSet, sc *appsv1alpha1.SidecarContainer, init bool, pod *corev1.Pod, overrides map[string]string) (corev1.ResourceRequirements, error) {
	c := &sc.Container
	r, ok, err := set.PolicyResources(pod, sc.Name)
	if err != nil {
		return corev1.ResourceRequirements{}, err
	}
	if ok {
		withComputed := sc.Container
		withComputed.Resources = r
		c = &withComputed
	}
	c = OverriddenResources(set, c, overrides)
	return podrules.DefaultedContainer(c, init, pod.Spec.HostNetwork).Resources, nil
}

// policyResizes are the resizes that bring the set's recorded sidecars with a resourcesPolicy
// to what it computes from the pod's app containers now (after an app container was resized
// in place), with why it cannot compute them; both empty when they hold it already.
func policyResizes(pod *corev1.Pod, rec Record, set *CompiledSet) (changes []ResourceChange, blocked []string) {
	if !set.HasResourcesPolicy() {
		return nil, nil
	}
	for s := range recordedSidecars(pod, rec, set) {
		if s.declared == nil || set.resourcesPolicies[s.pod.Name] == nil {
			continue
		}
		want, err := sidecarResources(set, s.declared, s.init, pod, rec.Overrides)
		if err != nil {
			blocked = append(blocked, err.Error())
			continue
		}
		// The pod's container as the API server stores it: a pod read offline (the
		// kubectl plugin) is not defaulted, and a limit's default request is no change.
		have := podrules.DefaultedContainer(s.pod, s.init, pod.Spec.HostNetwork).Resources
		if to, changed := resized(have, want); changed {
			changes = append(changes, ResourceChange{Init: s.init, Index: s.index, Name: s.pod.Name, To: to})
		}
	}
	return changes, blocked
}

// withPolicyResize is u, whose Pod holds the set's current hash, with the resizes its
// resourcesPolicy asks for (see policyResizes).
func (u *InPlace) withPolicyResize(rec Record, set *CompiledSet) *InPlace {
	u.Resources, u.Blocked = policyResizes(u.pod, rec, set)
	if len(u.Blocked) > 0 {
		u.Resources = nil
	}
	return u
}

// NeedsPolicyResize reports whether a Pod the set injected with its current hash has a sidecar
// whose resourcesPolicy now computes other requests or limits than it has (an app container
// was resized in place), or cannot compute them: the rollout then looks at the Pod. pod needs
// its containers' names, resources and restart policies.
func NeedsPolicyResize(set *CompiledSet, pod *corev1.Pod) bool {
	if !set.HasResourcesPolicy() {
		return false
	}
	records, err := ParseRecords(pod.Annotations)
	if err != nil {
		return false
	}
	rec, ok := records[set.Name()]
	if !ok || rec.Hash != set.Hash {
		return false
	}
	if refused := checkRecord(&rec, set, nil, nil); len(refused) > 0 {
		return true // the update reports it
	}
	changes, blocked := policyResizes(pod, rec, set)
	return len(changes) > 0 || len(blocked) > 0
}

// withPolicyResourcesOf returns pod (a copy, when anything changes) with each of the set's
// recorded sidecars that has a resourcesPolicy given what it computes from the pod's app
// containers: a sidecar's computed requests and limits follow the app containers, so a
// difference there is no edit made since injection.
func withPolicyResourcesOf(pod *corev1.Pod, rec Record, set *CompiledSet) *corev1.Pod {
	changes, _ := policyResizes(pod, rec, set)
	if len(changes) == 0 {
		return pod
	}
	out := pod.DeepCopy()
	for _, c := range changes {
		list := out.Spec.Containers
		if c.Init {
			list = out.Spec.InitContainers
		}
		list[c.Index].Resources = c.To
	}
	return out
}
