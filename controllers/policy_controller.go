package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/policy"
	"github.com/sidecarset/sidecarset-operator/internal/snapshot"
)

// renderedAnnotation holds, on a rendered policy or binding, a digest of what was rendered, so
// that an object the API server has defaulted is rewritten only when our rendering changed.
const renderedAnnotation = "sidecarset.io/rendered"

// policiesKey is the one request PolicyReconciler serves: each set's policy names the other
// sets' selectors, so every policy is rendered from the whole list.
var policiesKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "sidecarset-policies"}}

// PolicyReconciler keeps, in policy mode, one MutatingAdmissionPolicy and binding per
// SidecarSet (package policy renders them), owned by the set, and deletes those of sets that
// are gone. Its RBAC is granted by the policy-mode kustomize component, not by the operator's
// generated role: webhook mode never writes admission policies.
type PolicyReconciler struct {
	// Client reads SidecarSets and the rendered objects from the manager's cache.
	Client client.Client
	// Sets is the webhook's view of the SidecarSets: a set it has stopped for a conflict gets a
	// policy that routes all its pods to the webhook, which injects nothing of it.
	Sets *snapshot.Store
	// Options are the webhook's settings the policies repeat.
	Options policy.Options
}

// snapshotLag is how soon a reconcile that found the webhook's view behind the cache (a set's
// new generation not compiled there yet) runs again.
const snapshotLag = 100 * time.Millisecond

// Reconcile renders every set's policy and binding and writes those that changed.
func (r *PolicyReconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	var list appsv1alpha1.SidecarSetList
	if err := r.Client.List(ctx, &list); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing SidecarSets: %w", err)
	}
	sets := make([]*appsv1alpha1.SidecarSet, len(list.Items))
	for i := range list.Items {
		sets[i] = &list.Items[i]
	}
	revs, err := storedRevisions(ctx, r.Client, r.Options.OperatorNamespace, client.HasLabels{appsv1alpha1.RevisionSetLabel})
	if err != nil {
		return ctrl.Result{}, err
	}
	snap := r.Sets.Load()
	keep := map[string]bool{}
	lagging := false
	for _, set := range sets {
		if set.DeletionTimestamp != nil {
			continue
		}
		stopped, seen := stoppedBy(snap, set)
		if !seen {
			// Whether the webhook stops it is not known yet: keep what is rendered.
			keep[policy.Name(set.Name)], lagging = true, true
			continue
		}
		compiled, err := policy.CompileRouted(set, sets, revs, r.Options, stopped)
		if err != nil {
			// Only a set written while validation was down; its status says Invalid.
			ctrl.LoggerFrom(ctx).Info("Not rendering the policy of an invalid SidecarSet", "sidecarSet", set.Name, "reason", err.Error())
			continue
		}
		keep[compiled.Policy.Name] = true
		if err := r.write(ctx, set, compiled.Policy, &admissionregistrationv1.MutatingAdmissionPolicy{}); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.write(ctx, set, compiled.Binding, &admissionregistrationv1.MutatingAdmissionPolicyBinding{}); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.prune(ctx, keep); err != nil {
		return ctrl.Result{}, err
	}
	if lagging {
		return ctrl.Result{RequeueAfter: snapshotLag}, nil
	}
	return ctrl.Result{}, nil
}

// stoppedBy says whether the webhook's view has compiled this generation of set (seen), and if
// it has stopped it for a conflict with an older set, why (nil when it injects).
func stoppedBy(snap *snapshot.Snapshot, set *appsv1alpha1.SidecarSet) (*policy.Unsupported, bool) {
	i, found := slices.BinarySearchFunc(snap.Valid, set.Name, func(c *inject.CompiledSet, name string) int {
		return strings.Compare(c.Name(), name)
	})
	if !found {
		// Not compiled there: an invalid set, which Compile refuses as well, or one not seen yet.
		_, invalid := snap.Invalid[set.Name]
		return nil, invalid
	}
	if c := snap.Valid[i].Set; c.UID != set.UID || c.Generation != set.Generation {
		return nil, false
	}
	for _, c := range snap.Conflicts[set.Name] {
		if c.Stopped {
			return policy.Stopped(c.With), true
		}
	}
	return nil, true
}

