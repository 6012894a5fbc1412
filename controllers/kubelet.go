package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get

// nativeSidecarRestartVersion is the first kubelet that restarts a native sidecar (a
// restartable init container) whose image changed in the Pod's spec. An older kubelet accepts
// the patch and restarts nothing: the sidecar would never run the new image.
var nativeSidecarRestartVersion = version.MustParseGeneric("1.32.0")

// kubeletVersions reads the kubelet versions of nodes, each at most once per rollout pass.
type kubeletVersions struct {
	reader client.Reader
	known  map[string]*version.Version
}

// refusesNativeSidecarImages says why the Pod's node cannot apply the update when it changes
// a native sidecar's image and the node's kubelet is older than 1.32; empty when it can, when
// the Pod is not scheduled yet (it starts with the patched spec), or when the node does not
// report a version it can be judged by.
func (k *kubeletVersions) refusesNativeSidecarImages(ctx context.Context, pod *corev1.Pod, u *inject.InPlace) (string, error) {
	if pod.Spec.NodeName == "" || !changesNativeSidecarImage(u) {
		return "", nil
	}
	v, err := k.of(ctx, pod.Spec.NodeName)
	if err != nil || v == nil || !v.LessThan(nativeSidecarRestartVersion) {
		return "", err
	}
	return fmt.Sprintf("node %s runs kubelet v%s, which does not restart a native sidecar (an init container with restartPolicy Always) whose image changes (kubelets from v1.32 do); recreate the pod, or update the node", pod.Spec.NodeName, v), nil
}

// of is the node's kubelet version; nil when the node is gone or reports none that parses.
func (k *kubeletVersions) of(ctx context.Context, node string) (*version.Version, error) {
	if v, ok := k.known[node]; ok {
		return v, nil
	}
	var n corev1.Node
	if err := k.reader.Get(ctx, types.NamespacedName{Name: node}, &n); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading node %s: %w", node, err)
		}
	}
	v, _ := version.ParseGeneric(n.Status.NodeInfo.KubeletVersion) // nil when it does not parse
	if k.known == nil {
		k.known = map[string]*version.Version{}
	}
	k.known[node] = v
	return v, nil
}

func changesNativeSidecarImage(u *inject.InPlace) bool {
	for _, img := range u.Images {
		if img.Init {
			return true
		}
	}
	return false
}
