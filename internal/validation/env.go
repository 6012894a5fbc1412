package validation

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

const envNameHint = "use printable ASCII characters other than '=', as the API server does"

// validateEnv checks a container's env: valid names, and each value given one way only.
func validateEnv(env []corev1.EnvVar, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for k := range env {
		e := &env[k]
		p := path.Index(k)
		errs = append(errs, validateEnvName(e.Name, p.Child("name"))...)
		errs = append(errs, validateEnvValue(e, p)...)
	}
	return errs
}

func validateEnvName(name string, path *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "set the environment variable name, such as LOG_LEVEL")}
	}
	return invalidIf(path, name, validation.IsRelaxedEnvVarName(name), envNameHint)
}

// validateEnvValue checks that valueFrom, when set, is the only source of the value and names
// exactly one source itself.
func validateEnvValue(e *corev1.EnvVar, path *field.Path) field.ErrorList {
	if e.ValueFrom == nil {
		return nil
	}
	var errs field.ErrorList
	p := path.Child("valueFrom")
	if e.Value != "" {
		errs = append(errs, field.Forbidden(p, "may not be set together with value; keep either value or valueFrom"))
	}
	return append(errs, validateOneOf(*e.ValueFrom, p, "value source")...)
}

// validateTransferEnv checks a container's transferEnv. A transferred variable must not share
// its name with one the container sets in env, nor with another transferred one: the later
// entry would silently replace what the user wrote.
func validateTransferEnv(c *appsv1alpha1.SidecarContainer, path *field.Path) field.ErrorList {
	declared := map[string]int{} // env name -> index of its first entry in env
	for k := range c.Env {
		if _, ok := declared[c.Env[k].Name]; !ok {
			declared[c.Env[k].Name] = k
		}
	}
	var errs field.ErrorList
	transferred := sets.New[string]()
	for k := range c.TransferEnv {
		t := &c.TransferEnv[k]
		p := path.Index(k)
		errs = append(errs, validateSourceContainer(t.SourceContainerName, p.Child("sourceContainerName"))...)
		errs = append(errs, validateTransferName(t.EnvName, declared, transferred, p.Child("envName"))...)
		transferred.Insert(t.EnvName)
	}
	return errs
}

func validateSourceContainer(name string, path *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "set the name of the app container to copy the variable from")}
	}
	// A name no container can have would never match: refuse it rather than inject nothing.
	return invalidIf(path, name, validation.IsDNS1123Label(name), "name an app container of the Pod")
}

func validateTransferName(name string, declared map[string]int, transferred sets.Set[string], path *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "set the name of the environment variable to copy")}
	}
	errs := invalidIf(path, name, validation.IsRelaxedEnvVarName(name), envNameHint)
	if k, ok := declared[name]; ok {
		errs = append(errs, duplicate(path, name, fmt.Sprintf(
			"the container already sets %s in env[%d] and the copied value would silently replace it; remove one of the two", name, k)))
	}
	if transferred.Has(name) {
		errs = append(errs, duplicate(path, name, fmt.Sprintf(
			"an earlier transferEnv entry already copies %s and this one would silently replace it; remove one of the two", name)))
	}
	return errs
}
