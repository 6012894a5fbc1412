package podrules

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	"k8s.io/kubernetes/pkg/apis/core"
	k8sv1 "k8s.io/kubernetes/pkg/apis/core/v1"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"
	"k8s.io/kubernetes/pkg/capabilities"
)

// clusterPolicy sets the one validation input that is a kube-apiserver flag rather than a rule:
// --allow-privileged. Clusters that run privileged workloads (and every kubeadm or managed
// cluster) set it; where it is off, the API server itself refuses privileged pods, and
// PodSecurity decides per namespace. So privileged containers are valid here.
var clusterPolicy sync.Once

func setClusterPolicy() {
	clusterPolicy.Do(func() { capabilities.Initialize(capabilities.Capabilities{AllowPrivileged: true}) })
}

// Default applies the API server's defaults to a Pod in place, exactly as a create request's
// Pod is defaulted before admission.
func Default(pod *corev1.Pod) { k8sv1.SetObjectDefaults_Pod(pod) }

// Defaulted returns a defaulted deep copy of the Pod.
func Defaulted(pod *corev1.Pod) *corev1.Pod {
	out := pod.DeepCopy()
	Default(out)
	return out
}

// DefaultedContainer returns a copy of a container as the API server stores it in a Pod
// (regular or init list; some defaults, host ports among them, depend on hostNetwork).
func DefaultedContainer(c *corev1.Container, init, hostNetwork bool) *corev1.Container {
	pod := &corev1.Pod{Spec: corev1.PodSpec{HostNetwork: hostNetwork}}
	if init {
		pod.Spec.InitContainers = []corev1.Container{*c.DeepCopy()}
	} else {
		pod.Spec.Containers = []corev1.Container{*c.DeepCopy()}
	}
	Default(pod)
	if init {
		return &pod.Spec.InitContainers[0]
	}
	return &pod.Spec.Containers[0]
}

// DefaultedEnvVar returns a copy of an env var as the API server stores it in a Pod (a fieldRef
// gets apiVersion v1).
func DefaultedEnvVar(v *corev1.EnvVar) corev1.EnvVar {
	return DefaultedContainer(&corev1.Container{Env: []corev1.EnvVar{*v}}, false, false).Env[0]
}

// DefaultedVolume returns a copy of a volume as the API server stores it in a Pod.
func DefaultedVolume(v *corev1.Volume) *corev1.Volume {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{*v.DeepCopy()}}}
	Default(pod)
	return &pod.Spec.Volumes[0]
}

// ValidateCreate runs the API server's validation of a Pod create on a copy of pod as the API
// server validates it: defaulted, then changed by the admission plugins every cluster runs
// before validation (see Admitted), with the validation options the API server derives from the
// Pod itself. The paths of the errors are the Pod's (spec.containers[1].image).
func ValidateCreate(pod *corev1.Pod) field.ErrorList {
	setClusterPolicy()
	admitted := Defaulted(pod)
	Admitted(admitted)
	internal, err := toInternal(admitted)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("spec"), err)}
	}
	opts := podutil.GetValidationOptionsFromPodSpecAndMeta(&internal.Spec, nil, &internal.ObjectMeta, nil)
	return corevalidation.ValidatePodCreate(internal, opts)
}

// DefaultServiceAccount is the ServiceAccount the ServiceAccount admission plugin gives a Pod
// that names none.
const DefaultServiceAccount = "default"

// Admitted applies to a Pod in place what the admission plugins that every cluster runs (they
// are on by default, and production clusters keep them) do to it before the API server
// validates it, where that changes what validation accepts: the ServiceAccount plugin gives a
// Pod that names no ServiceAccount the namespace's "default" one (so a projected
// serviceAccountToken volume, refused in a Pod without a ServiceAccount, is valid). What the
// plugins add that validation does not look at (the token's own volume and mounts) is left out.
func Admitted(pod *corev1.Pod) {
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = DefaultServiceAccount
		pod.Spec.DeprecatedServiceAccount = DefaultServiceAccount //nolint:staticcheck // kept in sync, as the plugin does
	}
}

func toInternal(pod *corev1.Pod) (*core.Pod, error) {
	var out core.Pod
	if err := k8sv1.Convert_v1_Pod_To_core_Pod(pod, &out, nil); err != nil {
		return nil, fmt.Errorf("converting the pod to the API server's internal form: %w", err)
	}
	return &out, nil
}

// HostPortKey names a defaulted port's host port as the API server tells them apart: protocol,
// host IP, port.
func HostPortKey(p corev1.ContainerPort) string {
	return fmt.Sprintf("%s/%s/%d", p.Protocol, p.HostIP, p.HostPort)
}
