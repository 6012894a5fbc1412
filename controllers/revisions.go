package controllers

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/revision"
)

// +kubebuilder:rbac:groups=apps,namespace=sidecarset-system,resources=controllerrevisions,verbs=get;list;watch;create;update;delete

// revisions stores the set's current content as its newest ControllerRevision in the
// operator's namespace, keeps the history limit, and returns the current revision's name.
// Without a namespace (the operator run outside a Pod without POD_NAMESPACE) nothing is stored.
func (r *SidecarSetReconciler) revisions(ctx context.Context, c *inject.CompiledSet) (string, error) {
	if r.Namespace == "" {
		return "", nil
	}
	var list appsv1.ControllerRevisionList
	if err := r.Client.List(ctx, &list, client.InNamespace(r.Namespace),
		client.MatchingLabels{appsv1alpha1.RevisionSetLabel: c.Name()}); err != nil {
		return "", fmt.Errorf("listing revisions: %w", err)
	}
	p := revision.Reconcile(c, r.Namespace, list.Items, r.recordedHashes(c))
	if p.Create != nil {
		if err := r.Client.Create(ctx, p.Create); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("storing revision %s: %w", p.Create.Name, err)
		}
	}
	if p.Renumber != nil {
		if err := r.Client.Update(ctx, p.Renumber); err != nil {
			return "", fmt.Errorf("renumbering revision %s: %w", p.Renumber.Name, err)
		}
	}
	for _, name := range p.Delete {
		old := &appsv1.ControllerRevision{}
		old.Namespace, old.Name = r.Namespace, name
		if err := r.Client.Delete(ctx, old); client.IgnoreNotFound(err) != nil {
			return "", fmt.Errorf("deleting revision %s: %w", name, err)
		}
	}
	return p.Current, nil
}

// pinnable lists the set's stored revisions when it pins one (nil otherwise).
func (r *SidecarSetReconciler) pinnable(ctx context.Context, set *appsv1alpha1.SidecarSet) ([]*appsv1.ControllerRevision, error) {
	if set.Spec.InjectionStrategy.Revision == nil {
		return nil, nil
	}
	return storedRevisions(ctx, r.Client, r.Namespace, client.MatchingLabels{appsv1alpha1.RevisionSetLabel: set.Name})
}

// storedRevisions lists the revisions stored in the operator's namespace that match; none
// without a namespace (nothing is stored then).
func storedRevisions(ctx context.Context, reader client.Reader, namespace string, match client.ListOption) ([]*appsv1.ControllerRevision, error) {
	if namespace == "" {
		return nil, nil
	}
	var list appsv1.ControllerRevisionList
	if err := reader.List(ctx, &list, client.InNamespace(namespace), match); err != nil {
		return nil, fmt.Errorf("listing revisions: %w", err)
	}
	out := make([]*appsv1.ControllerRevision, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// injectedRevision is the set as it was when it injected pod: the stored revision of the hash
// the pod records, compiled. Nil when it is not stored (pruned, or injected before revisions
// were kept): the update then cannot tell a sidecar edited since injection.
func (r *SidecarSetReconciler) injectedRevision(ctx context.Context, c *inject.CompiledSet, pod *corev1.Pod) (*inject.CompiledSet, error) {
	hash, ok := inject.InjectedHash(pod.Annotations, c.Name())
	if !ok || r.Namespace == "" {
		return nil, nil
	}
	var rev appsv1.ControllerRevision
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: revision.Name(c.Name(), hash)}, &rev); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	old, err := revision.Content(c.Set, &rev)
	if err != nil {
		return nil, nil //nolint:nilerr // an unreadable revision is not ours to fix here; the update goes on without the edit check
	}
	return inject.Compile(old)
}

// recordedHashes reports whether any Pod the set selects records a hash, gathering the hashes
// on the first question only (most reconciles prune nothing).
func (r *SidecarSetReconciler) recordedHashes(c *inject.CompiledSet) func(string) bool {
	var recorded map[string]bool
	return func(hash string) bool {
		if recorded == nil {
			recorded = map[string]bool{}
			pods, _ := r.tally.Selected(c)
			for _, pod := range pods {
				if h, ok := inject.InjectedHash(pod.Annotations, c.Name()); ok {
					recorded[h] = true
				}
			}
		}
		return recorded[hash]
	}
}
