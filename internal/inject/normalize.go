package inject

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
)

// The API server defaults a Pod's fields before admission, but a SidecarSet's embedded
// containers and volumes are stored as written. Comparing the two as they are would call a
// container that the API server merely defaulted "different"; these helpers compare them as
// the API server would store them. They copy and never change their arguments.

// sameContainer reports whether two containers are equal once both are defaulted.
func sameContainer(a, b *corev1.Container) bool {
	return equality.Semantic.DeepEqual(defaultedContainer(a), defaultedContainer(b))
}

// sameVolume reports whether two volumes are equal once both are defaulted.
func sameVolume(a, b *corev1.Volume) bool {
	return equality.Semantic.DeepEqual(defaultedVolume(a), defaultedVolume(b))
}

func defaultedContainer(in *corev1.Container) *corev1.Container {
	c := in.DeepCopy()
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = defaultPullPolicy(c.Image)
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	for i := range c.Env {
		if f := c.Env[i].ValueFrom; f != nil && f.FieldRef != nil && f.FieldRef.APIVersion == "" {
			f.FieldRef.APIVersion = "v1"
		}
	}
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		defaultProbe(p)
	}
	// A limit without a request becomes the request too.
	for name, limit := range c.Resources.Limits {
		if _, ok := c.Resources.Requests[name]; !ok {
			if c.Resources.Requests == nil {
				c.Resources.Requests = corev1.ResourceList{}
			}
			c.Resources.Requests[name] = limit.DeepCopy()
		}
	}
	return c
}

// defaultPullPolicy is the API server's rule: Always for the latest tag or no tag, otherwise
// IfNotPresent. Digests count as a tag.
func defaultPullPolicy(image string) corev1.PullPolicy {
	name := image[strings.LastIndex(image, "/")+1:]
	if strings.Contains(name, "@") {
		return corev1.PullIfNotPresent
	}
	if i := strings.LastIndex(name, ":"); i < 0 || name[i+1:] == "latest" {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

func defaultProbe(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	if p.HTTPGet != nil && p.HTTPGet.Scheme == "" {
		p.HTTPGet.Scheme = corev1.URISchemeHTTP
	}
}

func defaultVolume(v *corev1.Volume) {
	const mode = corev1.ConfigMapVolumeSourceDefaultMode
	switch {
	case v.ConfigMap != nil && v.ConfigMap.DefaultMode == nil:
		v.ConfigMap.DefaultMode = ptr.To[int32](mode)
	case v.Secret != nil && v.Secret.DefaultMode == nil:
		v.Secret.DefaultMode = ptr.To[int32](corev1.SecretVolumeSourceDefaultMode)
	case v.DownwardAPI != nil && v.DownwardAPI.DefaultMode == nil:
		v.DownwardAPI.DefaultMode = ptr.To[int32](corev1.DownwardAPIVolumeSourceDefaultMode)
	case v.Projected != nil && v.Projected.DefaultMode == nil:
		v.Projected.DefaultMode = ptr.To[int32](corev1.ProjectedVolumeSourceDefaultMode)
	case v.HostPath != nil && v.HostPath.Type == nil:
		v.HostPath.Type = ptr.To(corev1.HostPathUnset)
	case v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil && v.EmptyDir.SizeLimit.IsZero():
		v.EmptyDir.SizeLimit = nil
	}
	if v.DownwardAPI != nil {
		for i := range v.DownwardAPI.Items {
			if f := v.DownwardAPI.Items[i].FieldRef; f != nil && f.APIVersion == "" {
				f.APIVersion = "v1"
			}
		}
	}
}

func defaultedVolume(in *corev1.Volume) *corev1.Volume {
	v := in.DeepCopy()
	defaultVolume(v)
	return v
}
