package validation

import (
	"fmt"
	"slices"
	"strings"

	apimachineryvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

var overrideFields = []string{
	string(appsv1alpha1.OverrideRequestsCPU), string(appsv1alpha1.OverrideRequestsMemory), string(appsv1alpha1.OverrideRequestsEphemeralStorage),
	string(appsv1alpha1.OverrideLimitsCPU), string(appsv1alpha1.OverrideLimitsMemory), string(appsv1alpha1.OverrideLimitsEphemeralStorage),
	string(appsv1alpha1.OverrideEnv),
}

// validateOverrides checks spec.overrides: each reads a valid annotation of the pod's own (not
// the operator's, not one the set patches itself), names a container of the set and a field
// pods may set (envName with env only), sets each field of a container once, and has a rule
// that compiles to a condition within the cost limit. The values themselves are checked when
// a pod is injected.
func validateOverrides(spec *appsv1alpha1.SidecarSetSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	annotations := map[string]string{} // annotation -> where it is read
	targets := map[string]string{}     // container/field(/envName) -> where it is set
	for i := range spec.Overrides {
		o := &spec.Overrides[i]
		p := path.Index(i)
		errs = append(errs, validateOverrideAnnotation(spec, o.Annotation, p.Child("annotation"), annotations)...)
		errs = append(errs, validateOverrideTarget(spec, o, p)...)
		target := o.Container + "/" + string(o.Field) + "/" + o.EnvName
		if where, ok := targets[target]; ok && o.Container != "" && o.Field != "" {
			errs = append(errs, duplicate(p.Child("field"), o.Field, fmt.Sprintf(
				"%s of container %q is overridden by %s too; one annotation per field, or pods could not tell which wins", describeField(o), o.Container, where)))
		}
		targets[target] = p.String()
		errs = append(errs, validateOverrideRule(o, p)...)
	}
	return errs
}

func describeField(o *appsv1alpha1.Override) string {
	if o.Field == appsv1alpha1.OverrideEnv {
		return fmt.Sprintf("env %q", o.EnvName)
	}
	return string(o.Field)
}

// validateOverrideAnnotation checks the annotation an override reads.
func validateOverrideAnnotation(spec *appsv1alpha1.SidecarSetSpec, key string, p *field.Path, seen map[string]string) field.ErrorList {
	if key == "" {
		return field.ErrorList{field.Required(p, "name the pod annotation that holds the value, such as proxy.example.com/cpu")}
	}
	errs := invalidIf(p, key, apimachineryvalidation.IsQualifiedName(key), "use a valid annotation key, such as proxy.example.com/cpu")
	if strings.HasPrefix(key, inject.ReservedKeyPrefix) {
		errs = append(errs, field.Forbidden(p, fmt.Sprintf("keys under %s are the operator's own; use a key of your own domain", inject.ReservedKeyPrefix)))
	}
	if where, ok := seen[key]; ok {
		errs = append(errs, duplicate(p, key, fmt.Sprintf("annotation %q is read by %s too; give each override its own annotation", key, where)))
	}
	seen[key] = p.String()
	for i := range spec.PatchPodMetadata {
		if _, ok := spec.PatchPodMetadata[i].Annotations[key]; ok {
			errs = append(errs, field.Invalid(p, key, fmt.Sprintf(
				"the SidecarSet patches annotation %q itself (spec.patchPodMetadata[%d]); an override reads the pod's own annotation, so use another key", key, i)))
		}
	}
	return errs
}

// validateOverrideTarget checks the container and the field an override sets.
func validateOverrideTarget(spec *appsv1alpha1.SidecarSetSpec, o *appsv1alpha1.Override, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	named := func(sc appsv1alpha1.SidecarContainer) bool { return sc.Name == o.Container }
	switch {
	case o.Container == "":
		errs = append(errs, field.Required(p.Child("container"), "name the container or init container of the SidecarSet that the value goes into"))
	case !slices.ContainsFunc(spec.Containers, named) && !slices.ContainsFunc(spec.InitContainers, named):
		errs = append(errs, notFound(p.Child("container"), o.Container, fmt.Sprintf(
			"the SidecarSet declares no container or init container %q; name one of %s", o.Container, strings.Join(declaredNames(spec), ", "))))
	}
	switch {
	case o.Field == "":
		errs = append(errs, field.Required(p.Child("field"), "set the field the value goes into: one of "+strings.Join(overrideFields, ", ")))
	case !slices.Contains(overrideFields, string(o.Field)):
		err := field.NotSupported(p.Child("field"), o.Field, overrideFields)
		if o.Field == "image" {
			err.Detail += "; the image is the SidecarSet's to roll out, so pods cannot override it"
		}
		errs = append(errs, err)
	case o.Field == appsv1alpha1.OverrideEnv && o.EnvName == "":
		errs = append(errs, field.Required(p.Child("envName"), "name the environment variable whose value the annotation sets"))
	case o.Field == appsv1alpha1.OverrideEnv:
		errs = append(errs, invalidIf(p.Child("envName"), o.EnvName, apimachineryvalidation.IsEnvVarName(o.EnvName), "use a valid variable name, such as LOG_LEVEL")...)
	case o.EnvName != "":
		errs = append(errs, field.Forbidden(p.Child("envName"), "envName goes with field env only; remove it"))
	}
	return errs
}

func declaredNames(spec *appsv1alpha1.SidecarSetSpec) []string {
	var out []string
	for _, list := range [][]appsv1alpha1.SidecarContainer{spec.InitContainers, spec.Containers} {
		for i := range list {
			out = append(out, fmt.Sprintf("%q", list[i].Name))
		}
	}
	return out
}

// validateOverrideRule compiles and type-checks an override's rule as injection runs it.
func validateOverrideRule(o *appsv1alpha1.Override, p *field.Path) field.ErrorList {
	if o.Rule == "" {
		if o.Message != "" {
			return field.ErrorList{field.Forbidden(p.Child("message"), "message is shown when rule refuses a value; set rule too, or remove message")}
		}
		return nil
	}
	if !slices.Contains(overrideFields, string(o.Field)) {
		return nil // the field's error says it; the rule's variables depend on the field
	}
	if _, err := inject.CompileOverrideRule(o.Rule, o.Field); err != nil {
		return field.ErrorList{field.Invalid(p.Child("rule"), o.Rule, fmt.Sprintf(
			"%v; write a CEL condition over value (the annotation's value, a string)%s", err, amountHint(o.Field)))}
	}
	return nil
}

func amountHint(f appsv1alpha1.OverrideField) string {
	if _, _, ok := inject.ResourceOverride(f); ok {
		return " and amount (it as a quantity), such as amount.compareTo(quantity('2')) <= 0"
	}
	return ", such as value in ['debug', 'info']"
}
