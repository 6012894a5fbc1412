package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

// policiesKey is the one request PolicyReconciler serves: each set's policy names the other
// sets' selectors, so every policy is rendered from the whole list.
var policiesKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "sidecarset-policies"}}

const (
	// snapshotLag is how soon a reconcile that found the webhook's view behind the cache (a
	// set's new generation not compiled there yet) runs again.
	snapshotLag = 100 * time.Millisecond
	// probeRetry is how soon a policy the API server was not yet seen running is probed again:
	// an API server loads new policies about once a second.
	probeRetry = 250 * time.Millisecond
	// probeFailedRetry is how soon a probe the API server refused (say, a webhook that refuses
	// dry runs) is tried again.
	probeFailedRetry = 5 * time.Second
	// blockedRetry is how often a set whose policy name is taken by an object the operator did
	// not render is tried again: that object carries none of the operator's labels, so no watch
	// of the operator's sees it go.
	blockedRetry = 10 * time.Second
)

// PolicyReconciler keeps, in policy mode, one MutatingAdmissionPolicy and binding per
// SidecarSet (package policy renders them), owned by the set, and deletes those of sets that
// are gone. Its RBAC is granted by the policy-mode kustomize component, not by the operator's
// generated role: webhook mode never writes admission policies.
//
// What is stored is compared with what the reconciler last wrote: an object anyone else
// changed (a hand edit, a field added) is replaced by the rendering again, whole. An object of
// a rendered name that the operator did not render is never overwritten: the set's state says
// so (Blocked), and the status reconciler's PolicyCompiled condition names it.
type PolicyReconciler struct {
	// Client reads SidecarSets and the rendered objects from the manager's cache.
	Client client.Client
	// APIReader reads a rendered object from the API server: the cache may be behind the
	// reconciler's own last write, and holds only objects labelled as rendered.
	APIReader client.Reader
	// Sets is the webhook's view of the SidecarSets: a set it has stopped for a conflict gets a
	// policy that routes all its pods to the webhook, which injects nothing of it.
	Sets *snapshot.Store
	// States receives what was done with each set's policy, for the PolicyCompiled condition
	// (SetupWithManager makes one when nil).
	States *PolicyStates
	// Options are the webhook's settings the policies repeat.
	Options policy.Options

	// ForeignRecheck is how often the reconciler looks for MutatingAdmissionPolicies of other
	// parties that mutate pods, while Options.LazyPod is set (default 10 seconds).
	ForeignRecheck time.Duration

	// lastWrites is what the reconciler last wrote of each policy and binding.
	lastWrites lastObjectWrites
	// seenForeign is what the latest look found (watchForeign's, or the first pass's): a policy
	// of another party's, or "". lastForeign is what the last pass that succeeded rendered for.
	seenForeign, lastForeign atomic.Pointer[string]
}

// Reconcile renders every set's policy and binding and writes those that are not stored as
// rendered.
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
	opts, foreign := r.options(ctx)
	p := &pass{snap: r.Sets.Load(), sets: sets, revs: revs, keep: map[string]bool{}, states: map[string]PolicyState{}, opts: opts}
	for _, set := range sets {
		if set.DeletionTimestamp != nil {
			continue
		}
		if err := r.render(ctx, p, set); err != nil {
			return ctrl.Result{}, err
		}
	}
	r.States.replace(p.states)
	if err := r.prune(ctx, p.keep); err != nil {
		return ctrl.Result{}, err
	}
	// Only once every policy is rendered for it: a pass that failed is retried, and watchForeign
	// compares with what is in force.
	r.lastForeign.Store(&foreign)
	return ctrl.Result{RequeueAfter: p.after}, nil
}

// pass is one reconcile: what it reads, and what it gathers (the objects to keep, each set's
// state, and when to run again; 0: not before a watch says so).
type pass struct {
	snap   *snapshot.Snapshot
	sets   []*appsv1alpha1.SidecarSet
	revs   []*appsv1.ControllerRevision
	keep   map[string]bool
	states map[string]PolicyState
	after  time.Duration
	// opts are the options this pass renders with (PolicyReconciler.options).
	opts policy.Options
}

// options are the options to render with: r.Options, but for a pod read whole while a
// MutatingAdmissionPolicy the operator did not render may mutate pods. On an API server that
// reads the pod lazily (Options.LazyPod), a policy's matchCondition makes it read the pod lazily
// for every policy after it in the same request, and a policy that puts the pod's own lists
// into its patch then fails ("could not marshal to JSON"): with such a policy of another
// party's in the cluster, none of ours has a matchCondition. foreign names that policy, or is
// "" when there is none. A pass reads what watchForeign last found (the cache holds only the
// operator's own policies, so no watch would tell it sooner); the first pass looks itself.
func (r *PolicyReconciler) options(ctx context.Context) (opts policy.Options, foreign string) {
	opts = r.Options
	if !opts.LazyPod {
		return opts, ""
	}
	seen := r.seenForeign.Load()
	if seen == nil {
		seen = r.lookForForeign(ctx)
	}
	opts.LazyPod = *seen == ""
	return opts, *seen
}

