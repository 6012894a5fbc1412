package validation

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/podrules"
)

// placeholderApp is the app container of the synthetic pod; its name cannot be a DNS label
// that a SidecarSet's container could clash with unnoticed, since it is never reported.
const placeholderApp = "sidecarset-placeholder-app"

// validateAsPod runs Kubernetes' own pod validation (internal/podrules) on the pod the
// SidecarSet would produce: a placeholder app container, then the set's containers, its init
// containers, volumes and pull secrets, plus placeholder volumes for mounts of volumes the set
// does not declare (a sidecar may mount a volume of the pod's own). Every error is mapped back
// to the SidecarSet field it comes from.
//
// It is the second pass: it runs when the SidecarSet's own checks (which say more about each
// fix) found nothing, so one mistake is not reported twice in two wordings.
func validateAsPod(spec *appsv1alpha1.SidecarSetSpec, path *field.Path, reported field.ErrorList) field.ErrorList {
	if len(reported) > 0 {
		return nil
	}
	var errs field.ErrorList
	for _, e := range podrules.ValidateCreate(syntheticPod(spec)) {
		mapped, ok := mapPodPath(e.Field, len(spec.Volumes), path)
		if !ok {
			continue // a placeholder's own field: the set cannot be the cause
		}
		out := *e
		out.Field = mapped
		if !strings.Contains(out.Detail, "Kubernetes") {
			out.Detail = strings.TrimSuffix(out.Detail, ".") + kubernetesHint(e.Type)
		}
		errs = append(errs, &out)
	}
	return errs
}

func kubernetesHint(t field.ErrorType) string {
	if t == field.ErrorTypeNotSupported || t == field.ErrorTypeRequired || t == field.ErrorTypeDuplicate {
		return " (Kubernetes would refuse every pod this SidecarSet injects)"
	}
	return "; Kubernetes would refuse every pod this SidecarSet injects, so fix this field"
}

func syntheticPod(spec *appsv1alpha1.SidecarSetSpec) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "validation", Namespace: "validation"}}
	pod.Spec.Containers = []corev1.Container{{Name: placeholderApp, Image: "placeholder:1"}}
	for i := range spec.Containers {
		pod.Spec.Containers = append(pod.Spec.Containers, *spec.Containers[i].Container.DeepCopy())
	}
	for i := range spec.InitContainers {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, *spec.InitContainers[i].Container.DeepCopy())
	}
	for i := range spec.Volumes {
		pod.Spec.Volumes = append(pod.Spec.Volumes, *spec.Volumes[i].DeepCopy())
	}
	pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, spec.ImagePullSecrets...)
	declared := volumeNames(spec.Volumes)
	mounts, devices := sets.New[string](), sets.New[string]()
	for _, c := range append(append([]corev1.Container(nil), pod.Spec.Containers...), pod.Spec.InitContainers...) {
		for _, m := range c.VolumeMounts {
			mounts.Insert(m.Name)
		}
		for _, d := range c.VolumeDevices {
			devices.Insert(d.Name)
		}
	}
	for _, name := range sets.List(devices) {
		if !declared.Has(name) && name != "" {
			declared.Insert(name)
			pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "placeholder"}}})
		}
	}
	for _, name := range sets.List(mounts) {
		if !declared.Has(name) && name != "" {
			pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
				EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		}
	}
	return pod
}

// mapPodPath turns a path of the synthetic pod into the SidecarSet's: spec.containers[k+1] is
// the set's spec.containers[k] (k=0 is the placeholder app), init containers, the set's own
// volumes and pull secrets keep their index. Placeholders' paths are not the set's.
func mapPodPath(f string, setVolumes int, spec *field.Path) (string, bool) {
	rest, ok := strings.CutPrefix(f, "spec.")
	if !ok {
		return spec.String(), true // pod-level: report on the spec as a whole
	}
	for _, list := range []string{"containers", "initContainers", "volumes", "imagePullSecrets"} {
		after, ok := strings.CutPrefix(rest, list+"[")
		if !ok {
			continue
		}
		end := strings.IndexByte(after, ']')
		i, err := strconv.Atoi(after[:max(end, 0)])
		if end < 0 || err != nil {
			return spec.Child(list).String(), true
		}
		switch {
		case list == "containers" && i == 0:
			return "", false
		case list == "containers":
			i--
		case list == "volumes" && i >= setVolumes:
			return "", false
		}
		return fmt.Sprintf("%s[%d]%s", spec.Child(list).String(), i, after[end+1:]), true
	}
	return spec.String() + "." + rest, true
}
