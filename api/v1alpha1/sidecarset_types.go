// +kubebuilder:validation:XValidation:rule="!has(self.injectionStrategy) || !has(self.injectionStrategy.revision) || !has(self.injectionStrategy.revision.policy) || self.injectionStrategy.revision.policy != 'Partial' || !has(self.updateStrategy) || !has(self.updateStrategy.partition) || type(self.updateStrategy.partition) == string",message="with injectionStrategy.revision.policy Partial, write updateStrategy.partition as a percentage (such as '30%'): it is also the share of new pods that get the pinned revision",fieldPath=".updateStrategy.partition"
package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// SidecarSetSpec declares what to inject and into which Pods.
//
// +kubebuilder:validation:XValidation:rule="(has(self.containers) && size(self.containers) > 0) || (has(self.initContainers) && size(self.initContainers) > 0)",message="declare at least one entry in spec.containers or spec.initContainers",fieldPath=".containers"
// +kubebuilder:validation:XValidation:rule="!has(self.injectionStrategy) || !has(self.injectionStrategy.revision) || !has(self.injectionStrategy.revision.policy) || self.injectionStrategy.revision.policy != 'Partial' || !has(self.updateStrategy) || !has(self.updateStrategy.partition) || type(self.updateStrategy.partition) == string",message="with injectionStrategy.revision.policy Partial, write updateStrategy.partition as a percentage (such as '30%'): it is also the share of new pods that get the pinned revision",fieldPath=".updateStrategy.partition"
// +kubebuilder:validation:XValidation:rule="!has(self.initContainers) || self.initContainers.all(c, !has(c.resourcesPolicy) || (has(c.restartPolicy) && c.restartPolicy == 'Always'))",message="resourcesPolicy is supported on an init container only when it is a native sidecar (restartPolicy: Always); remove it, or give the init container fixed resources",fieldPath=".initContainers"
type SidecarSetSpec struct {
	// Selector selects the Pods to inject into, by their labels. It is required and must not be
	// empty: a SidecarSet never applies to every opted-in Pod by accident. Pods must also carry
	// the opt-in label sidecarset.io/inject=true.
	// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="selector must have at least one matchLabels entry or matchExpressions requirement"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Pod selector",xDescriptors="urn:alm:descriptor:com.tectonic.ui:selector:core:v1:Pod"
	Selector *metav1.LabelSelector `json:"selector"`

	// NamespaceSelector further restricts injection to Pods whose Namespace labels match.
	// When unset, every namespace the pod webhook is called for is eligible (the webhook is
	// never called for kube-system or the operator's own namespace).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Namespace selector",xDescriptors="urn:alm:descriptor:com.tectonic.ui:selector:core:v1:Namespace"
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// Containers are injected into the Pod's spec.containers.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Sidecar containers"
	Containers []SidecarContainer `json:"containers,omitempty"`

	// InitContainers are injected into the Pod's spec.initContainers. An init container with
	// restartPolicy Always is a native sidecar (Kubernetes 1.29+): it starts before the app
	// containers, keeps running beside them and does not hold up Job completion.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Init containers and native sidecars"
	InitContainers []SidecarContainer `json:"initContainers,omitempty"`

	// Volumes the injected containers may mount. Only the volumes that an injected container
	// actually mounts are added to a Pod.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Volumes"
	Volumes []corev1.Volume `json:"volumes,omitempty"`

	// ImagePullSecrets are added to the Pod's spec.imagePullSecrets when not already there.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Image pull secrets"
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// PatchPodMetadata sets annotations on the Pods the set injects (a log agent's
	// configuration, a scrape hint). Only keys the operator allows are patched (the manager's
	// --patch-pod-metadata-allowed-keys); injection leaves any other key out with a warning.
	// Keys under sidecarset.io/ are the operator's own and refused.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Pod annotations"
	PatchPodMetadata []PatchPodMetadata `json:"patchPodMetadata,omitempty"`

	// Overrides are the sidecar fields a Pod may set for itself, each by an annotation: a
	// Pod that carries the annotation gets its value in the sidecar (a bigger proxy for a busy
	// Pod, a log level). Only what is listed here can be overridden, and only to values the
	// entry's rule allows; a Pod whose value is not allowed is refused, with the annotation
	// named. The values are read when the Pod is injected: changing the annotation of a
	// running Pod takes effect when it is recreated.
	// +optional
	// +listType=map
	// +listMapKey=annotation
	// +kubebuilder:validation:MaxItems=32
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Per-pod overrides"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Per-pod overrides"
	Overrides []Override `json:"overrides,omitempty"`

	// InjectionStrategy controls injection into newly created Pods.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Injection strategy"
	InjectionStrategy InjectionStrategy `json:"injectionStrategy,omitempty"`

	// UpdateStrategy says whether and how Pods injected earlier are brought up to date in
	// place when the SidecarSet changes. The default, NotUpdate, leaves them as they are until
	// they are recreated, so that upgrading the operator or editing a set never restarts
	// sidecars on its own.
	// +optional
	// +kubebuilder:default={type: NotUpdate}
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Update strategy"
	UpdateStrategy UpdateStrategy `json:"updateStrategy,omitempty"`

	// RevisionHistoryLimit is how many revisions of the injected content, besides the current one,
	// are kept (ControllerRevisions in the operator's namespace, named `<set>-<hash>`). Default 10.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Revision history limit",xDescriptors="urn:alm:descriptor:com.tectonic.ui:number"
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`

	// ImagePolicy says how the sidecars' images are named in the Pods: as written (the
	// default), or pinned to the digests their tags named when the revision was made, so that
	// every Pod of a revision runs the same bytes.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Image policy"
	ImagePolicy *ImagePolicy `json:"imagePolicy,omitempty"`

	// PodResources says what happens to a Pod that sets pod-level resources (spec.resources,
	// Kubernetes 1.34+) when this set's sidecars do not fit in them. Refuse (the default)
	// refuses the Pod, naming the set and the field; the Pod's budget is its author's. Pad adds
	// each injected sidecar's requests and limits (regular and native sidecars; plain init
	// containers must fit as they are) to the pod-level requests and limits the Pod sets, and
	// records what it added in the Pod's sidecarset.io/status annotation. Pad keeps the Pod's
	// QoS class: in a Guaranteed Pod, cpu and memory requests and limits grow by the same
	// amount (the larger of each sidecar's request and limit). It applies to Pods injected from
	// then on and is not part of the injected content (no new hash, no rollout).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Pod-level resources"
	PodResources PodResourcesPolicy `json:"podResources,omitempty"`
}

// PodResourcesPolicy says what injection does with a Pod's pod-level resources.
// +kubebuilder:validation:Enum=Refuse;Pad
type PodResourcesPolicy string

const (
	// PodResourcesRefuse refuses a Pod whose pod-level resources the sidecars do not fit in.
	PodResourcesRefuse PodResourcesPolicy = "Refuse"
	// PodResourcesPad adds the sidecars' requests and limits to the Pod's pod-level resources.
	PodResourcesPad PodResourcesPolicy = "Pad"
)

// ImagePin says how a SidecarSet's images are named in the Pods it injects.
// +kubebuilder:validation:Enum=Tag;Digest
type ImagePin string

const (
	// ImagePinTag injects each image as the spec writes it: a tag the registry may move.
	ImagePinTag ImagePin = "Tag"
	// ImagePinDigest resolves each image the spec names by tag to the digest the tag names,
	// once, and injects repository:tag@digest. The tag moving later changes nothing until the
	// set's images are refreshed (the sidecarset.io/refresh-images annotation, which
	// `kubectl sidecarset rollout refresh` sets): that makes a new revision, which rolls out
	// as any other.
	ImagePinDigest ImagePin = "Digest"
)

// ImagePolicy says how a SidecarSet's images are named in the Pods it injects.
// +kubebuilder:validation:XValidation:rule="!has(self.verify) || (has(self.pin) && self.pin == 'Digest')",message="signatures are verified on digests: set pin to Digest to use verify",fieldPath=".verify"
type ImagePolicy struct {
	// Pin is Tag (inject the images as written) or Digest (pin them to digests). An image the
	// spec already names by digest is injected as written either way.
	// +kubebuilder:default=Tag
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Pin images",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:Tag","urn:alm:descriptor:com.tectonic.ui:select:Digest"}
	Pin ImagePin `json:"pin,omitempty"`

	// PullSecrets name Secrets of type kubernetes.io/dockerconfigjson in the operator's
	// namespace holding the credentials the operator resolves the images with, when their
	// registries need any. They are read by the operator only: Pods still pull with their own
	// (spec.imagePullSecrets).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	PullSecrets []corev1.LocalObjectReference `json:"pullSecrets,omitempty"`

	// Verify, when set, admits only images whose digest carries a Sigstore signature by one
	// of Keys or Identities: each pinned digest is verified once, when it is pinned, and a
	// digest that fails is never injected (new pods keep the last revision whose images
	// verified). Signatures are read as cosign 2.4 and later attach them
	// (`cosign sign --new-bundle-format`, the default from cosign 3): Sigstore bundles that
	// the image's digest refers to, by the OCI referrers API or its tag scheme.
	// Requires pin Digest.
	// +optional
	Verify *ImageVerification `json:"verify,omitempty"`
}

// ImageVerification says whose signatures a SidecarSet's images must carry.
// +kubebuilder:validation:XValidation:rule="(has(self.keys) && size(self.keys) > 0) || (has(self.identities) && size(self.identities) > 0)",message="name at least one signer: a public key in keys, or a keyless identity in identities"
// +kubebuilder:validation:XValidation:rule="!has(self.identities) || size(self.identities) == 0 || has(self.trustedRoot)",message="keyless identities are verified against a trusted root: name the ConfigMap holding it in trustedRoot",fieldPath=".trustedRoot"
type ImageVerification struct {
	// Keys are public keys (PEM, as `cosign generate-key-pair` writes cosign.pub), each the
	// value of a key of a ConfigMap in the operator's namespace. A signature by any of them
	// verifies; it needs no transparency-log entry or timestamp.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Keys []ConfigMapKeyRef `json:"keys,omitempty"`

	// Identities are keyless signers: the OIDC issuer and the subject of the certificate a
	// certificate authority of TrustedRoot issued for the signature. A signature by any of
	// them verifies.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Identities []SignerIdentity `json:"identities,omitempty"`

	// TrustedRoot is a ConfigMap key, in the operator's namespace, holding the Sigstore trusted
	// root (trusted_root.json: certificate authorities, transparency logs, timestamp
	// authorities) keyless signatures are verified against. The operator never fetches one:
	// copy the public-good instance's (`cosign trusted-root create`, or the TUF repository's
	// trusted_root.json) or write your private instance's. When it lists transparency logs, a
	// signature needs an entry in one; when it lists timestamp authorities only, a signed
	// timestamp; when it lists neither, certificates are checked at the time of verification.
	// +optional
	TrustedRoot *ConfigMapKeyRef `json:"trustedRoot,omitempty"`
}

// ConfigMapKeyRef names a key of a ConfigMap in the operator's namespace.
type ConfigMapKeyRef struct {
	// Name is the ConfigMap's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Key is the key of its data.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key"`
}

