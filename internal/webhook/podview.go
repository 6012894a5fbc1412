package webhook

import (
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// podMeta is the metadata injection reads.
type podMeta struct {
	Name         string            `json:"name,omitempty"`
	GenerateName string            `json:"generateName,omitempty"`
	Namespace    string            `json:"namespace,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
}

// podView is the part of a Pod that injection reads, with containers of type C and volumes of
// type V. Decoding only this much is most of what makes the injector cheap: the Pod's status,
// most of its metadata and every other spec field are skipped, and the JSON patch never needs
// them.
type podView[C, V any] struct {
	Metadata podMeta `json:"metadata"`
	Spec     struct {
		Containers       []C                           `json:"containers,omitempty"`
		InitContainers   []C                           `json:"initContainers,omitempty"`
		Volumes          []V                           `json:"volumes,omitempty"`
		ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
		// HostNetwork changes how the API server defaults container ports.
		HostNetwork bool `json:"hostNetwork,omitempty"`
		// Resources are the pod-level resources, kept as admitted: decoded only when a
		// candidate set's sidecars declare resources, or the namespace has LimitRanges (see
		// inject.Reads.PodResources).
		Resources json.RawMessage `json:"resources,omitempty"`
	} `json:"spec"`
}

// containerHead is what injection reads of a container it only injects next to: its name
// (clashes), and for sets that copy from app containers its env (transferEnv), volume mounts
// (shareVolumePolicy) and volume devices (shareVolumeDevicePolicy), kept as admitted and
// decoded only for such sets (see decodeAppLists), and for sets that compute a sidecar's
// resources from the app containers' (resourcesPolicy), or in a namespace whose LimitRange
// bounds a pod's totals, its requests and limits and restart policy (see decodeAppResources).
// Ports are read only when a sidecar declares ports (inject.Reads.Ports), from the full view.
type containerHead struct {
	Name          string                         `json:"name"`
	Env           json.RawMessage                `json:"env,omitempty"`
	VolumeMounts  json.RawMessage                `json:"volumeMounts,omitempty"`
	VolumeDevices json.RawMessage                `json:"volumeDevices,omitempty"`
	Resources     json.RawMessage                `json:"resources,omitempty"`
	RestartPolicy *corev1.ContainerRestartPolicy `json:"restartPolicy,omitempty"`
}

// decodeAppLists decodes into pod's containers what the engine reads to copy from (reads): the volume
// mounts for shareVolumePolicy; the volume devices for shareVolumeDevicePolicy; the env for
// transferEnv, or for a shared mount's subPathExpr.
// The decoding is strict: a list with an entry whose fields this build's API types do not all
// know (a newer API server's) is remembered, and the returned inject.Admitted gives the JSON
// of its entries, so a sidecar's copy keeps those fields too (inject.Result.PatchFrom).
// decodeMountList is decodeMounts (decodeStrict for what BenchmarkServeHTTP compares with).
func decodeAppLists(v *headView, pod *corev1.Pod, reads inject.Reads,
	decodeMountList func(json.RawMessage, *[]corev1.VolumeMount) (bool, error)) (inject.Admitted, error) {
	env, mounts, devices := reads.AppEnv, reads.AppVolumeMounts, reads.AppVolumeDevices
	if !reads.CopiesFromApps() {
		return nil, nil
	}
	type list struct {
		container int
		name      string
	}
	var more map[list]json.RawMessage // the lists with unknown fields, as admitted
	keep := func(i int, name string, raw json.RawMessage, unknown bool, err error) error {
		if err != nil {
			return fmt.Errorf("spec.containers[%d].%s: %w", i, name, err)
		}
		if unknown {
			if more == nil {
				more = map[list]json.RawMessage{}
			}
			more[list{i, name}] = raw
		}
		return nil
	}
	for i := range v.Spec.Containers {
		h, c := &v.Spec.Containers[i], &pod.Spec.Containers[i]
		if mounts && h.VolumeMounts != nil {
			unknown, err := decodeMountList(h.VolumeMounts, &c.VolumeMounts)
			if err := keep(i, "volumeMounts", h.VolumeMounts, unknown, err); err != nil {
				return nil, err
			}
		}
		if devices && h.VolumeDevices != nil {
			unknown, err := decodeStrict(h.VolumeDevices, &c.VolumeDevices)
			if err := keep(i, "volumeDevices", h.VolumeDevices, unknown, err); err != nil {
				return nil, err
			}
		}
		if h.Env != nil && (env || slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.SubPathExpr != "" })) {
			unknown, err := decodeStrict(h.Env, &c.Env)
			if err := keep(i, "env", h.Env, unknown, err); err != nil {
				return nil, err
			}
		}
	}
	return func(name string, s inject.Source) (json.RawMessage, error) {
		raw := more[list{s.Container, name}]
		if raw == nil {
			return nil, nil
		}
		var items []json.RawMessage
		if err := unmarshal(raw, &items); err != nil {
			return nil, err
		}
		if s.Index >= len(items) {
			return nil, fmt.Errorf("the pod has no spec.containers[%d].%s[%d]", s.Container, name, s.Index)
		}
		return items[s.Index], nil
	}, nil
}

// volumeHead is what injection reads of a volume it only adds volumes next to.
type volumeHead struct {
	Name string `json:"name"`
}

// headView is the first, cheap decoding of every admitted Pod.
type headView = podView[containerHead, volumeHead]

// fullView decodes the containers and volumes completely; it is needed only when the engine may
// compare one of them with a sidecar's definition (see needsFull).
type fullView = podView[corev1.Container, corev1.Volume]

// needsFull reports whether the Pod has a container or volume whose definition the engine may
// compare: one named like something a candidate set injects (a clash, or identical and kept),
// or one the status annotation lists (stripped, re-injected, and compared to detect a no-op).
func needsFull(v *headView, full sets.Set[string]) bool {
	for _, list := range [][]containerHead{v.Spec.Containers, v.Spec.InitContainers} {
		for i := range list {
			if full.Has(list[i].Name) {
				return true
			}
		}
	}
	for i := range v.Spec.Volumes {
		if full.Has(v.Spec.Volumes[i].Name) {
			return true
		}
	}
	return false
}

// headPod returns the Pod the engine sees: containers reduced to their heads, volumes to their
// names. The engine reads nothing else of them and the JSON patch never rewrites them.
func headPod(v *headView) *corev1.Pod {
	pod := v.Metadata.pod()
	pod.Spec.Containers = heads(v.Spec.Containers)
	pod.Spec.InitContainers = heads(v.Spec.InitContainers)
	if v.Spec.Volumes != nil {
		pod.Spec.Volumes = make([]corev1.Volume, len(v.Spec.Volumes))
		for i := range v.Spec.Volumes {
			pod.Spec.Volumes[i].Name = v.Spec.Volumes[i].Name
		}
	}
	pod.Spec.ImagePullSecrets = v.Spec.ImagePullSecrets
	pod.Spec.HostNetwork = v.Spec.HostNetwork
	return pod
}

func heads(in []containerHead) []corev1.Container {
	if in == nil {
		return nil
	}
	out := make([]corev1.Container, len(in))
	for i := range in {
		out[i] = corev1.Container{Name: in[i].Name}
	}
	return out
}

// fullPod returns the Pod the engine sees, in full.
func fullPod(v *fullView) (*corev1.Pod, error) {
	pod := v.Metadata.pod()
	pod.Spec = corev1.PodSpec{Containers: v.Spec.Containers, InitContainers: v.Spec.InitContainers,
		Volumes: v.Spec.Volumes, ImagePullSecrets: v.Spec.ImagePullSecrets, HostNetwork: v.Spec.HostNetwork}
	if hasPodResources(v.Spec.Resources) {
		if err := unmarshal(v.Spec.Resources, &pod.Spec.Resources); err != nil {
			return nil, fmt.Errorf("spec.resources: %w", err)
		}
	}
	return pod, nil
}

func hasPodResources(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

func (m *podMeta) pod() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: m.Name, GenerateName: m.GenerateName, Namespace: m.Namespace,
		Labels: m.Labels, Annotations: m.Annotations}}
}

// decodeAppResources decodes into pod's containers and init containers their requests, limits
// and restart policy, which a resourcesPolicy computes a sidecar's resources from, and a
// LimitRange's per-pod bound adds up with the sidecars' (inject.LimitRangesReadPod). Decoding
// them, rather than the whole pod, keeps such admissions at half the cost
// (BenchmarkPodInjector, computed).
func decodeAppResources(v *headView, pod *corev1.Pod) error {
	for _, l := range []struct {
		field string
		heads []containerHead
		pod   []corev1.Container
	}{{"spec.containers", v.Spec.Containers, pod.Spec.Containers}, {"spec.initContainers", v.Spec.InitContainers, pod.Spec.InitContainers}} {
		for i := range l.heads {
			l.pod[i].RestartPolicy = l.heads[i].RestartPolicy
			if hasPodResources(l.heads[i].Resources) {
				if err := unmarshal(l.heads[i].Resources, &l.pod[i].Resources); err != nil {
					return fmt.Errorf("%s[%d].resources: %w", l.field, i, err)
				}
			}
		}
	}
	return nil
}
