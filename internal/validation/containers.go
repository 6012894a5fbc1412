package validation

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// containerKind tells spec.containers from spec.initContainers: the API server allows some
// fields on one kind only.
type containerKind int

const (
	regularContainer containerKind = iota
	initContainer
)

// containerList is one of the two container lists of a spec, with its path and kind.
type containerList struct {
	containers []appsv1alpha1.SidecarContainer
	path       *field.Path
	kind       containerKind
}

// containerLists returns spec.containers, then spec.initContainers. The order decides which of
// two clashing names is reported as the duplicate (the later one), as the CRD's rule does.
func containerLists(spec *appsv1alpha1.SidecarSetSpec, path *field.Path) []containerList {
	return []containerList{
		{spec.Containers, path.Child("containers"), regularContainer},
		{spec.InitContainers, path.Child("initContainers"), initContainer},
	}
}

// validateContainers checks every container and init container. Names are unique across both
// lists: a Pod's containers and init containers share one namespace of names.
func validateContainers(spec *appsv1alpha1.SidecarSetSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	volumes := volumeNames(spec.Volumes)
	names := sets.New[string]()
	for _, list := range containerLists(spec, path) {
		for i := range list.containers {
			c := &list.containers[i]
			p := list.path.Index(i)
			errs = append(errs, validateContainerName(c.Name, names, p.Child("name"))...)
			names.Insert(c.Name)
			errs = append(errs, validateContainer(c, list.kind, volumes, p)...)
		}
	}
	return errs
}

func validateContainerName(name string, seen sets.Set[string], path *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "set a container name, such as \"log-agent\"")}
	}
	errs := invalidIf(path, name, validation.IsDNS1123Label(name), "use lowercase letters, digits and '-'")
	if seen.Has(name) {
		errs = append(errs, duplicate(path, name, fmt.Sprintf(
			"another entry of spec.containers or spec.initContainers is already named %q; names must be unique across both lists, rename one", name)))
	}
	return errs
}

// validateContainer checks one container as the API server would check it inside a Pod, plus
// the SidecarSet's own fields. Its name is checked by the caller.
func validateContainer(c *appsv1alpha1.SidecarContainer, kind containerKind, volumes sets.Set[string], path *field.Path) field.ErrorList {
	errs := validateImage(c.Image, path.Child("image"))
	errs = append(errs, validatePolicies(c, path)...)
	errs = append(errs, validateRestartAndProbes(&c.Container, kind, path)...)
	errs = append(errs, validateMounts(c, volumes, path)...)
	errs = append(errs, validatePorts(c.Ports, path.Child("ports"))...)
	errs = append(errs, validateEnv(c.Env, path.Child("env"))...)
	errs = append(errs, validateTransferEnv(c, path.Child("transferEnv"))...)
	errs = append(errs, validateResourcesPolicy(c, kind, path)...)
	return append(errs, validateResources(c.Resources, path.Child("resources"))...)
}

func validateImage(image string, path *field.Path) field.ErrorList {
	switch {
	case image == "":
		return field.ErrorList{field.Required(path, "set the image to run, such as registry.example.com/log-agent:1.2.3")}
	case strings.TrimSpace(image) != image:
		// The API server refuses such a Pod; refuse the SidecarSet instead.
		return field.ErrorList{field.Invalid(path, image, "must not have leading or trailing whitespace; remove it")}
	}
	return nil
}

// validatePolicies checks the SidecarSet-specific enums. The CRD schema checks them too, but
// the webhook must hold on its own.
func validatePolicies(c *appsv1alpha1.SidecarContainer, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch c.PodInjectPolicy {
	case "", appsv1alpha1.BeforeAppContainer, appsv1alpha1.AfterAppContainer:
	default:
		errs = append(errs, field.NotSupported(path.Child("podInjectPolicy"), c.PodInjectPolicy,
			[]appsv1alpha1.PodInjectPolicy{appsv1alpha1.BeforeAppContainer, appsv1alpha1.AfterAppContainer}))
	}
	errs = append(errs, validateSharePolicy(c.ShareVolumePolicy, path.Child("shareVolumePolicy", "type"))...)
	if c.ShareVolumeDevicePolicy != nil {
		errs = append(errs, validateSharePolicy(*c.ShareVolumeDevicePolicy, path.Child("shareVolumeDevicePolicy", "type"))...)
	}
	return errs
}

func validateSharePolicy(p appsv1alpha1.ShareVolumePolicy, path *field.Path) field.ErrorList {
	switch p.Type {
	case "", appsv1alpha1.ShareVolumePolicyEnabled, appsv1alpha1.ShareVolumePolicyDisabled:
		return nil
	}
	return field.ErrorList{field.NotSupported(path, p.Type,
		[]appsv1alpha1.ShareVolumePolicyType{appsv1alpha1.ShareVolumePolicyEnabled, appsv1alpha1.ShareVolumePolicyDisabled})}
}
