package webhook

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NamespaceLabelsFrom looks a namespace's labels up in cached (the manager's informer) and,
// when the namespace is not there, in live (the API server, uncached). A namespace created in
// the same apply as its pods (one kubectl apply, a Helm release, a GitOps sync) reaches the
// informer a moment after the pods reach the webhook; refusing them would fail the apply for
// that moment. Only a miss costs a request to the API server, as in the API server's own
// NamespaceLifecycle admission, and a namespace that exists nowhere is still an error.
func NamespaceLabelsFrom(cached, live client.Reader) NamespaceLabelsFunc {
	return func(ctx context.Context, name string) (map[string]string, error) {
		var ns corev1.Namespace
		err := cached.Get(ctx, types.NamespacedName{Name: name}, &ns)
		if apierrors.IsNotFound(err) {
			err = live.Get(ctx, types.NamespacedName{Name: name}, &ns)
		}
		if err != nil {
			return nil, err
		}
		return ns.Labels, nil
	}
}

// LimitRangesFrom lists a namespace's LimitRanges in cached (the manager's informer). A
// LimitRange created a moment before a pod may not be there yet; the API server still enforces
// it, only with its own message.
func LimitRangesFrom(cached client.Reader) LimitRangesFunc {
	return func(ctx context.Context, namespace string) ([]corev1.LimitRange, error) {
		var list corev1.LimitRangeList
		if err := cached.List(ctx, &list, client.InNamespace(namespace)); err != nil {
			return nil, err
		}
		return list.Items, nil
	}
}
