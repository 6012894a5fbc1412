package validation

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// validateConflicts refuses what would clash in a Pod that set and another SidecarSet both
// select: a container name injected twice, or a volume name with two definitions. Sets that
// can never select the same Pod never conflict, however alike their contents.
func validateConflicts(set *appsv1alpha1.SidecarSet, others []appsv1alpha1.SidecarSet, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range others {
		other := &others[i]
		if other.Name == set.Name {
			continue // the stored version of set itself
		}
		if err := selectorsError(&other.Spec); err != nil {
			// A SidecarSet stored while the webhook was down may hold anything. Refusing is
			// safer than guessing, and tells the user which object to repair.
			errs = append(errs, field.InternalError(path.Child("selector"), fmt.Errorf(
				"cannot tell whether SidecarSet %q selects the same Pods, its %w; fix or delete SidecarSet %q", other.Name, err, other.Name)))
			continue
		}
		overlap, err := SetsOverlap(&set.Spec, &other.Spec)
		if err != nil {
			// Not expected: the caller checked set's selectors and the lines above the other's.
			errs = append(errs, field.InternalError(path.Child("selector"), fmt.Errorf(
				"deciding whether SidecarSet %q selects the same Pods: %w", other.Name, err)))
			continue
		}
		if overlap {
			errs = append(errs, containerConflicts(&set.Spec, other, path)...)
			errs = append(errs, volumeConflicts(set.Spec.Volumes, other, path.Child("volumes"))...)
		}
	}
	return errs
}

// containerConflicts reports every container or init container of spec whose name the other
// SidecarSet also injects, in either list: a Pod has one namespace of container names.
func containerConflicts(spec *appsv1alpha1.SidecarSetSpec, other *appsv1alpha1.SidecarSet, path *field.Path) field.ErrorList {
	theirs := map[string]string{} // name -> where the other SidecarSet declares it
	for _, list := range containerLists(&other.Spec, path) {
		for i := range list.containers {
			theirs[list.containers[i].Name] = list.path.Index(i).String()
		}
	}
	var errs field.ErrorList
	for _, list := range containerLists(spec, path) {
		for i := range list.containers {
			name := list.containers[i].Name
			if where, ok := theirs[name]; ok && name != "" {
				errs = append(errs, field.Invalid(list.path.Index(i).Child("name"), name, fmt.Sprintf(
					"SidecarSet %q also injects a container named %q (its %s) and both can select the same Pods; rename the container or make the selectors of the two SidecarSets disjoint",
					other.Name, name, where)))
			}
		}
	}
	return errs
}

// volumeConflicts reports every volume of ours that the other SidecarSet defines differently
// under the same name. The same definition is fine: the engine adds such a volume once.
func volumeConflicts(volumes []corev1.Volume, other *appsv1alpha1.SidecarSet, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range volumes {
		v := &volumes[i]
		theirs := findVolume(other.Spec.Volumes, v.Name)
		if theirs != nil && !equality.Semantic.DeepEqual(*v, *theirs) {
			errs = append(errs, field.Invalid(path.Index(i).Child("name"), v.Name, fmt.Sprintf(
				"SidecarSet %q defines a volume named %q differently and both can select the same Pods; use the same definition, rename the volume, or make the selectors of the two SidecarSets disjoint",
				other.Name, v.Name)))
		}
	}
	return errs
}

func findVolume(volumes []corev1.Volume, name string) *corev1.Volume {
	for i := range volumes {
		if volumes[i].Name == name {
			return &volumes[i]
		}
	}
	return nil
}