// lookForForeign lists the policies (foreignPodPolicy) and keeps what it found in seenForeign:
// when they cannot be listed, unknownForeign, and the pod is read whole, which is correct
// everywhere.
func (r *PolicyReconciler) lookForForeign(ctx context.Context) *string {
	foreign, err := r.foreignPodPolicy(ctx)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Looking for MutatingAdmissionPolicies of other parties: the policies read the pod whole")
		foreign = unknownForeign
	}
	r.seenForeign.Store(&foreign)
	return &foreign
}

// unknownForeign stands for the policies of other parties when they could not be listed.
const unknownForeign = "(not listed)"

// foreignPodPolicy is the name of a MutatingAdmissionPolicy that the operator did not render
// and that may mutate pods as they are created, or "" when there is none.
func (r *PolicyReconciler) foreignPodPolicy(ctx context.Context) (string, error) {
	var list admissionregistrationv1.MutatingAdmissionPolicyList
	if err := r.APIReader.List(ctx, &list); err != nil {
		return "", fmt.Errorf("listing MutatingAdmissionPolicies: %w", err)
	}
	for i := range list.Items {
		p := &list.Items[i]
		if p.Labels[policy.ManagedByLabel] != policy.ManagedByValue && policy.MayMutatePodCreation(p) {
			return p.Name, nil
		}
	}
	return "", nil
}

// watchForeign looks for a MutatingAdmissionPolicy of another party's every ForeignRecheck,
// and renders the policies again when one comes or the last one goes (see options).
func (r *PolicyReconciler) watchForeign(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	every := r.ForeignRecheck
	if every <= 0 {
		every = defaultForeignRecheck
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		foreign := *r.lookForForeign(ctx)
		if last := r.lastForeign.Load(); last == nil || (*last == "") != (foreign == "") {
			if foreign != "" {
				ctrl.LoggerFrom(ctx).Info("A MutatingAdmissionPolicy the operator did not render mutates pods: the policies read the pod whole", "policy", foreign)
			}
			q.Add(policiesKey)
		}
	}
}

// defaultForeignRecheck is how often, by default, the reconciler looks for policies of other
// parties (watchForeign).
const defaultForeignRecheck = 10 * time.Second

func (p *pass) again(after time.Duration) {
	if p.after == 0 || after < p.after {
		p.after = after
	}
}

func (p *pass) keepSet(name string) {
	p.keep[policy.Name(name)], p.keep[policy.ProbeName(name)] = true, true
}

// render compiles set's policy from the webhook's view, writes it and sees whether it runs.
func (r *PolicyReconciler) render(ctx context.Context, p *pass, set *appsv1alpha1.SidecarSet) error {
	stopped, seen := stoppedBy(p.snap, set)
	if !seen {
		// Whether the webhook stops it is not known yet: keep what is rendered.
		p.keepSet(set.Name)
		if st, ok := r.States.Get(set.Name); ok {
			p.states[set.Name] = st
		}
		p.again(snapshotLag)
		return nil
	}
	compiled, err := policy.CompileRouted(set, p.sets, p.revs, p.opts, stopped)
	if err != nil {
		// Only a set written while validation was down; its status says Invalid.
		ctrl.LoggerFrom(ctx).Info("Not rendering the policy of an invalid SidecarSet", "sidecarSet", set.Name, "reason", err.Error())
		return nil
	}
	st := PolicyState{UID: set.UID, Generation: set.Generation, Unsupported: compiled.Unsupported,
		Digest: compiled.Digest, ProbeKey: compiled.ProbeKey}
	blocked, wrote, err := r.writeAll(ctx, set, compiled)
	if err != nil {
		return err
	}
	if st.Blocked = blocked; blocked != "" {
		p.again(blockedRetry)
	} else {
		p.keepSet(set.Name)
		r.observe(ctx, p, set.Name, &st, compiled, wrote)
	}
	p.states[set.Name] = st
	return nil
}

// observe sets st.InForce: seen running before with nothing written since, or seen running now
// by a probe (which is tried again soon when it does not see it).
func (r *PolicyReconciler) observe(ctx context.Context, p *pass, name string, st *PolicyState, c *policy.Compiled, wrote bool) {
	prev, _ := r.States.Get(name)
	if !wrote && prev.InForce && prev.Digest == st.Digest && prev.ProbeKey == st.ProbeKey {
		st.InForce = true
		return
	}
	var retry time.Duration
	if st.InForce, st.Pending, retry = r.probe(ctx, c); !st.InForce {
		p.again(retry)
	}
}

