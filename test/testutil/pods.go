package testutil

import corev1 "k8s.io/api/core/v1"

// ReadyStatus is the status of a Pod's Ready condition, "" when it has none.
func ReadyStatus(st corev1.PodStatus) corev1.ConditionStatus {
	for _, c := range st.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status
		}
	}
	return ""
}

// PodAvailable reports what a rolling update counts as available: the Pod is Ready, not being
// deleted, and no container is reported running another image than its spec names.
func PodAvailable(pod *corev1.Pod) bool {
	if ReadyStatus(pod.Status) != corev1.ConditionTrue || pod.DeletionTimestamp != nil {
		return false
	}
	for _, l := range []struct {
		spec []corev1.Container
		st   []corev1.ContainerStatus
	}{{pod.Spec.Containers, pod.Status.ContainerStatuses}, {pod.Spec.InitContainers, pod.Status.InitContainerStatuses}} {
		for _, c := range l.spec {
			for _, s := range l.st {
				if s.Name == c.Name && s.Image != c.Image {
					return false
				}
			}
		}
	}
	return true
}