// SignerIdentity is a keyless signer: who the certificate authority certified.
// +kubebuilder:validation:XValidation:rule="has(self.subject) != has(self.subjectRegExp)",message="set exactly one of subject and subjectRegExp"
type SignerIdentity struct {
	// Issuer is the OIDC issuer that authenticated the signer, as the certificate records
	// it (for GitHub Actions, https://token.actions.githubusercontent.com).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Issuer string `json:"issuer"`
	// Subject is the certificate's subject alternative name, exactly (an email address, or
	// a workflow's URI).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Subject string `json:"subject,omitempty"`
	// SubjectRegExp matches the whole subject alternative name instead (Go syntax; it is
	// anchored at both ends: `https://github\.com/example/agent/.*` matches that repository's
	// workflows only).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	SubjectRegExp string `json:"subjectRegExp,omitempty"`
}

// ResolvedImage is what an image of a SidecarSet with imagePolicy.pin Digest resolved to.
type ResolvedImage struct {
	// Image is the image as the spec names it.
	Image string `json:"image"`
	// Digest is the digest the image's tag named when it was resolved (sha256:...); empty
	// while it has never been resolved.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Digest string `json:"digest,omitempty"`
	// ResolvedAt is when Digest was read from the registry.
	// +optional
	ResolvedAt *metav1.Time `json:"resolvedAt,omitempty"`
	// Latest is the digest the tag names now, when it differs from Digest: the tag has moved
	// since, and refreshing the set's images would roll Latest out.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Latest string `json:"latest,omitempty"`
	// Error is why the image's latest resolution failed (the registry unreachable, the image
	// or the credentials missing); empty when it succeeded.
	// +optional
	Error string `json:"error,omitempty"`
	// Verified, for a set with imagePolicy.verify, says whose signature on Digest verified,
	// under which verify policy, and when. Pods get Digest only while Verified names it
	// under the current policy.
	// +optional
	Verified *VerifiedSignature `json:"verified,omitempty"`
	// VerificationError is why Digest did not verify (no signature, none by a trusted
	// signer, the keys unreadable); empty once it verified.
	// +optional
	VerificationError string `json:"verificationError,omitempty"`
}