// writeAll writes the policy, its binding, then its probe binding (last: see package policy's
// probe), and says whether it wrote any. When an object of one of their names was not rendered
// by the operator, it writes nothing and returns what that object is.
func (r *PolicyReconciler) writeAll(ctx context.Context, set *appsv1alpha1.SidecarSet, c *policy.Compiled) (string, bool, error) {
	objs := []client.Object{c.Policy, c.Binding}
	if c.Probe != nil {
		objs = append(objs, c.Probe)
	}
	for _, want := range objs {
		if foreign, err := r.foreign(ctx, set, want, emptyLike(want)); foreign != "" || err != nil {
			return foreign, false, err
		}
	}
	wrote := false
	for _, want := range objs {
		w, err := r.write(ctx, set, want, emptyLike(want))
		if err != nil {
			return "", false, err
		}
		wrote = wrote || w
	}
	return "", wrote, nil
}

// emptyLike is an empty object of want's type, to read the stored one into.
func emptyLike(want client.Object) client.Object {
	if _, ok := want.(*admissionregistrationv1.MutatingAdmissionPolicy); ok {
		return &admissionregistrationv1.MutatingAdmissionPolicy{}
	}
	return &admissionregistrationv1.MutatingAdmissionPolicyBinding{}
}

// probe dry-runs c's probe pod and reports whether the API server runs c's policy as written
// (the policy answers with its digest); if not, why, and when to probe again. Without a probe
// binding (no operator namespace to probe in) a written policy counts as running.
func (r *PolicyReconciler) probe(ctx context.Context, c *policy.Compiled) (bool, string, time.Duration) {
	if c.Probe == nil {
		return true, "", 0
	}
	pod := policy.ProbePod(r.Options.OperatorNamespace, c.ProbeKey)
	if err := r.Client.Create(ctx, pod, client.DryRunAll); err != nil {
		return false, fmt.Sprintf("the API server refused the dry run of a probe pod in %s: %v", r.Options.OperatorNamespace, err), probeFailedRetry
	}
	if got := pod.Annotations[policy.ProbeAnnotation]; got != c.Digest {
		return false, "a probe pod was not answered by this rendering yet", probeRetry
	}
	return true, "", 0
}

// stoppedBy says whether the webhook's view has compiled this generation of set (seen), and if
// it has stopped it for a conflict with an older set, why (nil when it injects).
func stoppedBy(snap *snapshot.Snapshot, set *appsv1alpha1.SidecarSet) (*policy.Unsupported, bool) {
	i, found := slices.BinarySearchFunc(snap.Valid, set.Name, func(valid *inject.CompiledSet, name string) int {
		return strings.Compare(valid.Name(), name)
	})
	if !found {
		// Not compiled there: an invalid set, which Compile refuses as well, or one not seen yet.
		_, invalid := snap.Invalid[set.Name]
		return nil, invalid
	}
	if seen := snap.Valid[i].Set; seen.UID != set.UID || seen.Generation != set.Generation {
		return nil, false
	}
	for _, conflict := range snap.Conflicts[set.Name] {
		if conflict.Stopped {
			return policy.Stopped(conflict.With), true
		}
	}
	return nil, true
}

// foreign reads the stored object of want's name into have and says what it is when the
// operator did not render it for set; "" when there is none or it is set's.
func (r *PolicyReconciler) foreign(ctx context.Context, set *appsv1alpha1.SidecarSet, want, have client.Object) (string, error) {
	// The cache holds only objects labelled as rendered: read the API server on a miss.
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), have)
	if apierrors.IsNotFound(err) {
		err = r.APIReader.Get(ctx, client.ObjectKeyFromObject(want), have)
	}
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("reading %s %s: %w", kindOf(want), want.GetName(), err)
	case renderedFor(have, set):
		return "", nil
	}
	return fmt.Sprintf("%s %s exists and was not rendered by the operator for this SidecarSet (it is not owned by it, nor labelled %s=%s and %s=%s)",
		kindOf(want), want.GetName(), policy.ManagedByLabel, policy.ManagedByValue, policy.SetLabel, set.Name), nil
}

// renderedFor reports whether obj was rendered for set: owned by it, or labelled as rendered
// for a set of its name (an earlier set of that name, whose objects the new one takes over).
func renderedFor(obj client.Object, set *appsv1alpha1.SidecarSet) bool {
	labels := obj.GetLabels()
	return metav1.IsControlledBy(obj, set) ||
		(labels[policy.ManagedByLabel] == policy.ManagedByValue && labels[policy.SetLabel] == set.Name)
}

