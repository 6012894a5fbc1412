package validation

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/sidecarset/sidecarset-operator/internal/podrules"
)

// validateRestartAndProbes checks restartPolicy, probes and lifecycle hooks, which depend on
// the kind of container:
//   - a regular container must not set restartPolicy;
//   - an init container may set only restartPolicy Always, which makes it a native sidecar;
//   - an init container that runs to completion must not have probes or lifecycle hooks, since
//     it is never ready, live or started in the sense they check.
func validateRestartAndProbes(c *corev1.Container, kind containerKind, path *field.Path) field.ErrorList {
	p := path.Child("restartPolicy")
	if kind == regularContainer {
		var errs field.ErrorList
		if c.RestartPolicy != nil {
			errs = append(errs, field.Forbidden(p,
				"only init containers may set restartPolicy; remove it, or move the container to spec.initContainers with restartPolicy: Always to make it a native sidecar"))
		}
		return append(errs, validateHandlers(c, path)...)
	}
	switch {
	case podrules.NativeSidecar(c):
		return validateHandlers(c, path)
	case c.RestartPolicy == nil:
		return forbidOnPlainInit(c, path)
	}
	err := field.NotSupported(p, *c.RestartPolicy, []corev1.ContainerRestartPolicy{corev1.ContainerRestartPolicyAlways})
	err.Detail += "; Always makes a native sidecar, leave it unset for an init container that runs to completion"
	return append(field.ErrorList{err}, forbidOnPlainInit(c, path)...)
}

// forbidOnPlainInit refuses the fields the API server refuses on an init container that runs
// to completion.
func forbidOnPlainInit(c *corev1.Container, path *field.Path) field.ErrorList {
	fields := []struct {
		name string
		set  bool
	}{
		{"lifecycle", c.Lifecycle != nil},
		{"livenessProbe", c.LivenessProbe != nil},
		{"readinessProbe", c.ReadinessProbe != nil},
		{"startupProbe", c.StartupProbe != nil},
	}
	var errs field.ErrorList
	for _, f := range fields {
		if f.set {
			errs = append(errs, field.Forbidden(path.Child(f.name),
				"may not be set on an init container that runs to completion; remove it, or set restartPolicy: Always to make the container a native sidecar"))
		}
	}
	return errs
}

// validateHandlers checks that every probe and lifecycle hook says how to act, in exactly one
// way; the API server refuses a Pod with an empty or ambiguous one.
func validateHandlers(c *corev1.Container, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	probes := []struct {
		name  string
		probe *corev1.Probe
	}{
		{"livenessProbe", c.LivenessProbe},
		{"readinessProbe", c.ReadinessProbe},
		{"startupProbe", c.StartupProbe},
	}
	for _, p := range probes {
		if p.probe != nil {
			errs = append(errs, validateOneOf(p.probe.ProbeHandler, path.Child(p.name), "probe handler")...)
		}
	}
	if c.Lifecycle == nil {
		return errs
	}
	if h := c.Lifecycle.PostStart; h != nil {
		errs = append(errs, validateOneOf(*h, path.Child("lifecycle", "postStart"), "lifecycle handler")...)
	}
	if h := c.Lifecycle.PreStop; h != nil {
		errs = append(errs, validateOneOf(*h, path.Child("lifecycle", "preStop"), "lifecycle handler")...)
	}
	return errs
}