// VerifiedSignature is a verified signature on a pinned digest.
type VerifiedSignature struct {
	// Digest is the digest whose signature verified.
	// +kubebuilder:validation:MaxLength=256
	Digest string `json:"digest"`
	// Signer is who signed it: "key CONFIGMAP/KEY", or "identity ISSUER SUBJECT".
	// +kubebuilder:validation:MaxLength=2048
	Signer string `json:"signer"`
	// Policy is a hash of spec.imagePolicy.verify when it verified: changing the signers
	// verifies every digest again.
	// +kubebuilder:validation:MaxLength=64
	Policy string `json:"policy"`
	// At is when it verified.
	At metav1.Time `json:"at"`
}

// UpdateStrategyType says whether running Pods are updated.
// +kubebuilder:validation:Enum=RollingUpdate;NotUpdate
type UpdateStrategyType string

const (
	// RollingUpdate updates running Pods in place: a sidecar whose image changed gets the new
	// image (the kubelet restarts that container only; the Pod and its app containers stay).
	// Pods whose sidecars changed in any other way cannot be updated in place; the status says
	// which and why.
	RollingUpdate UpdateStrategyType = "RollingUpdate"
	// NotUpdate leaves running Pods as they are. It is the default.
	NotUpdate UpdateStrategyType = "NotUpdate"
)

// UpdateStrategy says whether and how running Pods are updated in place.
//
// +kubebuilder:validation:XValidation:rule="!has(self.maxUnavailable) || (type(self.maxUnavailable) == int ? self.maxUnavailable >= 1 : self.maxUnavailable != '0%')",message="maxUnavailable must be at least 1 (or a percentage above 0%), or no Pod could ever be updated",fieldPath=".maxUnavailable"
// +kubebuilder:validation:XValidation:rule="!has(self.partition) || type(self.partition) != int || self.partition >= 0",message="partition must not be negative",fieldPath=".partition"
type UpdateStrategy struct {
	// Type is RollingUpdate or NotUpdate.
	// +kubebuilder:default=NotUpdate
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Update type",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:RollingUpdate","urn:alm:descriptor:com.tectonic.ui:select:NotUpdate"}
	Type UpdateStrategyType `json:"type,omitempty"`

	// Partition is how many of the injected Pods keep their current sidecars: a number, or a
	// percentage of the injected Pods (rounded up). Pods are updated not-Ready first, then by
	// priorityStrategy, spread by scatterStrategy, then in namespace/name order; the last in
	// that order keep theirs. Pods created after the change are injected with the new content
	// and count as updated; Pods the set never injected count neither way. Default 0: all.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:Pattern=`^(100|[1-9]?[0-9])%$`
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Partition",xDescriptors="urn:alm:descriptor:com.tectonic.ui:podCount"
	Partition *intstr.IntOrString `json:"partition,omitempty"`

	// MaxUnavailable is how many of the matched Pods may be unavailable at once: a number, or a
	// percentage of the matched Pods (rounded down, at least 1). Default 1. Pods whose sidecars
	// restart for the rollout count in every namespace; Pods unavailable for reasons of their
	// own (not Ready, being deleted, starting) count only against updates in their namespace.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:Pattern=`^(100|[1-9]?[0-9])%$`
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Max unavailable",xDescriptors="urn:alm:descriptor:com.tectonic.ui:podCount"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// Paused stops starting Pod updates; updates already made finish on their own.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Updates paused",xDescriptors="urn:alm:descriptor:com.tectonic.ui:booleanSwitch"
	Paused bool `json:"paused,omitempty"`

	// Selector limits updates to the Pods it also matches (a canary by label). Unset: every
	// matched Pod.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Update selector (canary)",xDescriptors="urn:alm:descriptor:com.tectonic.ui:selector:core:v1:Pod"
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// Recreate is what the rollout does with an outdated Pod whose sidecars cannot change in
	// place (a change of anything but an image, or of resources where in-place resize is not
	// possible): Never, the default, leaves it and reports it in the RollingUpdate condition;
	// Evict evicts it through the Eviction API, so PodDisruptionBudgets hold, and its
	// controller recreates it with the current sidecars. Only Pods owned by an existing
	// ReplicaSet, StatefulSet, DaemonSet or ReplicationController are evicted (StatefulSet
	// Pods one at a time per StatefulSet); Pods whose sidecars someone edited since injection
	// are never evicted. Evictions share maxUnavailable, partition, paused and selector with
	// the in-place updates.
	// +kubebuilder:default=Never
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Recreate pods not updatable in place",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:Never","urn:alm:descriptor:com.tectonic.ui:select:Evict"}
	Recreate RecreatePolicy `json:"recreate,omitempty"`

	// Remediate is what the rollout does with a Pod the set selects but never injected
	// (created before the set, while injection was paused, or while the webhook could not be
	// reached): Never, the default, counts it in status.notInjectedPods; Evict recreates it
	// by eviction under the same rules as Recreate, so it is injected.
	// +kubebuilder:default=Never
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Remediate pods not injected",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:Never","urn:alm:descriptor:com.tectonic.ui:select:Evict"}
	Remediate RecreatePolicy `json:"remediate,omitempty"`

	// ProgressDeadlineSeconds is how long a workload's Pods may stay unavailable after the
	// rollout evicted one of them (Recreate or Remediate: Evict). Past it the rollout halts:
	// it starts no update and no eviction, and the RollingUpdate condition (reason Halted)
	// says where and why (image pull, crash loop, readiness); events on the Pods name them.
	// Any change of the spec resumes it. Default 600.
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=10
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Progress deadline (seconds)",xDescriptors="urn:alm:descriptor:com.tectonic.ui:number"
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`

	// PriorityStrategy orders the updates by the Pods' labels: higher priority first. The
	// rollout still updates not-Ready Pods first (it costs no availability), and ties keep the
	// namespace/name order. With a partition, the lowest in that order keep their sidecars.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Priority strategy"
	PriorityStrategy *UpdatePriorityStrategy `json:"priorityStrategy,omitempty"`

	// ScatterStrategy spreads the Pods carrying a label (key and value; value "*" takes each
	// value the Pods carry in turn) evenly over the update order, instead of updating them
	// back to back: a rollout over several zones then restarts sidecars across the zones
	// rather than zone after zone. It orders Pods of equal availability and priority. With
	// several terms, the one that more Pods match is spread first; one term is easier to
	// follow.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Scatter strategy"
	ScatterStrategy []UpdateScatterTerm `json:"scatterStrategy,omitempty"`
}

// RecreatePolicy says whether the rollout recreates Pods by eviction.
// +kubebuilder:validation:Enum=Never;Evict
type RecreatePolicy string

const (
	// RecreateNever leaves the Pods alone and reports them.
	RecreateNever RecreatePolicy = "Never"
	// RecreateEvict evicts the Pods through the Eviction API; their controllers recreate them.
	RecreateEvict RecreatePolicy = "Evict"
)

// InjectionStrategy controls injection into newly created Pods.
type InjectionStrategy struct {
	// Paused stops injection into new Pods. Pods injected earlier keep their sidecars and are
	// still counted in status.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Paused",xDescriptors="urn:alm:descriptor:com.tectonic.ui:booleanSwitch"
	Paused bool `json:"paused,omitempty"`

	// Revision pins what new Pods get to a stored revision of this SidecarSet instead of its
	// current spec: a new image can then be tried on running Pods (updateStrategy) while new
	// Pods still get the known one, or the other way round. When the revision is not found, new
	// Pods get the current spec and the admission says so.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Pinned revision"
	Revision *RevisionRef `json:"revision,omitempty"`
}

// RevisionRef names a stored revision of a SidecarSet: by its ControllerRevision name
// (status.updateRevision shows the current one), or by the sidecarset.io/custom-version label
// the SidecarSet carried when the revision was stored. Policy says which new Pods get it.
//
// +kubebuilder:validation:XValidation:rule="has(self.name) != has(self.customVersion)",message="set exactly one of name and customVersion"
type RevisionRef struct {
	// Name is the ControllerRevision's name, `<set>-<hash>`.
	// +optional
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name,omitempty"`
	// CustomVersion is the value of the sidecarset.io/custom-version label of the revision;
	// the newest such revision is used.
	// +optional
	// +kubebuilder:validation:MinLength=1
	CustomVersion string `json:"customVersion,omitempty"`
	// Policy says which new Pods get the pinned revision. Always, the default: every new Pod.
	// Partial: the new Pods that the update strategy leaves out, that is, the share that
	// updateStrategy.partition keeps (a percentage; each Pod is drawn at random), the Pods
	// updateStrategy.selector does not match, and every new Pod while updateStrategy.paused;
	// the other new Pods get the current spec. The draw is made once per Pod, from its
	// admission request; a Pod admitted again keeps the revision its record names.
	// +kubebuilder:default=Always
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Pinned revision policy",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:Always","urn:alm:descriptor:com.tectonic.ui:select:Partial"}
	Policy RevisionPolicy `json:"policy,omitempty"`
}

