package controllers

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/revision"
)

// RevisionReconciler stores each SidecarSet's content as a ControllerRevision in the
// operator's namespace, numbered in order, and prunes revisions past the set's history limit
// that no Pod still records (the rollout needs the content a Pod was injected with to tell a
// sidecar edited since from ours) and that the set does not pin (new Pods get it).
type RevisionReconciler struct {
	// Client reads SidecarSets and revisions from the manager's cache, and writes revisions.
	Client client.Client
	// Namespace is the operator's namespace, where revisions are stored.
	Namespace string
	// Pods is the operator's view of the opted-in Pods: the hashes they record.
	Pods *PodIndex
}

// +kubebuilder:rbac:groups=apps,namespace=sidecarset-system,resources=controllerrevisions,verbs=get;list;watch;create;update;delete

// keptForPods is how often a set whose revisions Pods still hold is looked at again: a Pod
// deleted frees its revision for pruning, and pruning may wait that long.
const keptForPods = 10 * time.Minute

// Reconcile stores the set's current content as its newest revision and keeps the history
// limit. The revisions of a deleted set are the garbage collector's: the set owns them.
func (r *RevisionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var set appsv1alpha1.SidecarSet
	if err := r.Client.Get(ctx, req.NamespacedName, &set); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	c, err := inject.Compile(&set)
	if err != nil {
		return ctrl.Result{}, nil //nolint:nilerr // an invalid set has no content to store; its status says why
	}
	var list appsv1.ControllerRevisionList
	if err := r.Client.List(ctx, &list, client.InNamespace(r.Namespace),
		client.MatchingLabels{appsv1alpha1.RevisionSetLabel: c.Name()}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing revisions: %w", err)
	}
	held := false
	inUse := r.recordedHashes(c)
	p := revision.Reconcile(c, r.Namespace, list.Items, func(hash string) bool {
		used := inUse(hash)
		held = held || used
		return used
	})
	if p.Create != nil {
		if err := r.Client.Create(ctx, p.Create); err != nil && !apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, fmt.Errorf("storing revision %s: %w", p.Create.Name, err)
		}
	}
	if p.Renumber != nil {
		if err := r.Client.Update(ctx, p.Renumber); err != nil {
			return ctrl.Result{}, fmt.Errorf("renumbering revision %s: %w", p.Renumber.Name, err)
		}
	}
	for _, name := range p.Delete {
		old := &appsv1.ControllerRevision{}
		old.Namespace, old.Name = r.Namespace, name
		if err := r.Client.Delete(ctx, old); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("deleting revision %s: %w", name, err)
		}
	}
	if held {
		return ctrl.Result{RequeueAfter: keptForPods}, nil
	}
	return ctrl.Result{}, nil
}

// SetupWithManager registers the reconciler: spec changes, new digests of a set pinning them
// (its content changes with them) and revision changes (one deleted by hand is stored again)
// wake it.
func (r *RevisionReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("sidecarset-revisions").
		For(&appsv1alpha1.SidecarSet{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, pinnedDigestsChanged))).
		Watches(&appsv1.ControllerRevision{}, handler.EnqueueRequestsFromMapFunc(revisionOwner)).
		Complete(r)
}

// pinnable lists the set's stored revisions when it pins one (nil otherwise).
func (r *StatusReconciler) pinnable(ctx context.Context, set *appsv1alpha1.SidecarSet) ([]*appsv1.ControllerRevision, error) {
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
func (r *RolloutReconciler) injectedRevision(ctx context.Context, c *inject.CompiledSet, pod *corev1.Pod) (*inject.CompiledSet, error) {
	hash, ok := inject.InjectedHash(pod.Annotations, c.Name())
	if !ok || r.Namespace == "" {
		return nil, nil
	}
	var rev appsv1.ControllerRevision
	key := types.NamespacedName{Namespace: r.Namespace, Name: revision.Name(c.Name(), hash)}
	err := r.Client.Get(ctx, key, &rev)
	if apierrors.IsNotFound(err) && r.APIReader != nil {
		// "Not stored" makes the Pod not updatable until its next change, so it is the API
		// server's word, not a cache's that may lag behind (a watch broken by a failing API
		// server, relisting with backoff). A failed read is tried again, never a verdict.
		err = r.APIReader.Get(ctx, key, &rev)
	}
	if err != nil {
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
func (r *RevisionReconciler) recordedHashes(c *inject.CompiledSet) func(string) bool {
	var recorded map[string]bool
	return func(hash string) bool {
		if recorded == nil {
			recorded = map[string]bool{}
			pods, _ := r.Pods.Tally.Selected(c)
			for _, pod := range pods {
				if h, ok := inject.InjectedHash(pod.Annotations, c.Name()); ok {
					recorded[h] = true
				}
			}
		}
		return recorded[hash]
	}
}

// pinnedDigestsChanged passes the updates of a set whose status.images pin other digests.
var pinnedDigestsChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	old, okOld := e.ObjectOld.(*appsv1alpha1.SidecarSet)
	cur, okNew := e.ObjectNew.(*appsv1alpha1.SidecarSet)
	return okOld && okNew && !inject.SamePins(old.Status.Images, cur.Status.Images)
}}
