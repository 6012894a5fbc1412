package validation

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// validateMounts checks a container's volumeMounts and volumeDevices: each refers to a volume
// of spec.volumes, and each path inside the container holds one thing. With
// shareVolumePolicy enabled a mount may also name a volume of the Pod, which the injection
// engine checks when the Pod is created.
func validateMounts(c *appsv1alpha1.SidecarContainer, volumes sets.Set[string], path *field.Path) field.ErrorList {
	podVolumes := c.ShareVolumePolicy.Type == appsv1alpha1.ShareVolumePolicyEnabled
	paths := sets.New[string]()
	var errs field.ErrorList
	for j := range c.VolumeMounts {
		m := &c.VolumeMounts[j]
		p := path.Child("volumeMounts").Index(j)
		errs = append(errs, validateVolumeRef(m.Name, volumes, podVolumes, p.Child("name"))...)
		errs = append(errs, validateContainerPath(m.MountPath, paths, p.Child("mountPath"))...)
		paths.Insert(m.MountPath)
	}
	for j := range c.VolumeDevices {
		d := &c.VolumeDevices[j]
		p := path.Child("volumeDevices").Index(j)
		errs = append(errs, validateVolumeRef(d.Name, volumes, podVolumes, p.Child("name"))...)
		errs = append(errs, validateContainerPath(d.DevicePath, paths, p.Child("devicePath"))...)
		paths.Insert(d.DevicePath)
	}
	return errs
}

func validateVolumeRef(name string, volumes sets.Set[string], podVolumes bool, path *field.Path) field.ErrorList {
	switch {
	case name == "":
		return field.ErrorList{field.Required(path, "set the name of a volume declared in spec.volumes")}
	case !volumes.Has(name) && !podVolumes:
		return field.ErrorList{notFound(path, name, fmt.Sprintf(
			"no volume named %q in spec.volumes; declare it there, or set shareVolumePolicy.type: enabled to mount a volume of the Pod", name))}
	}
	return nil
}

// validateContainerPath checks a mountPath or devicePath; taken holds the paths of the
// container's earlier mounts and devices.
func validateContainerPath(p string, taken sets.Set[string], path *field.Path) field.ErrorList {
	switch {
	case p == "":
		return field.ErrorList{field.Required(path, "set the absolute path inside the container, such as /var/log/app")}
	case taken.Has(p):
		return field.ErrorList{duplicate(path, p, fmt.Sprintf(
			"another volume mount or device of this container already uses %q; a path can hold only one volume, choose another", p))}
	}
	return nil
}
