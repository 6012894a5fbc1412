package inject

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/ext"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/library"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// This file holds spec.overrides: the sidecar fields a Pod may set for itself by annotation,
// as the set's author allows. The values are read at injection and recorded in the Pod's
// record (Record.Overrides), which an in-place update keeps (see UpdateInPlace).

const (
	// OverrideRuleCostLimit bounds the cost of one evaluation of an override's rule, in CEL
	// cost units; a rule whose worst case may exceed it is refused by validation. It is the
	// API server's limit for one validation rule of a CRD.
	OverrideRuleCostLimit = 1_000_000
	// MaxOverrideValueLength is the longest override value a Pod may set; a longer one is
	// refused before any rule runs (rules are costed for values up to this length).
	MaxOverrideValueLength = 4096
)

// overrideRuleEnvs are the CEL environments of the rules, built once: building one costs
// milliseconds, and they are immutable.
var overrideRuleEnvs = sync.OnceValues(func() (map[bool]*cel.Env, error) {
	base := []cel.EnvOption{
		cel.Variable("value", cel.StringType),
		ext.Strings(ext.StringsVersion(2)),
		library.Quantity(),
	}
	plain, err := cel.NewEnv(base...)
	if err != nil {
		return nil, err
	}
	quantity, err := cel.NewEnv(append(base, cel.Variable("amount", apiservercel.QuantityType))...)
	if err != nil {
		return nil, err
	}
	return map[bool]*cel.Env{false: plain, true: quantity}, nil
})

// ResourceOverride reports whether f is a request or limit, and which.
func ResourceOverride(f appsv1alpha1.OverrideField) (kind string, name corev1.ResourceName, ok bool) {
	rest, found := strings.CutPrefix(string(f), "resources.")
	if !found {
		return "", "", false
	}
	kind, n, found := strings.Cut(rest, ".")
	return kind, corev1.ResourceName(n), found && (kind == "requests" || kind == "limits")
}

// CompileOverrideRule compiles and type-checks the rule of an override of field: a CEL
// expression of type bool over value (a string) and, for a resource field, amount (a
// quantity), whose worst-case cost stays within OverrideRuleCostLimit.
func CompileOverrideRule(rule string, field appsv1alpha1.OverrideField) (cel.Program, error) {
	envs, err := overrideRuleEnvs()
	if err != nil {
		return nil, fmt.Errorf("building the CEL environment: %w", err)
	}
	_, _, resourceField := ResourceOverride(field)
	env := envs[resourceField]
	ast, iss := env.Compile(rule)
	if iss.Err() != nil {
		if !resourceField && strings.Contains(iss.Err().Error(), "amount") {
			return nil, fmt.Errorf("%w (amount is offered for resource fields only; use quantity(value) or value)", iss.Err())
		}
		return nil, iss.Err()
	}
	if ast.OutputType() != cel.BoolType {
		return nil, fmt.Errorf("the rule is of type %s; it must be a condition (bool), true for the values allowed", ast.OutputType())
	}
	cost, err := env.EstimateCost(ast, &library.CostEstimator{SizeEstimator: valueSize{}})
	if err != nil {
		return nil, fmt.Errorf("estimating the rule's cost: %w", err)
	}
	if cost.Max > OverrideRuleCostLimit {
		return nil, fmt.Errorf("the rule may cost up to %d to evaluate, more than the limit of %d; simplify it", cost.Max, OverrideRuleCostLimit)
	}
	prog, err := env.Program(ast, cel.CostLimit(OverrideRuleCostLimit), cel.CostTracking(&library.CostEstimator{}))
	if err != nil {
		return nil, fmt.Errorf("preparing the rule: %w", err)
	}
	return prog, nil
}

// valueSize tells the cost estimator how long value can be.
type valueSize struct{}

func (valueSize) EstimateSize(element checker.AstNode) *checker.SizeEstimate {
	if p := element.Path(); len(p) == 1 && p[0] == "value" {
		return &checker.SizeEstimate{Min: 0, Max: MaxOverrideValueLength}
	}
	return nil
}

func (valueSize) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// compiledOverride is one entry of spec.overrides with its rule compiled (nil without one).
type compiledOverride struct {
	appsv1alpha1.Override
	index int // in spec.overrides
	rule  cel.Program
}