// PatchPolicy says how a patched annotation meets a value the Pod already has.
// +kubebuilder:validation:Enum=Retain;Overwrite;MergePatchJson
type PatchPolicy string

const (
	// PatchPolicyRetain keeps the Pod's own value when it has the key. It is the default.
	PatchPolicyRetain PatchPolicy = "Retain"
	// PatchPolicyOverwrite sets the SidecarSet's value whatever the Pod has.
	PatchPolicyOverwrite PatchPolicy = "Overwrite"
	// PatchPolicyMergePatchJSON takes the value as a JSON object and merges it (RFC 7386 JSON
	// merge patch) into the Pod's value of the key, which must then be a JSON object too; a Pod
	// without the key gets the value as it is.
	PatchPolicyMergePatchJSON PatchPolicy = "MergePatchJson"
)

// PatchPodMetadata is a group of annotations patched onto injected Pods with one policy.
type PatchPodMetadata struct {
	// Annotations are the keys and values to patch.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// PatchPolicy is Retain (the default), Overwrite or MergePatchJson.
	// +kubebuilder:default=Retain
	// +optional
	PatchPolicy PatchPolicy `json:"patchPolicy,omitempty"`
}

// OverrideField is a field of a sidecar a Pod may override.
// +kubebuilder:validation:Enum=resources.requests.cpu;resources.requests.memory;resources.requests.ephemeral-storage;resources.limits.cpu;resources.limits.memory;resources.limits.ephemeral-storage;env
type OverrideField string

const (
	// OverrideRequestsCPU is the sidecar's CPU request.
	OverrideRequestsCPU OverrideField = "resources.requests.cpu"
	// OverrideRequestsMemory is the sidecar's memory request.
	OverrideRequestsMemory OverrideField = "resources.requests.memory"
	// OverrideRequestsEphemeralStorage is the sidecar's ephemeral-storage request.
	OverrideRequestsEphemeralStorage OverrideField = "resources.requests.ephemeral-storage"
	// OverrideLimitsCPU is the sidecar's CPU limit.
	OverrideLimitsCPU OverrideField = "resources.limits.cpu"
	// OverrideLimitsMemory is the sidecar's memory limit.
	OverrideLimitsMemory OverrideField = "resources.limits.memory"
	// OverrideLimitsEphemeralStorage is the sidecar's ephemeral-storage limit.
	OverrideLimitsEphemeralStorage OverrideField = "resources.limits.ephemeral-storage"
	// OverrideEnv is the value of the sidecar's environment variable envName.
	OverrideEnv OverrideField = "env"
)

// Override lets a Pod set one field of one sidecar by an annotation.
//
// +kubebuilder:validation:XValidation:rule="self.field == 'env' ? has(self.envName) : !has(self.envName)",message="set envName (the variable whose value the annotation sets) with field env, and only then",fieldPath=".envName"
// +kubebuilder:validation:XValidation:rule="has(self.rule) || !has(self.message)",message="message is shown when rule refuses a value; set rule too, or remove message",fieldPath=".message"
type Override struct {
	// Annotation is the Pod annotation that holds the value, a qualified name such as
	// proxy.example.com/cpu. Keys under sidecarset.io/ are the operator's own.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	Annotation string `json:"annotation"`
	// Container is the name of the set's container or init container the value goes into.
	// +required
	// +kubebuilder:validation:MinLength=1
	Container string `json:"container"`
	// Field is what the value sets: a request or limit (cpu, memory, ephemeral-storage),
	// whose value must be a Kubernetes quantity above zero, or env, the value of the
	// variable envName. The image is not offered: it is the set's to roll out.
	// +required
	Field OverrideField `json:"field"`
	// EnvName is the environment variable whose value the annotation sets (field env): the
	// sidecar's own definition of it is replaced, or the variable is added when the sidecar
	// has none.
	// +optional
	// +kubebuilder:validation:MinLength=1
	EnvName string `json:"envName,omitempty"`
	// Rule is a CEL expression that must be true for a value to be used: value is the
	// annotation's value (a string) and, for a resource field, amount is it as a Kubernetes
	// quantity, e.g. `amount.compareTo(quantity('2')) <= 0` or `value in ['debug', 'info']`.
	// The Kubernetes quantity library and the CEL strings extension are available.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Rule string `json:"rule,omitempty"`
	// Message is what the refusal of a Pod whose value the rule does not allow says, e.g.
	// "at most 2 CPUs".
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message,omitempty"`
}

