package validation

import (
	"fmt"
	"regexp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/podrules"
)

// validateResourcesPolicy checks a sidecar's resourcesPolicy: exclusive with fixed requests
// and limits, on an init container only for a native sidecar, a regex that compiles, and CEL
// expressions that compile and type-check (with the engine's own compiler), so a bad one is
// refused with the SidecarSet instead of with every Pod.
func validateResourcesPolicy(c *appsv1alpha1.SidecarContainer, kind containerKind, path *field.Path) field.ErrorList {
	p := c.ResourcesPolicy
	if p == nil {
		return nil
	}
	path = path.Child("resourcesPolicy")
	var errs field.ErrorList
	if len(c.Resources.Requests) > 0 || len(c.Resources.Limits) > 0 {
		errs = append(errs, field.Forbidden(path, "resourcesPolicy and resources.requests/limits are mutually exclusive: keep resourcesPolicy to compute the sidecar's requests and limits from the app containers, or resources for fixed ones"))
	}
	if kind == initContainer && !podrules.NativeSidecar(&c.Container) {
		errs = append(errs, field.Forbidden(path, "resourcesPolicy is supported on an init container only when it is a native sidecar (restartPolicy: Always); remove it, or give the init container fixed resources"))
	}
	switch p.TargetContainersMode {
	case "", appsv1alpha1.TargetContainersSum, appsv1alpha1.TargetContainersMax:
	default:
		errs = append(errs, field.NotSupported(path.Child("targetContainersMode"), p.TargetContainersMode,
			[]appsv1alpha1.TargetContainersMode{appsv1alpha1.TargetContainersSum, appsv1alpha1.TargetContainersMax}))
	}
	if _, err := regexp.Compile(inject.TargetsRegex(p)); err != nil {
		errs = append(errs, field.Invalid(path.Child("targetContainersNameRegex"), p.TargetContainersNameRegex,
			fmt.Sprintf("%v; write an RE2 regular expression, such as ^app$ or .*", err)))
	}
	exprs := path.Child("resourcesExpr")
	if len(p.ResourcesExpr.Requests) == 0 && len(p.ResourcesExpr.Limits) == 0 {
		errs = append(errs, field.Required(exprs, "set an expression in requests or limits (or both), such as limits.cpu: max(cpu * 0.5, quantity('50m'))"))
	}
	errs = append(errs, validateResourceExprs(p.ResourcesExpr.Requests, exprs.Child("requests"))...)
	return append(errs, validateResourceExprs(p.ResourcesExpr.Limits, exprs.Child("limits"))...)
}

// validateResourceExprs compiles the expressions of requests or limits, in resource order.
func validateResourceExprs(exprs map[corev1.ResourceName]appsv1alpha1.ResourceExpression, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := make([]corev1.ResourceName, 0, len(exprs))
	for name := range exprs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		p := path.Key(string(name))
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
			errs = append(errs, field.NotSupported(p, name, []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}))
			continue
		}
		if _, err := inject.CompileResourceExpr(name, string(exprs[name])); err != nil {
			errs = append(errs, field.Invalid(p, string(exprs[name]), err.Error()))
		}
	}
	return errs
}