// compileOverrides compiles the rules of the set's overrides.
func compileOverrides(spec *appsv1alpha1.SidecarSetSpec) ([]compiledOverride, error) {
	out := make([]compiledOverride, 0, len(spec.Overrides))
	for i, o := range spec.Overrides {
		c := compiledOverride{Override: o, index: i}
		if o.Rule != "" {
			prog, err := CompileOverrideRule(o.Rule, o.Field)
			if err != nil {
				return nil, fmt.Errorf("spec.overrides[%d].rule: %w", i, err)
			}
			c.rule = prog
		}
		out = append(out, c)
	}
	return out, nil
}

// check returns why value is not allowed for the override, or "".
func (o *compiledOverride) check(value string) string {
	if len(value) > MaxOverrideValueLength {
		return fmt.Sprintf("the value is longer than %d characters", MaxOverrideValueLength)
	}
	vars := map[string]any{"value": value}
	if _, _, ok := ResourceOverride(o.Field); ok {
		q, err := resource.ParseQuantity(value)
		if err != nil {
			return "not a Kubernetes quantity (such as 500m, 2 or 1Gi)"
		}
		if q.Sign() <= 0 {
			return "a request or limit must be above zero"
		}
		vars["amount"] = apiservercel.Quantity{Quantity: &q}
	}
	if o.rule == nil {
		return ""
	}
	out, _, err := o.rule.Eval(vars)
	if err != nil {
		return fmt.Sprintf("the rule %q could not be evaluated: %v", o.Rule, err)
	}
	if allowed, ok := out.Value().(bool); ok && allowed {
		return ""
	}
	if o.Message != "" {
		return o.Message
	}
	return fmt.Sprintf("the rule %q does not allow it", o.Rule)
}

// checkOverrideValues refuses the pod when one of its annotations that the set's overrides
// read holds a value the override does not allow. Every override is checked, whether its
// container is injected or the pod has it already: the value would be the sidecar's either way.
func (b *builder) checkOverrideValues(set *CompiledSet) error {
	for i := range set.overrides {
		o := &set.overrides[i]
		value, ok := b.pod.Annotations[o.Annotation]
		if !ok {
			continue
		}
		if why := o.check(value); why != "" {
			return &RefusedError{Reason: ReasonOverride, SidecarSet: set.Name(), Field: fmt.Sprintf("spec.overrides[%d]", o.index), Detail: fmt.Sprintf(
				"the pod's annotation %s is %s, which the SidecarSet does not allow for %s of container %q: %s; change or remove the annotation",
				o.Annotation, strconv.Quote(value), o.Field, o.Container, why)}
		}
	}
	return nil
}

// Overridden returns c, a container the set declares, with the values of the set's overrides
// of it that values (annotation -> value) holds: c itself when none applies, a copy otherwise.
// Injection checks the values first; a recorded value (a pod's record is the pod's to write)
// that is not a quantity leaves its request or limit as declared, and injecting the pod with it
// is refused.
func Overridden(set *CompiledSet, c *corev1.Container, values map[string]string) *corev1.Container {
	return overridden(set, c, values, false)
}

// OverriddenResources is Overridden for the requests and limits only: c's were computed (by a
// resourcesPolicy), and an override wins over them.
func OverriddenResources(set *CompiledSet, c *corev1.Container, values map[string]string) *corev1.Container {
	return overridden(set, c, values, true)
}

func overridden(set *CompiledSet, c *corev1.Container, values map[string]string, resourcesOnly bool) *corev1.Container {
	out := c
	for i := range set.overrides {
		o := &set.overrides[i]
		value, ok := values[o.Annotation]
		if _, _, resource := ResourceOverride(o.Field); !ok || o.Container != c.Name || resourcesOnly && !resource {
			continue
		}
		if out == c {
			out = c.DeepCopy()
		}
		setOverride(out, o, value)
	}
	return out
}

// setOverride sets the field of the override to value in c (a copy of its own).
func setOverride(c *corev1.Container, o *compiledOverride, value string) {
	if kind, name, ok := ResourceOverride(o.Field); ok {
		q, err := resource.ParseQuantity(value)
		if err != nil {
			return
		}
		list := &c.Resources.Requests
		if kind == "limits" {
			list = &c.Resources.Limits
		}
		if *list == nil {
			*list = corev1.ResourceList{}
		}
		(*list)[name] = q
		return
	}
	// env: the sidecar's own (last) definition takes the value; without one, it is added.
	if i := lastEnvIndex(c.Env, len(c.Env), o.EnvName); i >= 0 {
		c.Env[i] = corev1.EnvVar{Name: o.EnvName, Value: value}
		return
	}
	c.Env = append(c.Env, corev1.EnvVar{Name: o.EnvName, Value: value})
}

