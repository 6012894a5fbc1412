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

// lastStatusWrites remembers the status each SidecarSet was last patched to and the
// resourceVersion the patch returned. The watch event of that very write causes no reconcile
// (nothing it shows is new), and a reconcile that runs before the cache shows the write
// compares with what was written as well as with the cache.
type lastStatusWrites struct {
	mu   sync.Mutex
	last map[string]statusWrite
}

// statusWrite is one status patch of a set: what it wrote, the resourceVersion it got, and when.
type statusWrite struct {
	resourceVersion string
	status          appsv1alpha1.SidecarSetStatus
	at              time.Time
}

// recordWrite records a successful status patch (the object as the API server returned it),
// made at time at.
func (w *lastStatusWrites) recordWrite(set *appsv1alpha1.SidecarSet, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last == nil {
		w.last = map[string]statusWrite{}
	}
	w.last[set.Name] = statusWrite{resourceVersion: set.ResourceVersion, status: *set.Status.DeepCopy(), at: at}
}

// waitBeforeWrite is how long, at time now, a status write of the set must wait so that two
// writes are at least interval apart; zero when it need not.
func (w *lastStatusWrites) waitBeforeWrite(name string, now time.Time, interval time.Duration) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.last[name]
	if !ok {
		return 0
	}
	return max(0, last.at.Add(interval).Sub(now))
}

// forgetSet drops what was written to a deleted set.
func (w *lastStatusWrites) forgetSet(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.last, name)
}

// notOwnWrite passes every SidecarSet update but the one our last status patch made.
func (w *lastStatusWrites) notOwnWrite(e event.UpdateEvent) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.last[e.ObjectNew.GetName()]
	return !ok || last.resourceVersion != e.ObjectNew.GetResourceVersion()
}

// mustWrite reports whether want must be written. The cached set may predate our last write
// (its event may not have arrived): then the API server may hold the written status rather than
// the cached one, and want is written unless it equals both. A write based on a stale cache fails
// its optimistic lock and is retried.
func (w *lastStatusWrites) mustWrite(cached client.Object, cachedStatus, want *appsv1alpha1.SidecarSetStatus) bool {
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
