package inject

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// Reads is what Apply reads of a pod beyond its metadata, its containers' and volumes' names,
// its image pull secrets and hostNetwork, for one admission: the engine declares it, and the
// webhook decodes that much of the pod and no more (a set that copies nothing, declares no
// ports and no resources, in a namespace without LimitRanges, costs nothing for what others
// read). Each field names what Apply reads when it is set; what is not set, Apply never reads.
type Reads struct {
	// AppEnv, AppVolumeMounts, AppVolumeDevices: the app containers' lists a sidecar copies
	// from (transferEnv; shareVolumePolicy; shareVolumeDevicePolicy). A volume mount with a
	// subPathExpr reads the env too, whatever the sets (the copy keeps what it expands).
	AppEnv, AppVolumeMounts, AppVolumeDevices bool
	// ContainerResources: every container's and init container's requests, limits and restart
	// policy (a resourcesPolicy computes from them; a LimitRange's per-pod bound adds them up).
	ContainerResources bool
	// PodResources: the pod-level resources, when the pod sets them, and then every container in
	// full (a sidecar's resources or a LimitRange's defaults are judged with them).
	PodResources bool
	// Ports: every container in full, for its ports (a sidecar declares ports).
	Ports bool
	// Compared are the names of containers and volumes Apply may compare with a sidecar's
	// definition, in full: what the sets inject (a clash, or the pod's identical copy kept) and
	// what the pod's record says was injected before (stripped, injected again, compared to
	// find a no-op).
	Compared sets.Set[string]
}

// ReadsOf is what Apply reads of a pod with these annotations, for these candidate sets, in a
// namespace with these LimitRanges.
func ReadsOf(candidates []*CompiledSet, limitRanges []corev1.LimitRange, annotations map[string]string) Reads {
	r := Reads{Compared: sets.New[string]()}
	for _, c := range candidates {
		r.AppEnv = r.AppEnv || c.TransfersEnv
		r.AppVolumeMounts = r.AppVolumeMounts || c.SharesVolumes
		r.AppVolumeDevices = r.AppVolumeDevices || c.SharesDevices
		r.Ports = r.Ports || c.ComparesPorts
		r.ContainerResources = r.ContainerResources || c.HasResourcesPolicy()
		r.PodResources = r.PodResources || c.DeclaresResources
		for _, list := range [][]appsv1alpha1.SidecarContainer{c.Set.Spec.Containers, c.Set.Spec.InitContainers} {
			for i := range list {
				r.Compared.Insert(list[i].Name)
			}
		}
		for i := range c.Set.Spec.Volumes {
			r.Compared.Insert(c.Set.Spec.Volumes[i].Name)
		}
	}
	if len(limitRanges) > 0 {
		// The sidecars get the LimitRanges' defaults, judged with the pod's own resources.
		r.PodResources = true
	}
	r.ContainerResources = r.ContainerResources || LimitRangesReadPod(limitRanges)
	// A malformed record is reported by Apply; here it names nothing.
	recs, _ := ParseRecords(annotations)
	for _, rec := range recs {
		r.Compared.Insert(rec.Containers...)
		r.Compared.Insert(rec.InitContainers...)
		r.Compared.Insert(rec.Volumes...)
	}
	return r
}

// CopiesFromApps reports whether Apply reads any of the app containers' lists.
func (r Reads) CopiesFromApps() bool { return r.AppEnv || r.AppVolumeMounts || r.AppVolumeDevices }
