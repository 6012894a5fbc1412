package podrules

import (
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	"k8s.io/kubernetes/pkg/apis/core"
	k8sv1 "k8s.io/kubernetes/pkg/apis/core/v1"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"
	"k8s.io/kubernetes/pkg/capabilities"
	"k8s.io/utils/ptr"
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
// server validates it: defaulted, changed by the admission plugins every cluster runs before
// validation (see Admitted), its pod-level resources defaulted from its containers' (as the
// API server does after admission), with the validation options the API server derives from
// the Pod itself. The paths of the errors are the Pod's (spec.containers[1].image).
func ValidateCreate(pod *corev1.Pod) field.ErrorList {
	setClusterPolicy()
	admitted := Defaulted(pod)
	Admitted(admitted)
	internal, err := toInternal(admitted)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("spec"), err)}
	}
	podutil.DefaultPodLevelResources(internal)
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

// PodResourceErrors returns the errors the API server's validation of a Pod create finds in
// the Pod's pod-level resources (spec.resources): requests below what its containers request
// in all, a container's limit above the pod's, requests above limits. None when the Pod sets
// no pod-level resources. Only what that rule reads (the containers' names, resources and
// restart policies, the pod's resources and OS) is validated, so the Pod's other fields cost
// nothing and cause no error here.
func PodResourceErrors(pod *corev1.Pod) field.ErrorList {
	if pod.Spec.Resources == nil {
		return nil
	}
	view := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "resources", Namespace: "resources"},
		Spec: corev1.PodSpec{
			Containers: resourceView("container", pod.Spec.Containers), InitContainers: resourceView("init", pod.Spec.InitContainers),
			Resources: pod.Spec.Resources.DeepCopy(), OS: pod.Spec.OS.DeepCopy(),
		},
	}
	var out field.ErrorList
	for _, e := range ValidateCreate(view) {
		if strings.HasPrefix(e.Field, "spec.resources") {
			out = append(out, e)
		}
	}
	return out
}

// resourceView keeps of each container what pod-level resources are checked against.
func resourceView(prefix string, list []corev1.Container) []corev1.Container {
	out := make([]corev1.Container, len(list))
	for i := range list {
		out[i] = corev1.Container{Name: fmt.Sprintf("%s-%d", prefix, i), Image: "resources", Resources: *list[i].Resources.DeepCopy()}
		if list[i].RestartPolicy != nil {
			out[i].RestartPolicy = ptr.To(*list[i].RestartPolicy)
		}
	}
	return out
}

// HostPortKey names a defaulted port's host port as the API server tells them apart: protocol,
// host IP, port.
func HostPortKey(p corev1.ContainerPort) string {
	return fmt.Sprintf("%s/%s/%d", p.Protocol, p.HostIP, p.HostPort)
}

// PodLevelDefaulted returns the Pod's pod-level resources as the API server stores them: after
// Kubernetes 1.37's defaulting from its containers (missing requests from theirs in all, or
// from the pod-level limits; missing limits from theirs where every container sets one). Nil
// when the Pod sets none. pod is not modified.
func PodLevelDefaulted(pod *corev1.Pod) (*corev1.ResourceRequirements, error) {
	if pod.Spec.Resources == nil {
		return nil, nil
	}
	view := &corev1.Pod{Spec: corev1.PodSpec{Containers: resourceView("container", pod.Spec.Containers),
		InitContainers: resourceView("init", pod.Spec.InitContainers), Resources: pod.Spec.Resources.DeepCopy()}}
	internal, err := toInternal(Defaulted(view))
	if err != nil {
		return nil, err
	}
	podutil.DefaultPodLevelResources(internal)
	var out corev1.ResourceRequirements
	if err := k8sv1.Convert_core_ResourceRequirements_To_v1_ResourceRequirements(internal.Spec.Resources, &out, nil); err != nil {
		return nil, fmt.Errorf("converting pod-level resources from the API server's internal form: %w", err)
	}
	return &out, nil
}