// PodInjectPolicy says where a sidecar container goes relative to the app containers.
// +kubebuilder:validation:Enum=BeforeAppContainer;AfterAppContainer
type PodInjectPolicy string

const (
	// BeforeAppContainer puts the sidecar in front of the app containers.
	BeforeAppContainer PodInjectPolicy = "BeforeAppContainer"
	// AfterAppContainer puts the sidecar after the app containers, so `kubectl exec` and
	// `kubectl logs` keep defaulting to the app. It is the default.
	AfterAppContainer PodInjectPolicy = "AfterAppContainer"
)

// ShareVolumePolicyType says whether a sidecar mounts the app containers' volume mounts.
// +kubebuilder:validation:Enum=enabled;disabled
type ShareVolumePolicyType string

const (
	// ShareVolumePolicyEnabled mounts every volume mount of the app containers into the sidecar
	// too (a log agent reading the app's log directory, for example).
	ShareVolumePolicyEnabled ShareVolumePolicyType = "enabled"
	// ShareVolumePolicyDisabled mounts only the sidecar's own volume mounts. It is the default.
	ShareVolumePolicyDisabled ShareVolumePolicyType = "disabled"
)

// ShareVolumePolicy says whether a sidecar mounts the app containers' volume mounts (as
// shareVolumePolicy) or gets their volume devices (as shareVolumeDevicePolicy).
type ShareVolumePolicy struct {
	// Type is enabled or disabled.
	// +kubebuilder:default=disabled
	// +optional
	Type ShareVolumePolicyType `json:"type,omitempty"`
}

// TransferEnvVar copies environment variables of an app container into the sidecar: the app
// container is named by sourceContainerName, or read from the Pod by sourceContainerNameFrom;
// the variables are envName, or envNames.
//
// +kubebuilder:validation:XValidation:rule="has(self.sourceContainerName) || has(self.sourceContainerNameFrom)",message="set sourceContainerName to the app container's name, or sourceContainerNameFrom to read it from the Pod",fieldPath=".sourceContainerName"
// +kubebuilder:validation:XValidation:rule="!(has(self.sourceContainerName) && has(self.sourceContainerNameFrom))",message="sourceContainerName and sourceContainerNameFrom are mutually exclusive; keep one of them",fieldPath=".sourceContainerNameFrom"
// +kubebuilder:validation:XValidation:rule="has(self.envName) || has(self.envNames)",message="set envName to the variable to copy, or envNames to several",fieldPath=".envName"
// +kubebuilder:validation:XValidation:rule="!(has(self.envName) && has(self.envNames))",message="envName and envNames are mutually exclusive; list every variable in envNames",fieldPath=".envNames"
type TransferEnvVar struct {
	// SourceContainerName is the app container to copy the variables from.
	// +optional
	// +kubebuilder:validation:MinLength=1
	SourceContainerName string `json:"sourceContainerName,omitempty"`
	// SourceContainerNameFrom reads the name of the app container to copy from out of the Pod
	// (one of its labels or annotations, or its name), so that one SidecarSet serves Pods whose
	// app containers are named differently. When the Pod lacks that label or annotation, or
	// has no app container of the name it holds, nothing is copied and the admission warns.
	// +optional
	SourceContainerNameFrom *SourceContainerNameSource `json:"sourceContainerNameFrom,omitempty"`
	// EnvName is the variable to copy. When the app container does not define it, nothing is
	// copied.
	// +optional
	// +kubebuilder:validation:MinLength=1
	EnvName string `json:"envName,omitempty"`
	// EnvNames are several variables to copy from the same app container, each as envName is.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	EnvNames []string `json:"envNames,omitempty"`
}

// SourceContainerNameSource says where the Pod names the app container to copy from.
type SourceContainerNameSource struct {
	// FieldRef selects the field of the Pod that holds the container's name: metadata.name,
	// metadata.labels['<key>'] or metadata.annotations['<key>']. apiVersion, when set, is v1.
	// A Pod created with generateName has no name yet when it is injected.
	// +required
	// +kubebuilder:validation:XValidation:rule="!has(self.apiVersion) || self.apiVersion == 'v1'",message="apiVersion must be v1 (the Pod's API version), or left out",fieldPath=".apiVersion"
	// +kubebuilder:validation:XValidation:rule="self.fieldPath == 'metadata.name' || ((self.fieldPath.startsWith(\"metadata.labels['\") || self.fieldPath.startsWith(\"metadata.annotations['\")) && self.fieldPath.endsWith(\"']\"))",message="fieldPath must be metadata.name, metadata.labels['<key>'] or metadata.annotations['<key>']",fieldPath=".fieldPath"
	FieldRef *corev1.ObjectFieldSelector `json:"fieldRef"`
}

// SidecarContainer is a container to inject, with how to inject it.
//
// +kubebuilder:validation:XValidation:rule="!has(self.resourcesPolicy) || !has(self.resources) || ((!has(self.resources.requests) || size(self.resources.requests) == 0) && (!has(self.resources.limits) || size(self.resources.limits) == 0))",message="resourcesPolicy and resources.requests/limits are mutually exclusive: keep resourcesPolicy to compute the sidecar's requests and limits from the app containers, or resources for fixed ones",fieldPath=".resourcesPolicy"
type SidecarContainer struct {
	corev1.Container `json:",inline"`

	// PodInjectPolicy puts the container before or after the Pod's own containers; for an init
	// container, before or after the Pod's own init containers (a native-sidecar proxy usually
	// goes before them, so that they already have its network).
	// +kubebuilder:default=AfterAppContainer
	// +optional
	PodInjectPolicy PodInjectPolicy `json:"podInjectPolicy,omitempty"`

	// ShareVolumePolicy mounts the app containers' volume mounts into this container too.
	// +optional
	ShareVolumePolicy ShareVolumePolicy `json:"shareVolumePolicy,omitempty"`

	// ShareVolumeDevicePolicy gives this container the app containers' volume devices (raw
	// block volumes) too, at the same device paths: enabled or disabled, the default. A device
	// at a path or of a volume this container already uses (for a mount or another device) is
	// left out; the Pod's sidecarset.io/status annotation lists it under notShared and the
	// admission warns. Unset, it leaves the set's hash as it was before the field existed.
	// +optional
	ShareVolumeDevicePolicy *ShareVolumePolicy `json:"shareVolumeDevicePolicy,omitempty"`

	// TransferEnv copies environment variables from app containers into this container.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	TransferEnv []TransferEnvVar `json:"transferEnv,omitempty"`

	// ResourcesPolicy computes this container's requests and limits, when a Pod is injected,
	// from the resources of the Pod's app containers (OpenKruise's resourcesPolicy). It is
	// mutually exclusive with resources.requests and resources.limits. On an init container it
	// is allowed only for a native sidecar (restartPolicy: Always). With updateStrategy
	// RollingUpdate, a running Pod whose app containers are resized in place gets its sidecar
	// resized to match. Unset, it leaves the set's hash as it was before the field existed.
	// +optional
	ResourcesPolicy *ResourcesPolicy `json:"resourcesPolicy,omitempty"`
}

