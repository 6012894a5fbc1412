package inject

import corev1 "k8s.io/api/core/v1"

// The API-server defaulting helpers are unexported; the black-box tests in package inject_test
// reach them through these aliases.
var (
	DefaultPullPolicy = defaultPullPolicy
	SameContainer     = func(a, b *corev1.Container) bool { return sameContainer(a, b, false) }
	SameVolume        = sameVolume
)
