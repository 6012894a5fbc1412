package validation

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateVolumes checks spec.volumes: each name a unique DNS-1123 label (as in a Pod) and
// exactly one volume source.
func validateVolumes(volumes []corev1.Volume, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i := range volumes {
		v := &volumes[i]
		p := path.Index(i)
		errs = append(errs, validateVolumeName(v.Name, seen, p.Child("name"))...)
		seen.Insert(v.Name)
		errs = append(errs, validateOneOf(v.VolumeSource, p, "volume source")...)
	}
	return errs
}

func validateVolumeName(name string, seen sets.Set[string], path *field.Path) field.ErrorList {
	switch {
	case name == "":
		return field.ErrorList{field.Required(path, "set a volume name that volumeMounts can refer to")}
	case seen.Has(name):
		return field.ErrorList{duplicate(path, name, fmt.Sprintf(
			"another volume is already named %q; give each volume its own name", name))}
	}
	return invalidIf(path, name, validation.IsDNS1123Label(name), "use lowercase letters, digits and '-'")
}

// volumeNames is the set of names declared in spec.volumes.
func volumeNames(volumes []corev1.Volume) sets.Set[string] {
	names := sets.New[string]()
	for i := range volumes {
		names.Insert(volumes[i].Name)
	}
	return names
}
