package rollout

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/revision"
	"github.com/sidecarset/sidecarset-operator/internal/snapshot"
)

// InPlaceEnv is what, besides the Pod and the SidecarSets, decides whether a Pod can take a
// set's current spec in place.
type InPlaceEnv struct {
	// Revisions is true when the operator stores the revisions Pods were injected with (it
	// knows its namespace).
	Revisions bool
	// Resize is true when the API server serves pods/resize (in-place resize, Kubernetes
	// 1.33 and later).
	Resize bool
	// KubeletVersion returns the version of a node's kubelet, nil when it is not known (the
	// node is gone, or reports none that parses). Asked only for a Pod whose update changes a
	// native sidecar's image.
	KubeletVersion func(node string) (*version.Version, error)
	// AllowedAnnotations are the annotation keys sets may patch onto pods (the pod webhook's);
	// nil allows none.
	AllowedAnnotations *inject.KeyAllowList
}

// Refusal is why a Pod cannot take the set's current spec in place ("" when it can), and
// whether a Pod created now would have it: then recreating the Pod applies the change
// (updateStrategy.recreate).
type Refusal struct {
	Why         string
	Recreatable bool
}

// PlanInPlace works out the in-place update that brings pod to set c's current spec, or why
// there is none. snap holds the SidecarSets that may apply to the Pod besides c; injected is c
// as it was when it injected the Pod (its stored revision), nil when that is not known. The
// error is KubeletVersion's.
func PlanInPlace(snap *snapshot.Snapshot, c *inject.CompiledSet, pod *corev1.Pod, namespaceLabels map[string]string,
	injected *inject.CompiledSet, env InPlaceEnv) (*inject.InPlace, Refusal, error) {
	// The rollout moves pods to the set's current spec, even when new pods get a pinned revision.
	candidates := inject.Candidates(snap.Sets, pod.Labels)
	for i := range candidates {
		if candidates[i].Name() == c.Name() {
			candidates[i] = c
		}
	}
	setByName := func(name string) (*inject.CompiledSet, bool) {
		if name == c.Name() {
			return c, true
		}
		return snap.Get(name)
	}
	u, err := inject.UpdateInPlace(inject.Input{Pod: pod, Sets: candidates, NamespaceLabels: namespaceLabels, SetByName: setByName,
		AllowedAnnotations: env.AllowedAnnotations}, c.Name(), injected)
	switch {
	case err != nil:
		return nil, Refusal{Why: err.Error()}, nil //nolint:nilerr // the engine's refusal is why the pod is not updatable, not an error
	case u.Current() && len(u.Resources) == 0 && len(u.Blocked) == 0:
		return u, Refusal{}, nil
	case len(u.Blocked) > 0:
		// Recreating a Pod whose injected content is unknown could throw away an edit.
		return nil, Refusal{Why: strings.Join(u.Blocked, "; "), Recreatable: u.Recreatable && injected != nil}, nil
	case injected == nil && !u.Current():
		// Without the content the Pod was injected with, a sidecar someone edited since (a
		// hotfix with kubectl set image) cannot be told from ours: never overwrite it.
		return nil, Refusal{Why: unknownInjection(pod, c, env.Revisions)}, nil
	}
	if len(u.Resources) > 0 && !env.Resize {
		return nil, Refusal{Why: NoResize, Recreatable: true}, nil
	}
	if why := u.ResizeRefusal(); why != "" {
		return nil, Refusal{Why: why, Recreatable: true}, nil
	}
	if why, err := refusesNativeSidecarImages(pod, u, env.KubeletVersion); why != "" || err != nil {
		return nil, Refusal{Why: why, Recreatable: true}, err
	}
	return u, Refusal{}, nil
}

// NoResize is why a sidecar's new resources cannot reach a running pod on an API server
// without in-place resize.
const NoResize = "the sidecar's resources changed and this API server does not serve pods/resize (in-place resize, Kubernetes 1.33 and later); recreate the pod to update it"

// unknownInjection says why a Pod whose injected content is not known is left alone.
func unknownInjection(pod *corev1.Pod, c *inject.CompiledSet, revisions bool) string {
	if !revisions {
		return "the operator stores no revisions (it runs without POD_NAMESPACE), so a sidecar edited since injection cannot be told apart; recreate the pod to update it"
	}
	hash, _ := inject.InjectedHash(pod.Annotations, c.Name())
	return fmt.Sprintf("the revision it was injected with (%s) is not stored, so a sidecar edited since injection cannot be told apart; recreate the pod to update it", revision.Name(c.Name(), hash))
}

// nativeSidecarRestartVersion is the first kubelet that restarts a native sidecar (a
// restartable init container) whose image changed in the Pod's spec. An older kubelet accepts
// the patch and restarts nothing: the sidecar would never run the new image.
var nativeSidecarRestartVersion = version.MustParseGeneric("1.32.0")

// refusesNativeSidecarImages says why the Pod's node cannot apply the update when it changes
// a native sidecar's image and the node's kubelet is older than 1.32; empty when it can, when
// the Pod is not scheduled yet (it starts with the patched spec), or when the node does not
// report a version it can be judged by.
func refusesNativeSidecarImages(pod *corev1.Pod, u *inject.InPlace, kubeletVersion func(string) (*version.Version, error)) (string, error) {
	if pod.Spec.NodeName == "" || !changesNativeSidecarImage(u) || kubeletVersion == nil {
		return "", nil
	}
	v, err := kubeletVersion(pod.Spec.NodeName)
	if err != nil || v == nil || !v.LessThan(nativeSidecarRestartVersion) {
		return "", err
	}
	return fmt.Sprintf("node %s runs kubelet v%s, which does not restart a native sidecar (an init container with restartPolicy Always) whose image changes (kubelets from v1.32 do); recreate the pod, or update the node", pod.Spec.NodeName, v), nil
}

func changesNativeSidecarImage(u *inject.InPlace) bool {
	for _, img := range u.Images {
		if img.Init {
			return true
		}
	}
	return false
}
