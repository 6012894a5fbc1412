package validation

import (
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateOneOf checks a Kubernetes union struct (VolumeSource, EnvVarSource, ProbeHandler,
// LifecycleHandler): exactly one of its pointer members must be set. It reads the members by
// reflection so that sources added by newer API versions are counted without a code change.
// what names the union in messages ("volume source", "probe handler").
func validateOneOf(union any, path *field.Path, what string) field.ErrorList {
	set := setMembers(union)
	switch len(set) {
	case 0:
		return field.ErrorList{field.Required(path, fmt.Sprintf(
			"must specify exactly one %s; set one of %s", what, strings.Join(memberNames(union), ", ")))}
	case 1:
		return nil
	}
	var errs field.ErrorList
	for _, name := range set[1:] {
		errs = append(errs, field.Forbidden(path.Child(name), fmt.Sprintf(
			"may not be specified together with %s: a %s has exactly one type; remove all but one", set[0], what)))
	}
	return errs
}

// setMembers returns the JSON names of the non-nil pointer members of a struct, in field
// order.
func setMembers(union any) []string {
	v := reflect.ValueOf(union)
	var names []string
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Kind() == reflect.Pointer && !f.IsNil() {
			names = append(names, jsonName(v.Type().Field(i)))
		}
	}
	return names
}

// memberNames returns the JSON names of all pointer members of a struct, in field order.
func memberNames(union any) []string {
	t := reflect.TypeOf(union)
	var names []string
	for i := range t.NumField() {
		if t.Field(i).Type.Kind() == reflect.Pointer {
			names = append(names, jsonName(t.Field(i)))
		}
	}
	return names
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" {
		return f.Name
	}
	return name
}
