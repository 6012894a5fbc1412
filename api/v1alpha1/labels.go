package v1alpha1

const (
	// InjectLabel is the label a Pod carries to opt in to injection. The pod webhook is
	// registered with an objectSelector on it, so the API server never sends other pods to us.
	InjectLabel = "sidecarset.io/inject"

	// InjectLabelValue is the only value of InjectLabel that opts a Pod in.
	InjectLabelValue = "true"

	// NamespaceInjectionLabel set to NamespaceInjectionDisabled on a Namespace keeps every Pod
	// in it from being injected. The pod webhook's namespaceSelector skips such namespaces, and
	// the injector checks it too (OLM replaces the namespaceSelector with its own).
	NamespaceInjectionLabel = "sidecarset.io/injection"

	// NamespaceInjectionDisabled is the value of NamespaceInjectionLabel that opts a namespace out.
	NamespaceInjectionDisabled = "disabled"

	// StatusAnnotation records, on each injected Pod, what every SidecarSet injected there:
	// a JSON object keyed by SidecarSet name (see the inject package's Record type).
	StatusAnnotation = "sidecarset.io/status"

	// WebhookRouteAnnotation, set to WebhookRouteValue, marks a Pod that the admission policies
	// of the operator's policy mode send to the webhook (a SidecarSet CEL cannot inject, several
	// sets selecting the Pod, a clash to refuse), with WebhookRouteLabel. The webhook removes it.
	WebhookRouteAnnotation = "sidecarset.io/webhook"

	// WebhookRouteLabel, set to WebhookRouteValue, is the same mark as a label. The policies add
	// both, the pod webhook's matchCondition in policy mode takes either, and the webhook removes
	// both. The label lets a later registration select routed pods by objectSelector, from the
	// pod's labels with no CEL, once no policy marking the annotation alone (0.1.0's) can run.
	WebhookRouteLabel = "sidecarset.io/webhook"

	// WebhookRouteValue is the value of WebhookRouteAnnotation and WebhookRouteLabel.
	WebhookRouteValue = "required"

	// DefaultContainerAnnotation is kubectl's annotation naming the container that
	// `kubectl exec` and `kubectl logs` pick when none is given.
	DefaultContainerAnnotation = "kubectl.kubernetes.io/default-container"

	// RevisionSetLabel names, on a ControllerRevision in the operator's namespace, the SidecarSet
	// whose content it stores.
	RevisionSetLabel = "sidecarset.io/sidecarset"

	// RevisionHashLabel is, on a ControllerRevision, the hash of the content it stores (the hash
	// Pods record).
	RevisionHashLabel = "sidecarset.io/hash"

	// CustomVersionLabel, set by a user on a SidecarSet, is copied onto the revision of its
	// current content, so a revision can be named by a version of the user's choosing.
	CustomVersionLabel = "sidecarset.io/custom-version"

	// RefreshImagesAnnotation, set on a SidecarSet with imagePolicy.pin Digest to a new value
	// (`kubectl sidecarset rollout refresh` writes the time), has the operator resolve its
	// images again: a tag that moved since makes a new revision.
	RefreshImagesAnnotation = "sidecarset.io/refresh-images"

	// SignaturesAnnotation, on the revision of a SidecarSet with imagePolicy.verify, records the
	// signatures verified for its images: "policy HASH" (the hash of the verify policy they were
	// verified under) on the first line, then one line per image, "IMAGE@DIGEST signed by SIGNER".
	// The webhook falls back to a revision only when it records every image under the current policy.
	SignaturesAnnotation = "sidecarset.io/signatures"

	// ImagesAnnotation, written by the pod webhook on each Pod it injects a sidecar naming a digest
	// into, records those sidecars' images ("container=image", comma-separated): the
	// pinned-images ValidatingAdmissionPolicy refuses the Pod unless each still runs its image,
	// whatever a mutating webhook called later did.
	ImagesAnnotation = "sidecarset.io/images"

	// LeaderLabel is set on the operator's leader-election Lease to the name of the replica
	// (its pod, from POD_NAME, or its hostname) that holds it: `kubectl get lease -L
	// sidecarset.io/leader` says which pod writes status.
	LeaderLabel = "sidecarset.io/leader"
)