// ResourcesPolicy computes a sidecar's requests and limits from the Pod's app containers.
type ResourcesPolicy struct {
	// TargetContainersMode combines the target containers' resources: sum (the default) adds
	// them up, max takes the largest.
	// +optional
	// +kubebuilder:default=sum
	TargetContainersMode TargetContainersMode `json:"targetContainersMode,omitempty"`

	// TargetContainersNameRegex selects the target containers by name (an RE2 regular
	// expression, matched anywhere in the name unless anchored with ^ and $): the Pod's own
	// containers and native sidecars (init containers with restartPolicy Always), never the
	// containers this SidecarSet injects. ".*" when unset. A Pod none of whose containers
	// matches is refused.
	// +optional
	// +kubebuilder:default=".*"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	TargetContainersNameRegex string `json:"targetContainersNameRegex,omitempty"`

	// ResourcesExpr holds the CEL expressions that compute the requests and limits.
	// +required
	ResourcesExpr ResourcesExpr `json:"resourcesExpr"`
}

// TargetContainersMode is how a resourcesPolicy combines the target containers' resources.
// +kubebuilder:validation:Enum=sum;max
type TargetContainersMode string

const (
	// TargetContainersSum adds the target containers' resources up.
	TargetContainersSum TargetContainersMode = "sum"
	// TargetContainersMax takes the largest of the target containers' resources.
	TargetContainersMax TargetContainersMode = "max"
)

// ResourcesExpr maps resource names (cpu, memory) to CEL expressions computing a sidecar's
// requests and limits. An expression for cpu sees the variable cpu, the target containers'
// combined cpu in cores (0.5 for 500m); one for memory sees memory, in bytes. Request
// expressions see the combined requests (a container without a request counts as zero, one
// with only a limit requests its limit), limit expressions the combined limits. When a target
// container has no limit for a resource (it is unlimited), the combined limit is unlimited:
// the limit expression for that resource is not evaluated and the sidecar gets no limit for
// it. Numbers are doubles (write 2.0, not 2); quantity('50m') is a quantity in the same unit
// (0.05), 50% of Kruise is 0.5; max(a, b, ...) and min(a, b, ...) take 2 to 8 arguments. The
// result is rounded up to a whole millicore or byte; a negative, infinite or NaN result
// refuses the Pod.
// +kubebuilder:validation:XValidation:rule="(has(self.requests) && size(self.requests) > 0) || (has(self.limits) && size(self.limits) > 0)",message="set an expression in requests or limits (or both), such as limits.cpu: max(cpu * 0.5, quantity('50m'))"
type ResourcesExpr struct {
	// Requests are the expressions of the sidecar's requests, by resource name.
	// +optional
	// +kubebuilder:validation:MaxProperties=2
	// +kubebuilder:validation:XValidation:rule="self.all(k, k == 'cpu' || k == 'memory')",message="only cpu and memory can be computed from the app containers; use resource names cpu and memory"
	Requests map[corev1.ResourceName]ResourceExpression `json:"requests,omitempty"`
	// Limits are the expressions of the sidecar's limits, by resource name.
	// +optional
	// +kubebuilder:validation:MaxProperties=2
	// +kubebuilder:validation:XValidation:rule="self.all(k, k == 'cpu' || k == 'memory')",message="only cpu and memory can be computed from the app containers; use resource names cpu and memory"
	Limits map[corev1.ResourceName]ResourceExpression `json:"limits,omitempty"`
}

// ResourceExpression is a CEL expression computing one resource of a sidecar (see
// ResourcesExpr).
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=512
type ResourceExpression string

