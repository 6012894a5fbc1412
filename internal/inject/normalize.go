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

// sameContainer reports whether two containers are equal once both are defaulted, in a Pod
// using the host network or not.
func sameContainer(a, b *corev1.Container, hostNetwork bool) bool {
	return equality.Semantic.DeepEqual(defaultedContainer(a, hostNetwork), defaultedContainer(b, hostNetwork))
}

// sameVolume reports whether two volumes are equal once both are defaulted.
func sameVolume(a, b *corev1.Volume) bool {
	return equality.Semantic.DeepEqual(defaultedVolume(a), defaultedVolume(b))
}

func defaultedContainer(in *corev1.Container, hostNetwork bool) *corev1.Container {
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
		if hostNetwork && c.Ports[i].HostPort == 0 {
			c.Ports[i].HostPort = c.Ports[i].ContainerPort
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
	if l := c.Lifecycle; l != nil {
		for _, h := range []*corev1.LifecycleHandler{l.PostStart, l.PreStop} {
			if h != nil {
				defaultHTTPGet(h.HTTPGet)
			}
		}
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

// defaultPullPolicy is the API server's rule: Always when the tag is latest, or when there is
// neither a tag nor a digest (which means latest); otherwise IfNotPresent.
func defaultPullPolicy(image string) corev1.PullPolicy {
	name, digest, _ := strings.Cut(image, "@")
	name = name[strings.LastIndex(name, "/")+1:]
	tag := ""
	if i := strings.LastIndex(name, ":"); i >= 0 {
		tag = name[i+1:]
	}
	if tag == "latest" || (tag == "" && digest == "") {
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
	defaultHTTPGet(p.HTTPGet)
	if p.GRPC != nil && p.GRPC.Service == nil {
		p.GRPC.Service = ptr.To("")
	}
}

func defaultHTTPGet(g *corev1.HTTPGetAction) {
	if g == nil {
		return
	}
	if g.Path == "" {
		g.Path = "/"
	}
	if g.Scheme == "" {
		g.Scheme = corev1.URISchemeHTTP
	}
}

func defaultVolume(v *corev1.Volume) {
	const mode = corev1.ConfigMapVolumeSourceDefaultMode
	if equality.Semantic.DeepEqual(v.VolumeSource, corev1.VolumeSource{}) {
		v.EmptyDir = &corev1.EmptyDirVolumeSource{} // a volume with no source is an emptyDir
	}
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
	if v.Projected != nil {
		for i := range v.Projected.Sources {
			if t := v.Projected.Sources[i].ServiceAccountToken; t != nil && t.ExpirationSeconds == nil {
				t.ExpirationSeconds = ptr.To[int64](3600)
			}
		}
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