// finishOverrides records the overrides applied to the set's injected sidecars and refuses a
// sidecar whose overridden requests exceed its limits (the API server would refuse the pod
// with a message that names neither the annotation nor the set).
func (b *builder) finishOverrides(set *CompiledSet, rec *Record) error {
	injected := append(slices.Clone(rec.InitContainers), rec.Containers...)
	for i := range set.overrides {
		o := &set.overrides[i]
		value, ok := b.pod.Annotations[o.Annotation]
		if !ok || !slices.Contains(injected, o.Container) {
			continue
		}
		if rec.Overrides == nil {
			rec.Overrides = map[string]string{}
		}
		rec.Overrides[o.Annotation] = value
	}
	for _, name := range injected {
		if err := b.checkOverriddenLimits(set, name, rec.Overrides); err != nil {
			return err
		}
	}
	return nil
}

// checkOverriddenLimits refuses the injected sidecar name when, with the pod's overrides, one
// of its requests is above its limit.
func (b *builder) checkOverriddenLimits(set *CompiledSet, name string, applied map[string]string) error {
	c := b.placed(name)
	if c == nil || len(applied) == 0 {
		return nil
	}
	for _, res := range slices.Sorted(maps.Keys(c.Resources.Requests)) {
		req, limit := c.Resources.Requests[res], c.Resources.Limits[res]
		if _, limited := c.Resources.Limits[res]; !limited || req.Cmp(limit) <= 0 {
			continue
		}
		var by []string
		field := ""
		for i := range set.overrides {
			o := &set.overrides[i]
			if _, n, ok := ResourceOverride(o.Field); ok && n == res && o.Container == name {
				if v, ok := applied[o.Annotation]; ok {
					if field == "" {
						field = fmt.Sprintf("spec.overrides[%d]", o.index)
					}
					by = append(by, fmt.Sprintf("%s=%s", o.Annotation, strconv.Quote(v)))
				}
			}
		}
		if len(by) == 0 {
			continue // not the overrides' doing: the API server's message says it
		}
		return &RefusedError{Reason: ReasonOverride, SidecarSet: set.Name(), Field: field, Detail: fmt.Sprintf(
			"with the pod's annotation %s, container %q would request %s of %s, above its limit of %s; a request must not exceed the limit, so change the annotation (or set the limit too, where the SidecarSet allows it)",
			strings.Join(by, ", "), name, req.String(), res, limit.String())}
	}
	return nil
}

// placed is the sidecar of that name placed in this injection.
func (b *builder) placed(name string) *corev1.Container {
	for _, list := range [][]corev1.Container{b.initContainers.before, b.initContainers.after, b.containers.before, b.containers.after} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// recordedOverrides is the record's overrides that the set declares and whose values its
// rules allow, with why each other recorded value is not used. The record is the pod's to
// write: a value is used only as the pod's author could have set it by annotation, so every
// recorded value goes through the same check as the annotation at admission.
func recordedOverrides(rec map[string]string, set *CompiledSet) (map[string]string, []string) {
	var out map[string]string
	var refused []string
	for i := range set.overrides {
		o := &set.overrides[i]
		v, ok := rec[o.Annotation]
		if !ok {
			continue
		}
		if why := o.check(v); why != "" {
			refused = append(refused, fmt.Sprintf("annotation %s records %s=%s for %s of container %q, which spec.overrides[%d] of SidecarSet %q does not allow: %s; "+
				"the value is not used: restore the record as the operator wrote it, or recreate the pod",
				appsv1alpha1.StatusAnnotation, o.Annotation, strconv.Quote(v), o.Field, o.Container, o.index, set.Name(), why))
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[o.Annotation] = v
	}
	return out, refused
}

// asRecorded returns pod (a copy, when anything changes) whose annotations that the sets'
// overrides read hold the values its record of the set says were applied, and no others: a
// running pod keeps the values it was injected with, whatever its annotations say now (a
// change takes effect when the pod is recreated).
func asRecorded(pod *corev1.Pod, rec Record, sets ...*CompiledSet) *corev1.Pod {
	out := pod
	for _, set := range sets {
		if set == nil {
			continue
		}
		for i := range set.overrides {
			a := set.overrides[i].Annotation
			now, has := pod.Annotations[a]
			was, recorded := rec.Overrides[a]
			if has == recorded && now == was {
				continue
			}
			if out == pod {
				out = pod.DeepCopy()
			}
			if recorded {
				out.Annotations[a] = was
			} else {
				delete(out.Annotations, a)
			}
		}
	}
	return out
}