// SidecarSetStatus is what the operator observed. The pod counts follow these definitions:
//
//   - a Pod is matched when it is not terminating, not Succeeded or Failed, carries the opt-in
//     label sidecarset.io/inject=true, matches spec.selector and spec.namespaceSelector, and
//     is in a namespace the pod webhook serves (not kube-system, not the operator's own, not
//     labelled sidecarset.io/injection=disabled): matched pods are the pods this set can reach;
//   - excluded: would be matched but for its namespace, which the webhook never serves;
//   - updated: matched and injected by this SidecarSet with its current hash;
//   - ready: matched, injected by this SidecarSet (any hash), and its Ready condition is True;
//   - updatedReady: both updated and ready, and no sidecar of this set is reported by the
//     kubelet running another image than the set declares;
//   - unavailable: matched and not Ready, or updated and not yet running the new images.
type SidecarSetStatus struct {
	// ObservedGeneration is the metadata.generation these counts were computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// MatchedPods is the number of matched Pods.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Matched pods",xDescriptors="urn:alm:descriptor:text"
	// +optional
	// +kubebuilder:default=0
	MatchedPods int32 `json:"matchedPods"`

	// ExcludedPods is the number of opted-in Pods the selectors match in namespaces the pod
	// webhook never serves (kube-system, the operator's own namespace, namespaces labelled
	// sidecarset.io/injection=disabled). They are not counted as matched: they can never be
	// injected.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Excluded pods",xDescriptors="urn:alm:descriptor:text"
	// +optional
	ExcludedPods int32 `json:"excludedPods,omitempty"`

	// UpdatedPods is the number of matched Pods injected with the current hash.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Updated pods",xDescriptors="urn:alm:descriptor:text"
	// +optional
	// +kubebuilder:default=0
	UpdatedPods int32 `json:"updatedPods"`

	// ReadyPods is the number of matched Pods injected by this SidecarSet and Ready.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Ready pods",xDescriptors="urn:alm:descriptor:text"
	// +optional
	// +kubebuilder:default=0
	ReadyPods int32 `json:"readyPods"`

	// UpdatedReadyPods is the number of Pods that are both updated and ready.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Updated ready pods",xDescriptors="urn:alm:descriptor:text"
	// +optional
	// +kubebuilder:default=0
	UpdatedReadyPods int32 `json:"updatedReadyPods"`

	// NotInjectedPods is the number of matched Pods that carry no injection of this
	// SidecarSet: created before it, while its injection was paused, or while the webhook
	// could not be reached. updateStrategy.remediate: Evict recreates them.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Pods not injected",xDescriptors="urn:alm:descriptor:text"
	NotInjectedPods int32 `json:"notInjectedPods,omitempty"`

	// SidecarResources is what this SidecarSet's sidecars request and limit (cpu, memory,
	// ephemeral-storage), summed over the Pods it injected, as their specs say now (an
	// in-place resize counts once the Pod's spec changes). Regular and native sidecars count;
	// plain init containers, which end before the app starts, do not, and neither does a
	// container the Pod brought itself under a sidecar's name. A sidecar without a limit adds
	// nothing to limits. Absent while the set has injected no Pod that is not being deleted.
	// The operator's sidecarset_sidecar_resource_* metrics give the same per namespace.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Sidecar resources",xDescriptors="urn:alm:descriptor:text"
	SidecarResources *SidecarResources `json:"sidecarResources,omitempty"`

	// UnavailablePods is the number of matched Pods that are not Ready, or whose kubelet does not
	// yet run the images their spec names. A rolling update never takes a namespace's
	// unavailable Pods beyond maxUnavailable.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Unavailable pods",xDescriptors="urn:alm:descriptor:text"
	// +optional
	// +kubebuilder:default=0
	UnavailablePods int32 `json:"unavailablePods"`

	// Hash identifies the current injected content (containers, init containers, volumes and
	// pull secrets). Pods record the hash they were injected with in the sidecarset.io/status
	// annotation.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Hash",xDescriptors="urn:alm:descriptor:text"
	Hash string `json:"hash,omitempty"`

	// UpdateRevision is the ControllerRevision (in the operator's namespace) that stores the
	// current content: what new Pods get and what a rolling update moves Pods to.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Update revision",xDescriptors="urn:alm:descriptor:text"
	UpdateRevision string `json:"updateRevision,omitempty"`

	// Recreating are the workloads (by their controller's UID) of which the rolling update
	// evicted a Pod (updateStrategy.recreate or remediate: Evict) and whose Pods are not all
	// available again, with when it evicted. The rollout writes an entry before it evicts and
	// removes it once the workload's Pods are available again; an operator that restarts, or a
	// new leader, reads them, so the budget and progressDeadlineSeconds hold across both.
	// +optional
	// +listType=map
	// +listMapKey=uid
	// +kubebuilder:validation:MaxItems=10000
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Workloads being recreated",xDescriptors="urn:alm:descriptor:text"
	Recreating []RecreatingWorkload `json:"recreating,omitempty"`

	// Refusals are the pods the pod webhook refused because of this SidecarSet, one entry per
	// operator replica that refused any (each replica writes only its own, by server-side
	// apply), in the current episode: an entry starts afresh when its replica refuses a pod
	// after a quiet period. The Refusing condition sums them up.
	// +optional
	// +listType=map
	// +listMapKey=replica
	// +kubebuilder:validation:MaxItems=64
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Pods refused",xDescriptors="urn:alm:descriptor:text"
	Refusals []ReplicaRefusals `json:"refusals,omitempty"`

	// Images are, for a set with imagePolicy.pin Digest, the digests its images resolved to:
	// the Pods it injects name them. The operator resolves each image once and again only when
	// the set is refreshed (the sidecarset.io/refresh-images annotation).
	// +optional
	// +listType=map
	// +listMapKey=image
	// +kubebuilder:validation:MaxItems=64
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Pinned images",xDescriptors="urn:alm:descriptor:text"
	Images []ResolvedImage `json:"images,omitempty"`

	// ImagesRefreshed is the value of the sidecarset.io/refresh-images annotation the images
	// were last resolved for.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Images refreshed for",xDescriptors="urn:alm:descriptor:text"
	ImagesRefreshed string `json:"imagesRefreshed,omitempty"`

	// Conditions are the latest observations: Ready (the summary), Paused, PodsUpdated and
	// PodsReady; RollingUpdate for updateStrategy RollingUpdate; Conflict while one lasts;
	// Invalid when the spec cannot be used; PolicyCompiled in policy mode.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors="urn:alm:descriptor:io.kubernetes.conditions"
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ReplicaRefusals is what one operator replica's pod webhook refused because of a SidecarSet.
type ReplicaRefusals struct {
	// Replica is the operator replica (its pod's name) that refused the pods.
	// +kubebuilder:validation:MaxLength=253
	Replica string `json:"replica"`
	// Generation is the SidecarSet's metadata.generation the refusals were made under: a
	// refusal under an older spec says nothing of the current one.
	// +optional
	Generation int64 `json:"generation,omitempty"`
	// Count is how many pod creations it refused since Since.
	Count int64 `json:"count"`
	// Since is when it refused the first of them.
	Since metav1.Time `json:"since"`
	// Last is when it refused the latest.
	Last metav1.Time `json:"last"`
	// Reason is why it refused the latest, from the engine's catalog of refusal reasons
	// (ContainerClash, PortClash, LimitRange, ...; see docs/concepts.md).
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason"`
	// Message is the latest refusal's message, as the pod's creator read it: it names the
	// SidecarSet, the field and the fix, never the pod.
	// +kubebuilder:validation:MaxLength=2048
	Message string `json:"message"`
	// Namespaces are the namespaces of the refused pods, the most recent first (at most 10).
	// +optional
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=63
	Namespaces []string `json:"namespaces,omitempty"`
	// Workloads are the refused pods' controllers as namespace/Kind/name, the most recent first
	// (at most 10); a pod without a controller is not listed.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=400
	Workloads []string `json:"workloads,omitempty"`
}

// RecreatingWorkload is a workload the rolling update evicted a Pod of, identified by its
// controller's UID only: the status, which anyone who may read SidecarSets reads, names no
// namespace, workload or Pod.
type RecreatingWorkload struct {
	// UID is the UID of the Pod's controller (a ReplicaSet, StatefulSet, ...).
	// +kubebuilder:validation:MaxLength=128
	UID string `json:"uid"`
	// EvictedAt is when the rollout evicted the workload's Pod; progressDeadlineSeconds counts
	// from it.
	EvictedAt metav1.Time `json:"evictedAt"`
}

// SidecarSet injects sidecar containers, init containers, volumes and image pull secrets into
// the Pods it selects when they are created. Its name is at most 63 characters: it is a label
// value on the set's revisions and admission policies (the rule is checked at create, so a set
// stored before keeps its status writes).
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=scs
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Matched",type=integer,JSONPath=`.status.matchedPods`,description="Matched pods"
// +kubebuilder:printcolumn:name="Updated",type=integer,JSONPath=`.status.updatedPods`,description="Matched pods injected with the current hash"
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyPods`,description="Matched, injected and Ready pods"
// +kubebuilder:printcolumn:name="Unavailable",type=integer,JSONPath=`.status.unavailablePods`,description="Matched pods not Ready, or updated and not yet running the new images"
// +kubebuilder:printcolumn:name="Refusing",type=string,JSONPath=`.status.conditions[?(@.type=="Refusing")].reason`,description="Why the pod webhook refuses pods the set selects, while it does (condition Refusing)"
// +kubebuilder:printcolumn:name="Rollout",type=string,JSONPath=`.status.conditions[?(@.type=="RollingUpdate")].reason`,description="Where a rolling update of running pods stands (updateStrategy RollingUpdate)"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="SidecarSet",resources={{Pod,v1,""}}
// +kubebuilder:validation:XValidation:rule="oldSelf.hasValue() || size(self.metadata.name) <= 63",optionalOldSelf=true,message="metadata.name must be at most 63 characters (a SidecarSet's name labels its revisions and policies); choose a shorter name"
type SidecarSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   SidecarSetSpec   `json:"spec"`
	Status SidecarSetStatus `json:"status,omitempty"`
}

// SidecarSetList is a list of SidecarSets.
//
// +kubebuilder:object:root=true
type SidecarSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SidecarSet `json:"items"`
}

// SidecarResources sums what a SidecarSet's sidecars request and limit over the Pods it
// injected.
type SidecarResources struct {
	// Pods is the number of Pods counted: injected by this SidecarSet, not being deleted.
	Pods int32 `json:"pods"`
	// Requests sums the sidecars' requests.
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
	// Limits sums the sidecars' limits.
	// +optional
	Limits corev1.ResourceList `json:"limits,omitempty"`
}

// Condition types and reasons written to SidecarSet status.
const (
	// ConditionPaused is True while spec.injectionStrategy.paused stops injection.
	ConditionPaused = "Paused"
	// ConditionPodsUpdated is True when every matched Pod carries the current hash.
	ConditionPodsUpdated = "PodsUpdated"
	// ConditionPodsReady is True when every matched Pod is injected and Ready, and its kubelet
	// runs the sidecar images its spec names (a Pod that reports Ready while an old sidecar
	// container still stops after an in-place update is not counted Ready here).
	ConditionPodsReady = "PodsReady"
	// ConditionInvalid is True when the spec cannot be used (possible only when it was written
	// while the validating webhook was down); such a SidecarSet injects nothing.
	ConditionInvalid = "Invalid"
	// ConditionImagesPinned, for a set with imagePolicy.pin Digest, is True when every image
	// is pinned to a digest (reason Pinned, or TagMoved when a tag names another digest now;
	// the message names them), False while an image waits to be resolved (reason Resolving;
	// the message names it and why). Absent for other sets.
	ConditionImagesPinned = "ImagesPinned"
	// ConditionConflict is True while the SidecarSet clashes with another one that can select
	// the same Pods (a container name, a volume defined two ways, a host port): possible when
	// both were written at the same moment, or while the validating webhook was down. The
	// older SidecarSet keeps injecting (reason ConflictWithNewer); the newer one injects
	// nothing until the conflict is resolved (reason StoppedByConflict). The message names the
	// other SidecarSet and the fields.
	ConditionConflict = "Conflict"
	// ConditionPolicyCompiled, in the operator's policy mode, is True when the SidecarSet's
	// MutatingAdmissionPolicy injects the pods it alone selects (reason Compiled), False when
	// every pod it selects goes to the webhook because CEL cannot inject it as the webhook does
	// (reason Unsupported; the message names the field). Absent in webhook mode.
	ConditionPolicyCompiled = "PolicyCompiled"
	// ConditionRollingUpdate reports, for updateStrategy RollingUpdate, whether running Pods
	// are being updated in place: True while updates remain or Pods restart (reason
	// Progressing, or Paused); False when there is nothing left to update (reason Complete,
	// only once the kubelet runs the new sidecars, Ready, in every updated Pod; or
	// PodsNotUpdatable when some outdated Pods cannot take the change in place; the message counts them by namespace
	// and never names a Pod, as anyone who may read SidecarSets reads it; each such Pod gets a
	// PodNotUpdatable event saying why).
	ConditionRollingUpdate = "RollingUpdate"
	// ConditionRefusing is True while the pod webhook refuses pods this SidecarSet selects (a
	// clash with the pods' containers, ports or volumes, a LimitRange, a pod's override; see
	// status.refusals): its reason is the latest refusal's, from the engine's catalog, and its
	// message counts the pods and names the namespaces and workloads. It turns False (reason
	// NoRecentRefusals) once no pod was refused for 10 minutes, or none since the spec changed. It does not change Ready: the
	// set still injects the pods it does not refuse.
	ConditionRefusing = "Refusing"
	// ConditionReady summarises the others for `kubectl wait --for=condition=Ready`, GitOps tools
	// and kstatus: True (reason Injecting, or InjectionPaused) when the set is valid, injects
	// (no conflict stops it) and has no rolling update left to do; False with reason Invalid,
	// StoppedByConflict, RollingUpdateProgressing, RollingUpdatePaused or PodsNotUpdatable
	// otherwise; in policy mode also PolicyPending or PolicyNameTaken while the set's
	// MutatingAdmissionPolicy is not in force (a pod created then may get no sidecar). Pods' own readiness is PodsReady's, not this: a set is ready when it does its
	// part. Its observedGeneration says which spec it describes.
	ConditionReady = "Ready"
	// ConditionReconciling is kstatus's "abnormal-true" condition (what Flux and other
	// kstatus readers wait on): True while Ready is False for a reason that clears without a
	// person (a rolling update progressing, images being resolved or verified, a policy not yet
	// in force), with Ready's reason and message; False otherwise, with Ready's reason. A
	// paused set is not reconciling: it does what its spec says.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is kstatus's "abnormal-true" condition for a set that makes no progress
	// until a person acts: True, with Ready's reason and message, while Ready says Invalid,
	// StoppedByConflict, PodsNotUpdatable, RollingUpdateHalted, PolicyNameTaken, or
	// ImagesNotVerified after a signature failed to verify; False otherwise, with Ready's
	// reason.
	ConditionStalled = "Stalled"
)

// RevisionPolicy says which new Pods get a pinned revision.
// +kubebuilder:validation:Enum=Always;Partial
type RevisionPolicy string

const (
	// RevisionPolicyAlways gives every new Pod the pinned revision. It is the default.
	RevisionPolicyAlways RevisionPolicy = "Always"
	// RevisionPolicyPartial gives the pinned revision to the new Pods that the update strategy
	// leaves out (see RevisionRef.Policy), and the current spec to the others.
	RevisionPolicyPartial RevisionPolicy = "Partial"
)
