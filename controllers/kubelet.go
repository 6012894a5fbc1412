package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get

// kubeletVersions reads the kubelet versions of nodes, each at most once per rollout pass.
type kubeletVersions struct {
	reader client.Reader
	known  map[string]*version.Version
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
