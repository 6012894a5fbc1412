package controllers

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// podEvents feeds the tally and enqueues the sets it names: a Pod event costs one
// classification per SidecarSet, not a reconcile of every set that selects the Pod.
func (r *SidecarSetReconciler) podEvents() handler.EventHandler {
	return tallyEvents(r.tally.UpsertPod, func(o client.Object) []string { return r.tally.DeletePod(o.GetNamespace(), o.GetName()) })
}

// namespaceEvents feeds Namespace labels to the tally: a label change may make a namespace
// selector match or not, or opt the namespace out of injection.
func (r *SidecarSetReconciler) namespaceEvents() handler.EventHandler {
	return tallyEvents(r.tally.UpsertNamespace, func(o client.Object) []string { return r.tally.DeleteNamespace(o.GetName()) })
}

// tallyEvents hands created and updated objects of type T to upsert, deleted ones to remove,
// and enqueues the sets they name.
func tallyEvents[T client.Object](upsert func(T) []string, remove func(client.Object) []string) handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q queue) {
			if obj, ok := e.Object.(T); ok {
				enqueue(q, upsert(obj))
			}
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q queue) {
			if obj, ok := e.ObjectNew.(T); ok {
				enqueue(q, upsert(obj))
			}
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q queue) {
			enqueue(q, remove(e.Object))
		},
	}
}

func enqueue(q queue, names []string) {
	for _, n := range names {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: n}})
	}
}

// statusWrites remembers the status each SidecarSet was last patched to and the
// resourceVersion the patch returned. The watch event of that very write causes no reconcile
// (nothing it shows is new), and a reconcile that runs before the cache shows the write
// compares with what was written as well as with the cache.
type statusWrites struct {
	mu   sync.Mutex
	last map[string]written
}

type written struct {
	resourceVersion string
	status          appsv1alpha1.SidecarSetStatus
	at              time.Time
}

// note records a successful status patch (the object as the API server returned it), made at
// time at.
func (w *statusWrites) note(set *appsv1alpha1.SidecarSet, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last == nil {
		w.last = map[string]written{}
	}
	w.last[set.Name] = written{resourceVersion: set.ResourceVersion, status: *set.Status.DeepCopy(), at: at}
}

// wait is how long, at time now, a status write of the set must wait so that two writes are
// at least interval apart; zero when it need not.
func (w *statusWrites) wait(name string, now time.Time, interval time.Duration) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.last[name]
	if !ok {
		return 0
	}
	return max(0, last.at.Add(interval).Sub(now))
}

func (w *statusWrites) forget(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.last, name)
}

// notOurs passes every SidecarSet update but the one our last status patch made.
func (w *statusWrites) notOurs(e event.UpdateEvent) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.last[e.ObjectNew.GetName()]
	return !ok || last.resourceVersion != e.ObjectNew.GetResourceVersion()
}

// needed reports whether want must be written. The cached set may predate our last write (its
// event may not have arrived): then the API server may hold the written status rather than the
// cached one, and want is written unless it equals both. A write based on a stale cache fails
// its optimistic lock and is retried.
func (w *statusWrites) needed(cached client.Object, cachedStatus, want *appsv1alpha1.SidecarSetStatus) bool {
	if !equality.Semantic.DeepEqual(*want, *cachedStatus) {
		return true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.last[cached.GetName()]
	if !ok || last.resourceVersion == cached.GetResourceVersion() {
		return false
	}
	return !equality.Semantic.DeepEqual(*want, last.status)
}
