package inject

// Reason says, as data, why the engine refused to inject a Pod. It is the metric label of a
// refusal (sidecarset_pod_decisions_total, sidecarset_admissions_total), the reason of the
// PodRefused event on the SidecarSet and of its Refusing condition, and a row of the refusal
// table in docs/concepts.md (TestReasonsDocumented keeps that table complete). Each constant's
// comment says when the engine gives it and what the fix usually is.
type Reason string

const (
	// ReasonUnreadableRecord: the Pod's sidecarset.io/status annotation is not a JSON object of
	// records. Fix: remove it (and the containers it lists), or restore it as written.
	ReasonUnreadableRecord Reason = "UnreadableRecord"
	// ReasonContainerClash: a sidecar's name is taken by a container of the Pod (with another
	// definition) or of another SidecarSet. Fix: rename one of them, or make the selectors
	// disjoint.
	ReasonContainerClash Reason = "ContainerClash"
	// ReasonVolumeClash: a volume the set adds, or one a sidecar mounts, is defined by the Pod or
	// another SidecarSet in another way, or is missing. Fix: give the volumes different names,
	// or the same definition.
	ReasonVolumeClash Reason = "VolumeClash"
	// ReasonPortClash: a sidecar's port (container port, host port or port name) is the Pod's
	// or another sidecar's too. Fix: change one of the ports.
	ReasonPortClash Reason = "PortClash"
	// ReasonLimitRange: a sidecar, with the namespace's LimitRange defaults, breaks a bound of a
	// LimitRange (per container or per pod). Fix: size the sidecar within the bound.
	ReasonLimitRange Reason = "LimitRange"
	// ReasonPodResources: the sidecars' requests or limits do not fit in what the Pod's
	// pod-level resources (spec.resources) leave. Fix: raise the Pod's budget, or shrink the
	// sidecars.
	ReasonPodResources Reason = "PodResources"
	// ReasonResourcesPolicy: a sidecar's resourcesPolicy cannot compute its resources for this
	// Pod (no target container, an expression that fails, a request above the limit). Fix: the
	// expression, or the Pod's containers.
	ReasonResourcesPolicy Reason = "ResourcesPolicy"
	// ReasonOverride: a Pod's annotation that a spec.overrides entry reads holds a value its rule
	// does not allow, or leaves a request above its limit. Fix: change or remove the annotation.
	ReasonOverride Reason = "Override"
	// ReasonAnnotationClash: two SidecarSets patch the same annotation with different values or
	// policies, or a patch cannot be merged into the Pod's value. Fix: agree on one value, or
	// make the selectors disjoint.
	ReasonAnnotationClash Reason = "AnnotationClash"
)

// Reasons lists every Reason, for the documentation test and for the metrics that are created
// with a series per reason.
var Reasons = []Reason{ReasonUnreadableRecord, ReasonContainerClash, ReasonVolumeClash, ReasonPortClash,
	ReasonLimitRange, ReasonPodResources, ReasonResourcesPolicy, ReasonOverride, ReasonAnnotationClash}
