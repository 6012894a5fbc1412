package validation

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kubernetes/pkg/fieldpath"

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
		errs = append(errs, validateTransferSource(t, p)...)
		errs = append(errs, validateTransferNames(t, declared, transferred, p)...)
	}
	return errs
}

// validateTransferSource checks that the entry names its app container one way:
// sourceContainerName, or sourceContainerNameFrom.
func validateTransferSource(t *appsv1alpha1.TransferEnvVar, path *field.Path) field.ErrorList {
	switch {
	case t.SourceContainerNameFrom == nil:
		return validateSourceContainer(t.SourceContainerName, path.Child("sourceContainerName"))
	case t.SourceContainerName != "":
		return field.ErrorList{field.Forbidden(path.Child("sourceContainerNameFrom"),
			"may not be set together with sourceContainerName; keep sourceContainerName to name the app container, or sourceContainerNameFrom to read its name from the Pod")}
	}
	return validateSourceField(t.SourceContainerNameFrom.FieldRef, path.Child("sourceContainerNameFrom", "fieldRef"))
}

func validateSourceContainer(name string, path *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "set the name of the app container to copy the variable from, or sourceContainerNameFrom to read it from the Pod")}
	}
	// A name no container can have would never match: refuse it rather than inject nothing.
	return invalidIf(path, name, validation.IsDNS1123Label(name), "name an app container of the Pod")
}

// sourceFieldHint lists the fields of a Pod that may name the app container.
const sourceFieldHint = "use metadata.name, metadata.labels['<key>'] or metadata.annotations['<key>']"

// validateSourceField checks sourceContainerNameFrom.fieldRef: a field of the Pod that holds a
// name (its own, a label's or an annotation's value), written as in a Pod's downward API.
func validateSourceField(ref *corev1.ObjectFieldSelector, path *field.Path) field.ErrorList {
	if ref == nil {
		return field.ErrorList{field.Required(path, "set fieldRef.fieldPath to the field of the Pod that names the app container; "+sourceFieldHint)}
	}
	var errs field.ErrorList
	if ref.APIVersion != "" && ref.APIVersion != "v1" {
		errs = append(errs, field.NotSupported(path.Child("apiVersion"), ref.APIVersion, []string{"v1"}))
	}
	p := path.Child("fieldPath")
	if ref.FieldPath == "" {
		return append(errs, field.Required(p, sourceFieldHint))
	}
	if ref.FieldPath == "metadata.name" {
		return errs
	}
	kind, key, ok := fieldpath.SplitMaybeSubscriptedPath(ref.FieldPath)
	switch {
	case ok && kind == "metadata.labels":
		errs = append(errs, invalidIf(p, ref.FieldPath, validation.IsQualifiedName(key), "the key in brackets must be a valid label key, such as app.kubernetes.io/name")...)
	case ok && kind == "metadata.annotations":
		// Annotation keys are label keys in any case, as the downward API checks them.
		errs = append(errs, invalidIf(p, ref.FieldPath, validation.IsQualifiedName(strings.ToLower(key)), "the key in brackets must be a valid annotation key, such as example.com/main-container")...)
	default:
		errs = append(errs, field.Invalid(p, ref.FieldPath, "not a field that names a container; "+sourceFieldHint))
	}
	return errs
}

// validateTransferNames checks that the entry names its variables one way (envName, or
// envNames), and each of them.
func validateTransferNames(t *appsv1alpha1.TransferEnvVar, declared map[string]int, transferred sets.Set[string], path *field.Path) field.ErrorList {
	if t.EnvName != "" && len(t.EnvNames) > 0 {
		return field.ErrorList{field.Forbidden(path.Child("envNames"),
			"may not be set together with envName; list every variable to copy in envNames, or keep only envName")}
	}
	if len(t.EnvNames) == 0 {
		errs := validateTransferName(t.EnvName, declared, transferred, path.Child("envName"))
		transferred.Insert(t.EnvName)
		return errs
	}
	var errs field.ErrorList
	for j, name := range t.EnvNames {
		errs = append(errs, validateTransferName(name, declared, transferred, path.Child("envNames").Index(j))...)
		transferred.Insert(name)
	}
	return errs
}

func validateTransferName(name string, declared map[string]int, transferred sets.Set[string], path *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "set the name of the environment variable to copy (envName), or several in envNames")}
	}
	errs := invalidIf(path, name, validation.IsRelaxedEnvVarName(name), envNameHint)
	if k, ok := declared[name]; ok {
		errs = append(errs, duplicate(path, name, fmt.Sprintf(
			"the container already sets %s in env[%d] and the copied value would silently replace it; remove one of the two", name, k)))
	}
	if transferred.Has(name) {
		errs = append(errs, duplicate(path, name, fmt.Sprintf(
			"an earlier transferEnv entry or envNames item already copies %s and this one would silently replace it; remove one of the two", name)))
	}
	return errs
}
