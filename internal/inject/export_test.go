package inject

import corev1 "k8s.io/api/core/v1"

// The comparison helpers are unexported; the black-box tests in package inject_test reach them
// through these aliases.
var (
	// SameContainer reports whether a Pod's regular container (stored), off the host network,
	// carries the sidecar as the SidecarSet declares it (written).
	SameContainer = func(written, stored *corev1.Container) bool { return podHasContainer(stored, written, false, false) }
	SameVolume    = sameVolume
	Contains      = contains
	AppEnvView    = appEnvView
)
