package controllers

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/sidecarset/sidecarset-operator/internal/status"
	"github.com/sidecarset/sidecarset-operator/internal/tally"
)

// PodIndex is the operator's one view of the opted-in Pods and the Namespaces: a tally fed by
// one event handler per kind, which then tells every controller that subscribed (through
// Source) the names of the sets an event touched. One handler feeds the tally before anyone
// hears of the event, so no controller reads a tally older than the event it was woken by.
type PodIndex struct {
	Tally *tally.Tally

	cache       cache.Cache
	once        sync.Once
	startErr    error
	handlers    []toolscache.ResourceEventHandlerRegistration
	mu          sync.Mutex
	subscribers []func(names []string)
	// lastChange is when an event last touched a set, as time since indexEpoch (monotonic); 0:
	// never.
	lastChange atomic.Int64
}

// NewPodIndex returns an index of the Pods and Namespaces in the manager's cache, counted
// against scope.
func NewPodIndex(c cache.Cache, scope status.Scope) *PodIndex {
	return &PodIndex{Tally: tally.New(scope), cache: c}
}

// Source is a controller's subscription to the index: it enqueues the sets that Pod and
// Namespace events touch, and waits for the index to have seen every object before the
// controller's workers start.
func (x *PodIndex) Source() source.Source { return &podIndexSource{index: x} }

type podIndexSource struct{ index *PodIndex }

func (s *podIndexSource) Start(ctx context.Context, q queue) error {
	s.index.subscribe(func(names []string) { enqueue(q, names) })
	return s.index.start(ctx)
}

func (s *podIndexSource) WaitForSync(ctx context.Context) error {
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		return s.index.synced(), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the Pod and Namespace index to sync: %w", err)
	}
	return nil
}

func (s *podIndexSource) String() string { return "the operator's Pod and Namespace index" }

func (x *PodIndex) subscribe(f func(names []string)) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.subscribers = append(x.subscribers, f)
}

func (x *PodIndex) tell(names []string) {
	if len(names) == 0 {
		return
	}
	x.lastChange.Store(int64(time.Since(indexEpoch)) + 1)
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, f := range x.subscribers {
		f(names)
	}
}

// start registers the index's handlers on the cache's informers, once for every subscriber.
func (x *PodIndex) start(ctx context.Context) error {
	x.once.Do(func() {
		x.startErr = x.register(ctx, &corev1.Pod{}, func(o client.Object) []string { return x.Tally.UpsertPod(o.(*corev1.Pod)) },
			func(o client.Object) []string { return x.Tally.DeletePod(o.GetNamespace(), o.GetName()) })
		if x.startErr == nil {
			x.startErr = x.register(ctx, &corev1.Namespace{}, func(o client.Object) []string { return x.Tally.UpsertNamespace(o.(*corev1.Namespace)) },
				func(o client.Object) []string { return x.Tally.DeleteNamespace(o.GetName()) })
		}
	})
	return x.startErr
}

func (x *PodIndex) register(ctx context.Context, obj client.Object, upsert, remove func(client.Object) []string) error {
	informer, err := x.cache.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("getting the %T informer: %w", obj, err)
	}
	reg, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if obj, ok := o.(client.Object); ok {
				x.tell(upsert(obj))
			}
		},
		UpdateFunc: func(_, o any) {
			if obj, ok := o.(client.Object); ok {
				x.tell(upsert(obj))
			}
		},
		DeleteFunc: func(o any) {
			if gone, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = gone.Obj
			}
			if obj, ok := o.(client.Object); ok {
				x.tell(remove(obj))
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watching %T: %w", obj, err)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.handlers = append(x.handlers, reg)
	return nil
}

// synced reports whether the handlers have seen every object their informers listed.
func (x *PodIndex) synced() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.handlers) < 2 {
		return false
	}
	for _, h := range x.handlers {
		if !h.HasSynced() {
			return false
		}
	}
	return true
}

// Changing reports whether a Pod or Namespace event touched a set within the last d.
func (x *PodIndex) Changing(d time.Duration) bool {
	last := x.lastChange.Load()
	return last != 0 && time.Since(indexEpoch)-time.Duration(last-1) < d
}

// indexEpoch is what PodIndex times events from: durations since it are read on the monotonic
// clock, which a wall clock set back does not move.
var indexEpoch = time.Now()
