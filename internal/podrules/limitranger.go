package podrules

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	"k8s.io/kubernetes/pkg/apis/core"
	k8sv1 "k8s.io/kubernetes/pkg/apis/core/v1"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"
	"k8s.io/kubernetes/plugin/pkg/admission/limitranger"
)

// The API server's LimitRanger admission plugin, run on Pods that exist only in memory. It
// changes a Pod twice: its mutating pass fills every container's unset requests and limits
// with the defaults of the namespace's LimitRanges, and its validating pass then refuses the
// Pod if a container, or the Pod's totals, breaks a bound. Both passes are the plugin's own
// exported functions, so the operator defaults and judges exactly as the release it is built
// against does; only what they read (the containers' resources and restart policies, and the
// pod-level resources) is handed to them.

// DefaultedLimitRange returns a copy of a LimitRange as the API server stores it: a
// container's default limit taken from its max, its default request from its default limit or
// its min. LimitRanges read from the API server are stored so already; one written by hand
// (a file, a test) is not, and LimitRanger never sees it that way.
func DefaultedLimitRange(lr *corev1.LimitRange) *corev1.LimitRange {
	out := lr.DeepCopy()
	k8sv1.SetObjectDefaults_LimitRange(out)
	return out
}

// LimitRangeDefaulted returns the resources view of pod (its containers' names, resources and
// restart policies, its pod-level resources and OS) with the defaults of lrs filled in, one
// LimitRange after the other, as LimitRanger's mutating pass fills them: a value a container
// sets, or an earlier LimitRange gave it, is kept. pod is not modified.
func LimitRangeDefaulted(pod *corev1.Pod, lrs []corev1.LimitRange) (*corev1.Pod, error) {
	view := limitRangerView(pod)
	internal, err := toInternal(view)
	if err != nil {
		return nil, err
	}
	for i := range lrs {
		if err := limitranger.PodMutateLimitFunc(&lrs[i], internal); err != nil {
			return nil, fmt.Errorf("applying the defaults of LimitRange %s: %w", lrs[i].Name, err)
		}
	}
	// Only the resources changed: they are all that is converted back. The conversion may
	// share memory between the two forms (the view is ours alone), so each is converted
	// into a fresh value before it is stored.
	for _, l := range []struct {
		from []core.Container
		to   []corev1.Container
	}{{internal.Spec.Containers, view.Spec.Containers}, {internal.Spec.InitContainers, view.Spec.InitContainers}} {
		for i := range l.from {
			var r corev1.ResourceRequirements
			if err := k8sv1.Convert_core_ResourceRequirements_To_v1_ResourceRequirements(&l.from[i].Resources, &r, nil); err != nil {
				return nil, fmt.Errorf("converting the defaulted resources back: %w", err)
			}
			l.to[i].Resources = r
		}
	}
	return view, nil
}

// LimitRangeError is LimitRanger's validating pass of lr on pod: nil when the Pod keeps every
// bound of lr (per container, and on the Pod's totals), else the plugin's own error. The
// defaults are not applied here (see LimitRangeDefaulted): the plugin validates the Pod its
// mutating pass left.
func LimitRangeError(lr *corev1.LimitRange, pod *corev1.Pod) error {
	// The validating pass only reads the pod: its spec is converted in place, not copied (the
	// two forms share memory), so judging the same view many times costs no copy.
	var internal core.Pod
	if err := k8sv1.Convert_v1_PodSpec_To_core_PodSpec(&pod.Spec, &internal.Spec, nil); err != nil {
		return fmt.Errorf("converting the pod to the API server's internal form: %w", err)
	}
	return limitranger.PodValidateLimitFunc(lr, &internal)
}

// ContainerResourceErrors returns the errors the API server's validation of a Pod create finds
// in a container's requests and limits (a request above its limit, a quantity a resource does
// not allow), with paths relative to the container (resources.requests). LimitRanger's
// defaults can make valid resources invalid: a default limit below the request a container
// sets. Only the requests and limits are validated (the claims name the pod's, which
// LimitRanger leaves alone), with the options the API server derives from a pod holding them.
func ContainerResourceErrors(r corev1.ResourceRequirements) field.ErrorList {
	view := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "resources",
		Resources: corev1.ResourceRequirements{Requests: r.Requests, Limits: r.Limits}}}}}
	internal, err := toInternal(view)
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath("resources"), err)}
	}
	opts := podutil.GetValidationOptionsFromPodSpecAndMeta(&internal.Spec, nil, &internal.ObjectMeta, nil)
	return corevalidation.ValidateContainerResourceRequirements(&internal.Spec.Containers[0].Resources, nil, field.NewPath("resources"), opts)
}

// limitRangerView keeps of pod what LimitRanger reads: the containers' names, resources and
// restart policies (native sidecars add up differently), and the pod-level resources; and its
// OS, which PodResourceErrors reads of the same view.
func limitRangerView(pod *corev1.Pod) *corev1.Pod {
	view := &corev1.Pod{Spec: corev1.PodSpec{Resources: pod.Spec.Resources.DeepCopy(), OS: pod.Spec.OS.DeepCopy()}}
	for _, l := range []struct {
		from []corev1.Container
		to   *[]corev1.Container
	}{{pod.Spec.Containers, &view.Spec.Containers}, {pod.Spec.InitContainers, &view.Spec.InitContainers}} {
		if len(l.from) == 0 {
			continue
		}
		*l.to = make([]corev1.Container, len(l.from))
		for i := range l.from {
			c := &l.from[i]
			(*l.to)[i] = corev1.Container{Name: c.Name, Resources: *c.Resources.DeepCopy()}
			if c.RestartPolicy != nil {
				policy := *c.RestartPolicy
				(*l.to)[i].RestartPolicy = &policy
			}
		}
	}
	return view
}
