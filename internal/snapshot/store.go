package snapshot

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	toolscache "k8s.io/client-go/tools/cache"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// Snapshot is an immutable view of the SidecarSets at one moment.
type Snapshot struct {
	// Sets are the valid SidecarSets, sorted by name: the order injection follows.
	Sets []*inject.CompiledSet
	// Invalid maps the names of SidecarSets that cannot be compiled (possible only when they
	// were written while the validating webhook was down) to the reason. They inject nothing.
	Invalid map[string]error
}

// Get returns the compiled SidecarSet with that name.
func (s *Snapshot) Get(name string) (*inject.CompiledSet, bool) {
	i, ok := slices.BinarySearchFunc(s.Sets, name, func(c *inject.CompiledSet, n string) int {
		return strings.Compare(c.Name(), n)
	})
	if !ok {
		return nil, false
	}
	return s.Sets[i], true
}

// Store holds the current Snapshot. Load is lock-free; updates are serialised.
type Store struct {
	current atomic.Pointer[Snapshot]
	synced  atomic.Pointer[func() bool]

	mu      sync.Mutex
	sets    map[string]*inject.CompiledSet
	invalid map[string]error
}

// NewStore returns an empty Store; it is not Ready until SetSynced's function says so.
func NewStore() *Store {
	s := &Store{sets: map[string]*inject.CompiledSet{}, invalid: map[string]error{}}
	s.current.Store(&Snapshot{})
	return s
}

// Load returns the current Snapshot. Callers must not modify it or anything it points to.
func (s *Store) Load() *Snapshot { return s.current.Load() }

// SetSynced installs the function that reports whether the informer feeding the Store has
// delivered its initial list.
func (s *Store) SetSynced(f func() bool) { s.synced.Store(&f) }

// Ready reports whether the Store holds every SidecarSet: admitting a Pod against a partial
// view could create it without a sidecar it asked for.
func (s *Store) Ready() bool {
	f := s.synced.Load()
	return f != nil && (*f)()
}

// Upsert compiles a SidecarSet and publishes a new Snapshot. The set must not be modified
// afterwards (informer objects never are).
func (s *Store) Upsert(set *appsv1alpha1.SidecarSet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.sets[set.Name]; ok && old.Set.ResourceVersion == set.ResourceVersion && set.ResourceVersion != "" {
		return
	}
	delete(s.sets, set.Name)
	delete(s.invalid, set.Name)
	if c, err := inject.Compile(set); err != nil {
		s.invalid[set.Name] = err
	} else {
		s.sets[set.Name] = c
	}
	s.publish()
}

// Delete removes a SidecarSet and publishes a new Snapshot.
func (s *Store) Delete(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sets, name)
	delete(s.invalid, name)
	s.publish()
}

func (s *Store) publish() {
	snap := &Snapshot{Sets: make([]*inject.CompiledSet, 0, len(s.sets)), Invalid: make(map[string]error, len(s.invalid))}
	for _, c := range s.sets {
		snap.Sets = append(snap.Sets, c)
	}
	slices.SortFunc(snap.Sets, func(a, b *inject.CompiledSet) int { return strings.Compare(a.Name(), b.Name()) })
	for n, err := range s.invalid {
		snap.Invalid[n] = err
	}
	s.current.Store(snap)
}

// EventHandler feeds the Store from a SidecarSet informer.
func (s *Store) EventHandler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.upsertObject(obj) },
		UpdateFunc: func(_, obj any) { s.upsertObject(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if set, ok := obj.(*appsv1alpha1.SidecarSet); ok {
				s.Delete(set.Name)
			}
		},
	}
}

func (s *Store) upsertObject(obj any) {
	if set, ok := obj.(*appsv1alpha1.SidecarSet); ok {
		s.Upsert(set)
	}
}