// write creates want, owned by set, or updates the stored object when its rendering differs.
// have is an empty object of want's type to read into.
func (r *PolicyReconciler) write(ctx context.Context, set *appsv1alpha1.SidecarSet, want, have client.Object) error {
	digest, err := rendering(want)
	if err != nil {
		return err
	}
	annotations := want.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[renderedAnnotation] = digest
	want.SetAnnotations(annotations)
	if err := controllerutil.SetControllerReference(set, want, r.Client.Scheme()); err != nil {
		return err
	}
	err = r.Client.Get(ctx, client.ObjectKeyFromObject(want), have)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.Client.Create(ctx, want); err != nil {
			return fmt.Errorf("creating %T %s: %w", want, want.GetName(), err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading %T %s: %w", want, want.GetName(), err)
	case have.GetAnnotations()[renderedAnnotation] == digest && metav1.IsControlledBy(have, set):
		return nil
	}
	want.SetResourceVersion(have.GetResourceVersion())
	if err := r.Client.Update(ctx, want); err != nil {
		return fmt.Errorf("updating %T %s: %w", want, want.GetName(), err)
	}
	return nil
}

// rendering is a digest of the object as rendered (before the API server defaults it).
func rendering(obj client.Object) (string, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8]), nil
}

// prune deletes the rendered policies and bindings no set needs any more (the garbage
// collector deletes those of deleted sets too, but not of sets that became invalid).
func (r *PolicyReconciler) prune(ctx context.Context, keep map[string]bool) error {
	managed := client.MatchingLabels{policy.ManagedByLabel: policy.ManagedByValue}
	var policies admissionregistrationv1.MutatingAdmissionPolicyList
	if err := r.Client.List(ctx, &policies, managed); err != nil {
		return fmt.Errorf("listing MutatingAdmissionPolicies: %w", err)
	}
	var bindings admissionregistrationv1.MutatingAdmissionPolicyBindingList
	if err := r.Client.List(ctx, &bindings, managed); err != nil {
		return fmt.Errorf("listing MutatingAdmissionPolicyBindings: %w", err)
	}
	var stale []client.Object
	for i := range policies.Items {
		if !keep[policies.Items[i].Name] {
			stale = append(stale, &policies.Items[i])
		}
	}
	for i := range bindings.Items {
		if !keep[bindings.Items[i].Name] {
			stale = append(stale, &bindings.Items[i])
		}
	}
	for _, obj := range stale {
		if err := r.Client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return nil
}

// SetupWithManager registers the reconciler: any SidecarSet spec change, creation or deletion,
// any change to a stored revision (a set may pin one), and any change to a rendered object,
// renders the policies again.
func (r *PolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{policiesKey}
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named("policy").
		Watches(&appsv1alpha1.SidecarSet{}, all, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&admissionregistrationv1.MutatingAdmissionPolicy{}, all).
		Watches(&admissionregistrationv1.MutatingAdmissionPolicyBinding{}, all).
		// A set is stopped, or resumes, when another set changes: the Store says when.
		WatchesRawSource(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			r.Sets.Subscribe(func([]string) { q.Add(policiesKey) })
			return nil
		}))
	if r.Options.OperatorNamespace != "" {
		// Revisions are stored, and readable, in the operator's namespace only.
		b = b.Watches(&appsv1.ControllerRevision{}, all)
	}
	return b.Complete(r)
}

// PolicyCondition is the PolicyCompiled condition of a set in policy mode: whether its policy
// injects the pods it selects, or routes them all to the webhook, and why. revs are the set's
// stored revisions, for a set that pins one (see policy.Resolve).
func PolicyCondition(set *appsv1alpha1.SidecarSet, revs []*appsv1.ControllerRevision) metav1.Condition {
	c := metav1.Condition{Type: appsv1alpha1.ConditionPolicyCompiled, ObservedGeneration: set.Generation}
	content, u := policy.Resolve(set, revs)
	if u == nil {
		u = policy.Check(content)
	}
	if u != nil {
		c.Status, c.Reason = metav1.ConditionFalse, "Unsupported"
		c.Message = fmt.Sprintf("every pod this SidecarSet selects is injected by the webhook: %s (%s)", u.Field, u.Reason)
		return c
	}
	c.Status, c.Reason = metav1.ConditionTrue, "Compiled"
	c.Message = fmt.Sprintf("MutatingAdmissionPolicy %s injects the pods this SidecarSet alone selects; the webhook those that another SidecarSet also selects, that carry a record or that clash with a sidecar",
		policy.Name(set.Name))
	return c
}
