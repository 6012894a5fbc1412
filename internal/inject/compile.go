package inject

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// CompiledSet is a SidecarSet prepared for repeated matching: its selectors parsed once and its
// hash computed once. It is read-only and safe to share between goroutines.
type CompiledSet struct {
	// Set is the SidecarSet; never modified.
	Set *appsv1alpha1.SidecarSet
	// Hash identifies the injected content (see Hash).
	Hash string
	// TransfersEnv: a sidecar has transferEnv, so injection reads the app containers' env.
	TransfersEnv bool
	// SharesVolumes: a sidecar has shareVolumePolicy enabled, so injection reads the app
	// containers' volume mounts (and the env their subPathExprs use).
	SharesVolumes bool
	// SharesDevices: a sidecar has shareVolumeDevicePolicy enabled, so injection reads the
	// app containers' volume devices.
	SharesDevices bool
	// ComparesPorts: a sidecar declares ports, so injection reads the ports of the pod's
	// containers (a container port, a port name or a host port they declare already).
	ComparesPorts bool
	// DeclaresResources: a sidecar declares requests or limits, or computes them
	// (resourcesPolicy), so injection into a pod that sets pod-level resources (spec.resources)
	// reads its containers' resources.
	DeclaresResources bool
	// resourcesPolicies: sidecar name -> its compiled resourcesPolicy (sidecars that have one).
	resourcesPolicies map[string]*resourcesPolicy

	selector          labels.Selector
	namespaceSelector labels.Selector    // nil: every namespace
	overrides         []compiledOverride // spec.overrides, their rules compiled
	// latest is the current spec, compiled, of a set that pins a revision with policy Partial
	// (see Pick), and updateSelector its update strategy's selector; nil otherwise.
	latest         *CompiledSet
	updateSelector labels.Selector
}

// Name is the SidecarSet's name.
func (c *CompiledSet) Name() string { return c.Set.Name }

// HasNamespaceSelector reports whether matching needs the labels of the Pod's namespace.
func (c *CompiledSet) HasNamespaceSelector() bool { return c.namespaceSelector != nil }

// Compile parses a SidecarSet's selectors and computes its hash. It fails on selectors the
// validating webhook would have refused. A set pinning digests (imagePolicy.pin Digest) is
// compiled with its images pinned to the digests status.images gives (c.Set is then a copy);
// while one has none, Compile returns an *ImagesNotResolvedError.
func Compile(set *appsv1alpha1.SidecarSet) (*CompiledSet, error) {
	if set.Spec.Selector == nil {
		return nil, fmt.Errorf("SidecarSet %q: spec.selector is required", set.Name)
	}
	// A set pinning digests injects, hashes and stores its images pinned.
	set, err := pinDigests(set)
	if err != nil {
		return nil, err
	}
	sel, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("SidecarSet %q: spec.selector: %w", set.Name, err)
	}
	if sel.Empty() {
		return nil, fmt.Errorf("SidecarSet %q: spec.selector must not be empty", set.Name)
	}
	c := &CompiledSet{Set: set, selector: sel, Hash: Hash(&set.Spec)}
	for _, list := range [][]appsv1alpha1.SidecarContainer{set.Spec.Containers, set.Spec.InitContainers} {
		for i := range list {
			c.TransfersEnv = c.TransfersEnv || len(list[i].TransferEnv) > 0
			c.SharesVolumes = c.SharesVolumes || list[i].ShareVolumePolicy.Type == appsv1alpha1.ShareVolumePolicyEnabled
			c.SharesDevices = c.SharesDevices || SharesDevices(&list[i])
			c.ComparesPorts = c.ComparesPorts || len(list[i].Ports) > 0
			c.DeclaresResources = c.DeclaresResources || len(list[i].Resources.Requests) > 0 || len(list[i].Resources.Limits) > 0
			if err := c.compileResourcesPolicy(&list[i]); err != nil {
				return nil, err
			}
		}
	}
	if c.overrides, err = compileOverrides(&set.Spec); err != nil {
		return nil, fmt.Errorf("SidecarSet %q: %w", set.Name, err)
	}
	for i := range c.overrides {
		// An overridden request or limit is added up with the pod's like a declared one.
		_, _, resourceField := ResourceOverride(c.overrides[i].Field)
		c.DeclaresResources = c.DeclaresResources || resourceField
	}
	if set.Spec.NamespaceSelector != nil {
		if c.namespaceSelector, err = metav1.LabelSelectorAsSelector(set.Spec.NamespaceSelector); err != nil {
			return nil, fmt.Errorf("SidecarSet %q: spec.namespaceSelector: %w", set.Name, err)
		}
	}
	return c, nil
}

// hashedContent is the part of a spec that ends up in a Pod. Selectors and the injection
// strategy are left out: changing who gets injected does not make injected Pods outdated.
type hashedContent struct {
	Containers       []appsv1alpha1.SidecarContainer `json:"containers,omitempty"`
	InitContainers   []appsv1alpha1.SidecarContainer `json:"initContainers,omitempty"`
	Volumes          []corev1.Volume                 `json:"volumes,omitempty"`
	ImagePullSecrets []corev1.LocalObjectReference   `json:"imagePullSecrets,omitempty"`
	// PatchPodMetadata is left out of the JSON when empty, so a set without it keeps the hash
	// it had before the field existed.
	PatchPodMetadata []appsv1alpha1.PatchPodMetadata `json:"patchPodMetadata,omitempty"`
	// Overrides too: which fields pods may set, and to what, is part of what a set injects.
	Overrides []appsv1alpha1.Override `json:"overrides,omitempty"`
}

// Content is what a SidecarSet injects, as JSON: its containers, init containers, volumes,
// pull secrets, patched annotations and the overrides pods may make. It is what Hash digests and what a stored revision holds (WithContent).
func Content(spec *appsv1alpha1.SidecarSetSpec) []byte {
	raw, err := json.Marshal(hashedContent{
		Containers:       spec.Containers,
		InitContainers:   spec.InitContainers,
		Volumes:          spec.Volumes,
		ImagePullSecrets: spec.ImagePullSecrets,
		PatchPodMetadata: spec.PatchPodMetadata,
		Overrides:        spec.Overrides,
	})
	if err != nil {
		// These are plain API structs; encoding/json cannot fail on them.
		panic(fmt.Sprintf("encoding SidecarSet content: %v", err))
	}
	return raw
}

// WithContent returns a copy of set whose injected content is content (from Content).
func WithContent(set *appsv1alpha1.SidecarSet, content []byte) (*appsv1alpha1.SidecarSet, error) {
	var c hashedContent
	if err := json.Unmarshal(content, &c); err != nil {
		return nil, fmt.Errorf("decoding SidecarSet content: %w", err)
	}
	out := set.DeepCopy()
	out.Spec.Containers, out.Spec.InitContainers, out.Spec.Volumes, out.Spec.ImagePullSecrets = c.Containers, c.InitContainers, c.Volumes, c.ImagePullSecrets
	out.Spec.PatchPodMetadata = c.PatchPodMetadata
	out.Spec.Overrides = c.Overrides
	// Stored content is injected as stored: its images were pinned, if ever, when it was.
	out.Spec.ImagePolicy = nil
	return out, nil
}

// Hash identifies what a SidecarSet injects: a digest of its containers, init containers,
// volumes, pull secrets, patched annotations and overrides. Pods record it in the status annotation and status.hash reports
// it, so a Pod is "updated" exactly when it was injected with today's content.
func Hash(spec *appsv1alpha1.SidecarSetSpec) string {
	sum := sha256.Sum256(Content(spec))
	return hex.EncodeToString(sum[:8])
}