func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *admissionregistrationv1.MutatingAdmissionPolicy:
		return "MutatingAdmissionPolicy"
	case *admissionregistrationv1.MutatingAdmissionPolicyBinding:
		return "MutatingAdmissionPolicyBinding"
	}
	return fmt.Sprintf("%T", obj)
}

// write stores want, owned by set, unless the stored object is the one the reconciler last
// wrote for this very rendering. Anything else stored (an edit by hand, a field someone added,
// an object the cache has not caught up with) is read from the API server and replaced whole.
// have is an empty object of want's type to read into.
func (r *PolicyReconciler) write(ctx context.Context, set *appsv1alpha1.SidecarSet, want, have client.Object) (bool, error) {
	if err := controllerutil.SetControllerReference(set, want, r.Client.Scheme()); err != nil {
		return false, err
	}
	rendered, err := rendering(want)
	if err != nil {
		return false, err
	}
	key := kindOf(want) + "/" + want.GetName()
	err = r.Client.Get(ctx, client.ObjectKeyFromObject(want), have)
	if err == nil && r.lastWrites.unchangedSinceWrite(key, rendered, have) {
		return false, nil
	}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(want), have); apierrors.IsNotFound(err) {
		if err := r.Client.Create(ctx, want); err != nil {
			return false, fmt.Errorf("creating %s %s: %w", kindOf(want), want.GetName(), err)
		}
		r.lastWrites.recordWrite(key, rendered, want)
		return true, nil
	} else if err != nil {
		return false, fmt.Errorf("reading %s %s: %w", kindOf(want), want.GetName(), err)
	}
	if r.lastWrites.unchangedSinceWrite(key, rendered, have) {
		return false, nil // the cache is behind our last write
	}
	want.SetResourceVersion(have.GetResourceVersion())
	if err := r.Client.Update(ctx, want); err != nil {
		return false, fmt.Errorf("updating %s %s: %w", kindOf(want), want.GetName(), err)
	}
	r.lastWrites.recordWrite(key, rendered, want)
	// An update that changes nothing stored keeps the resourceVersion: nothing was written.
	return want.GetResourceVersion() != have.GetResourceVersion(), nil
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

// lastObjectWrites remembers, by kind and name, the rendering the reconciler last wrote and the
// resourceVersion the API server stored it at: a stored object at that version is untouched
// since, whatever defaults the API server added.
type lastObjectWrites struct {
	mu sync.Mutex
	m  map[string]objectWrite
}

type objectWrite struct{ rendering, resourceVersion string }

// unchangedSinceWrite reports whether the stored object is the one the reconciler last wrote
// with this rendering, untouched since.
func (w *lastObjectWrites) unchangedSinceWrite(key, rendering string, stored client.Object) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.m[key] == objectWrite{rendering: rendering, resourceVersion: stored.GetResourceVersion()}
}

// recordWrite records that the object stored was written with this rendering.
func (w *lastObjectWrites) recordWrite(key, rendering string, stored client.Object) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]objectWrite{}
	}
	w.m[key] = objectWrite{rendering: rendering, resourceVersion: stored.GetResourceVersion()}
}

// forgetObject drops a deleted object.
func (w *lastObjectWrites) forgetObject(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, key)
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
			return fmt.Errorf("deleting %s %s: %w", kindOf(obj), obj.GetName(), err)
		}
		r.lastWrites.forgetObject(kindOf(obj) + "/" + obj.GetName())
	}
	return nil
}

// SetupWithManager registers the reconciler: any SidecarSet spec change, creation or deletion,
// any change to a stored revision (a set may pin one) or to a rendered object, and any change
// to which sets the webhook stops, renders the policies again.
func (r *PolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.States == nil {
		r.States = NewPolicyStates()
	}
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
		})).
		WatchesRawSource(source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			if r.Options.LazyPod {
				go r.watchForeign(ctx, q)
			}
			return nil
		}))
	if r.Options.OperatorNamespace != "" {
		// Revisions are stored, and readable, in the operator's namespace only.
		b = b.Watches(&appsv1.ControllerRevision{}, all)
	}
	return b.Complete(r)
}

// PolicyCondition is what the PolicyCompiled condition of a set in policy mode says once its
// policy runs: whether the policy injects the pods it selects, or routes them all to the
// webhook, and why. revs are the set's stored revisions, for a set that pins one (see
// policy.Resolve). PolicyStates.Condition is the condition to write: it also knows whether the
// policy is written and running, and what keeps it from being written.
func PolicyCondition(set *appsv1alpha1.SidecarSet, revs []*appsv1.ControllerRevision) metav1.Condition {
	content, u := policy.Resolve(set, revs)
	if u == nil {
		u = policy.Check(content)
	}
	return policyCondition(set, PolicyState{UID: set.UID, Generation: set.Generation, Unsupported: u, InForce: true}, true)
}
