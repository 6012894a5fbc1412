package controllers

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

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
