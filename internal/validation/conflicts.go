package validation

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/podrules"
)

// validateConflicts refuses what would clash in a Pod that set and another SidecarSet both
// select: a container name injected twice, a volume name with two definitions, or a host port
// bound twice. Sets that can never select the same Pod never conflict, however alike their
// contents.
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
		errs = append(errs, conflicts(set, other, path)...)
	}
	return errs
}

// Conflicts returns what would clash in a Pod that both SidecarSets select (container names,
// volume definitions, host ports, patched annotations), with paths into set's spec; nil when their selectors are
// disjoint. Validation refuses such a pair when the second set is written, but two writes that
// race each other are both validated against a view without the other; the reconciler uses
// Conflicts to find such pairs afterwards.
func Conflicts(set, other *appsv1alpha1.SidecarSet) field.ErrorList {
	return conflicts(set, other, field.NewPath("spec"))
}

func conflicts(set, other *appsv1alpha1.SidecarSet, path *field.Path) field.ErrorList {
	overlap, err := SetsOverlap(&set.Spec, &other.Spec)
	if err != nil {
		return field.ErrorList{field.InternalError(path.Child("selector"), fmt.Errorf(
			"deciding whether SidecarSet %q selects the same Pods: %w", other.Name, err))}
	}
	if !overlap {
		return nil
	}
	errs := containerConflicts(&set.Spec, other, path)
	errs = append(errs, volumeConflicts(set.Spec.Volumes, other, path.Child("volumes"))...)
	errs = append(errs, patchConflicts(&set.Spec, other, path.Child("patchPodMetadata"))...)
	return append(errs, hostPortConflicts(&set.Spec, other, path.Child("containers"))...)
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
// Definitions are compared as the API server stores them (Kubernetes' own defaulting), so a
// field one set leaves to its default and the other spells out is no conflict.
func volumeConflicts(volumes []corev1.Volume, other *appsv1alpha1.SidecarSet, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range volumes {
		v := &volumes[i]
		theirs := findVolume(other.Spec.Volumes, v.Name)
		if theirs != nil && !equality.Semantic.DeepEqual(podrules.DefaultedVolume(v), podrules.DefaultedVolume(theirs)) {
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

// hostPortConflicts reports every host port a container of ours binds that a container of the
// other SidecarSet binds too (same protocol, host IP and port, after defaulting): a Pod can
// bind a host port once. Only regular containers count, as in the API server's check: init
// containers never run beside them.
func hostPortConflicts(spec *appsv1alpha1.SidecarSetSpec, other *appsv1alpha1.SidecarSet, path *field.Path) field.ErrorList {
	theirs := map[string]string{} // host port key -> where the other SidecarSet binds it
	for i := range other.Spec.Containers {
		for pi, p := range podrules.DefaultedContainer(&other.Spec.Containers[i].Container, false, false).Ports {
			if p.HostPort != 0 {
				theirs[podrules.HostPortKey(p)] = fmt.Sprintf("spec.containers[%d].ports[%d]", i, pi)
			}
		}
	}
	var errs field.ErrorList
	for i := range spec.Containers {
		for pi, p := range podrules.DefaultedContainer(&spec.Containers[i].Container, false, false).Ports {
			if where, ok := theirs[podrules.HostPortKey(p)]; ok && p.HostPort != 0 {
				errs = append(errs, field.Invalid(path.Index(i).Child("ports").Index(pi).Child("hostPort"), p.HostPort, fmt.Sprintf(
					"SidecarSet %q also binds host port %s (its %s) and both can select the same Pods; a Pod binds a host port once, so change one of the ports or make the selectors of the two SidecarSets disjoint",
					other.Name, podrules.HostPortKey(p), where)))
			}
		}
	}
	return errs
}
