package v1alpha1

const (
	// InjectLabel is the label a Pod carries to opt in to injection. The pod webhook is
	// registered with an objectSelector on it, so the API server never sends other pods to us.
	InjectLabel = "sidecarset.io/inject"

	// InjectLabelValue is the only value of InjectLabel that opts a Pod in.
	InjectLabelValue = "true"

	// StatusAnnotation records, on each injected Pod, what every SidecarSet injected there:
	// a JSON object keyed by SidecarSet name (see the inject package's Record type).
	StatusAnnotation = "sidecarset.io/status"

	// DefaultContainerAnnotation is kubectl's annotation naming the container that
	// `kubectl exec` and `kubectl logs` pick when none is given.
	DefaultContainerAnnotation = "kubectl.kubernetes.io/default-container"
)
