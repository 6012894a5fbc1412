package podrules

import (
	corev1 "k8s.io/api/core/v1"
	podv1 "k8s.io/kubernetes/pkg/api/v1/pod"
)

// NativeSidecar reports whether an init container is a native sidecar: one with restartPolicy
// Always, which the kubelet starts before the app's containers and keeps running alongside
// them, so that it counts with them (ports, resources, in-place resize) rather than running
// alone before them. It is Kubernetes' own IsRestartableInitContainer; like it, it does not
// check that c is an init container (a regular container may not set restartPolicy at all).
// Every part of the operator that tells native sidecars apart asks it.
func NativeSidecar(c *corev1.Container) bool { return podv1.IsRestartableInitContainer(c) }
