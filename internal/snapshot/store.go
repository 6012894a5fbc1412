package snapshot

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	toolscache "k8s.io/client-go/tools/cache"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/revision"
	"github.com/sidecarset/sidecarset-operator/internal/validation"
)

// Snapshot is an immutable view of the SidecarSets at one moment.
type Snapshot struct {
	// Sets are the SidecarSets that inject, sorted by name: the order injection follows.
	Sets []*inject.CompiledSet
	// Valid are all SidecarSets that compile, sorted by name: Sets and those stopped by a
	// conflict. Their status is kept like any other's.
	Valid []*inject.CompiledSet
	// Conflicts lists, by SidecarSet name, the clashes with other SidecarSets that can select
	// the same Pod, sorted by the other set's name.
	Conflicts map[string][]Conflict
	// Invalid maps the names of SidecarSets that cannot be compiled (possible only when they
	// were written while the validating webhook was down) to the reason. They inject nothing.
	Invalid map[string]error
	// PinMissing maps the names of SidecarSets whose spec.injectionStrategy.revision is not
	// stored (or cannot be read) to the revision they pin and why it is missing: they inject
	// their current spec meanwhile.
	PinMissing map[string]string
}

// Conflict is a clash between two SidecarSets that can select the same Pod: a container name,
// a volume defined two ways, or a host port. Validation refuses the second set of such a pair,
// but two writes that race are each validated without seeing the other, and a set stored while
// the validating webhook was down was never validated. The older set of a pair (by creation
// time, then name) keeps injecting; the newer one is stopped, so that Pods both select are
// injected by one and never refused.
type Conflict struct {
	// With is the other SidecarSet.
	With string
	// Stopped is true when this set is the newer one, which injects nothing while the
	// conflict lasts.
	Stopped bool
	// Fields are what clashes, each a path into this set's spec and the reason.
	Fields []string
}

// Get returns the compiled SidecarSet with that name.
func (s *Snapshot) Get(name string) (*inject.CompiledSet, bool) {
	i, ok := find(s.Sets, name)
	if !ok {
		return nil, false
	}
	return s.Sets[i], true
}

// Store holds the current Snapshot. Load is lock-free; updates are serialised.
type Store struct {
	current atomic.Pointer[Snapshot]
	synced  atomic.Pointer[func() bool]

	mu   sync.Mutex
	sets map[string]*inject.CompiledSet
	// objects are the SidecarSets as stored, revisions their stored revisions by name: a set
	// that pins a revision is compiled from it, again whenever it comes or goes.
	objects    map[string]*appsv1alpha1.SidecarSet
	revisions  map[string]*appsv1.ControllerRevision
	pinMissing map[string]string
	invalid    map[string]error
	// pairs caches validation.Conflicts(a, b) as pairs[a][b] (paths into a's spec). Entries
	// are dropped when either set's spec changes, so a publish only compares the pairs of the
	// set that changed.
	pairs map[string]map[string][]string
	// subscribers are told the names of SidecarSets whose conflicts changed.
	subscribers []func(names []string)
}

// NewStore returns an empty Store; it is not Ready until SetSynced's function says so.
func NewStore() *Store {
	s := &Store{sets: map[string]*inject.CompiledSet{}, invalid: map[string]error{}, pairs: map[string]map[string][]string{},
		objects: map[string]*appsv1alpha1.SidecarSet{}, revisions: map[string]*appsv1.ControllerRevision{}, pinMissing: map[string]string{}}
	s.current.Store(&Snapshot{Conflicts: map[string][]Conflict{}, Invalid: map[string]error{}})
	return s
}

// Subscribe registers f to be called with the names of the SidecarSets whose Conflicts changed
// in a publish. f is called with the Store's lock held: it must not block or call the Store.
func (s *Store) Subscribe(f func(names []string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subscribers = append(s.subscribers, f)
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
	old, ok := s.sets[set.Name]
	if ok && old.Set.ResourceVersion == set.ResourceVersion && set.ResourceVersion != "" {
		return
	}
	s.objects[set.Name] = set
	s.compile(set)
	// Status writes and label changes keep the generation: what conflicts stays the same,
	// unless the digests the set's images are pinned to (status.images) change, or the content
	// it injects does (a set waiting for digests injects the revision its status names).
	if c, valid := s.sets[set.Name]; ok && valid && old.Set.UID == set.UID && old.Set.Generation == set.Generation &&
		set.Generation != 0 && inject.SamePins(old.Set.Status.Images, set.Status.Images) && sameContent(old, c) {
		s.replace(set.Name)
		return
	}
	s.forgetPairs(set.Name)
	s.publish()
}

// compile compiles set into the Store: from the revision it pins, when it pins one that is
// stored.
func (s *Store) compile(set *appsv1alpha1.SidecarSet) {
	delete(s.sets, set.Name)
	delete(s.invalid, set.Name)
	delete(s.pinMissing, set.Name)
	content, missing := revision.Resolve(set, slices.Collect(maps.Values(s.revisions)))
	if missing != "" {
		s.pinMissing[set.Name] = missing
	}
	// A set pinning digests whose images wait to be resolved keeps injecting its last revision.
	c, _, err := revision.Compile(set, content, func(name string) *appsv1.ControllerRevision { return s.revisions[name] })
	if err == nil && content != set && partial(set) {
		// New pods get either the pinned revision or the current spec.
		// While the current spec's images wait for digests, every new pod gets the pinned one.
		latest, lerr := inject.Compile(set)
		var waiting *inject.ImagesNotResolvedError
		switch {
		case lerr == nil:
			c, err = c.WithLatest(latest)
		case !errors.As(lerr, &waiting):
			err = lerr
		}
	}
	if err != nil {
		s.invalid[set.Name] = err
	} else {
		s.sets[set.Name] = c
	}
}

// UpsertRevision stores a revision and recompiles the set that pins it, if any.
func (s *Store) UpsertRevision(r *appsv1.ControllerRevision) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revisions[r.Name] = r
	s.recompilePinning(r)
}

// DeleteRevision forgets a revision and recompiles the set that pinned it, if any.
func (s *Store) DeleteRevision(r *appsv1.ControllerRevision) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.revisions, r.Name)
	s.recompilePinning(r)
}

func (s *Store) recompilePinning(r *appsv1.ControllerRevision) {
	set, ok := s.objects[r.Labels[appsv1alpha1.RevisionSetLabel]]
	if !ok || (set.Spec.InjectionStrategy.Revision == nil && !inject.PinsDigests(set)) {
		return
	}
	s.forgetPairs(set.Name) // its injected content may change
	s.compile(set)
	s.publish()
}

// Delete removes a SidecarSet and publishes a new Snapshot.
func (s *Store) Delete(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sets, name)
	delete(s.invalid, name)
	delete(s.objects, name)
	delete(s.pinMissing, name)
	s.forgetPairs(name)
	s.publish()
}

func (s *Store) forgetPairs(name string) {
	for other := range s.pairs[name] {
		delete(s.pairs[other], name)
	}
	delete(s.pairs, name)
}

// conflicts returns what clashes between a and b, with paths into a's spec. Both directions
// are computed and cached together (a clash is mutual: if a clashes with b, b clashes with a),
// so forgetting either name drops both.
func (s *Store) conflicts(a, b *inject.CompiledSet) []string {
	if out, ok := s.pairs[a.Name()][b.Name()]; ok {
		return out
	}
	ab := versionConflicts(a, b)
	var ba []string
	if len(ab) > 0 {
		ba = versionConflicts(b, a)
	}
	s.cachePair(a.Name(), b.Name(), ab)
	s.cachePair(b.Name(), a.Name(), ba)
	return ab
}

func (s *Store) cachePair(a, b string, fields []string) {
	if s.pairs[a] == nil {
		s.pairs[a] = map[string][]string{}
	}
	s.pairs[a][b] = fields
}

// versionConflicts is what clashes between every content a and b inject (a set pinning a
// revision with policy Partial injects two), as messages with paths into a's spec.
func versionConflicts(a, b *inject.CompiledSet) []string {
	var out []string
	for _, va := range versions(a) {
		for _, vb := range versions(b) {
			for _, e := range validation.Conflicts(va.Set, vb.Set) {
				if m := e.Error(); !slices.Contains(out, m) {
					out = append(out, m)
				}
			}
		}
	}
	return out
}

func versions(c *inject.CompiledSet) []*inject.CompiledSet {
	if l := c.Latest(); l != nil {
		return []*inject.CompiledSet{c, l}
	}
	return []*inject.CompiledSet{c}
}

func (s *Store) publish() {
	snap := &Snapshot{Valid: make([]*inject.CompiledSet, 0, len(s.sets)), Invalid: make(map[string]error, len(s.invalid))}
	for _, c := range s.sets {
		snap.Valid = append(snap.Valid, c)
	}
	var stopped sets.Set[string]
	snap.Conflicts, stopped = s.resolve(snap.Valid)
	slices.SortFunc(snap.Valid, byName)
	snap.Sets = make([]*inject.CompiledSet, 0, len(snap.Valid)-stopped.Len())
	for _, c := range snap.Valid {
		if !stopped.Has(c.Name()) {
			snap.Sets = append(snap.Sets, c)
		}
	}
	for n, err := range s.invalid {
		snap.Invalid[n] = err
	}
	snap.PinMissing = maps.Clone(s.pinMissing)
	prev := s.current.Swap(snap)
	if changed := changedConflicts(prev.Conflicts, snap.Conflicts); len(changed) > 0 {
		for _, f := range s.subscribers {
			f(changed)
		}
	}
}

// resolve finds every conflicting pair and stops the newer set of each: sets are taken oldest
// first (creation time, then name), and a set is stopped when it conflicts with an older set
// that injects. A set stopped by one conflict cannot stop a newer one: it injects nothing.
func (s *Store) resolve(valid []*inject.CompiledSet) (map[string][]Conflict, sets.Set[string]) {
	byAge := slices.Clone(valid)
	slices.SortFunc(byAge, func(a, b *inject.CompiledSet) int {
		if c := a.Set.CreationTimestamp.Compare(b.Set.CreationTimestamp.Time); c != 0 {
			return c
		}
		return byName(a, b)
	})
	out := map[string][]Conflict{}
	stopped := sets.New[string]()
	var injecting []*inject.CompiledSet
	for _, c := range byAge {
		for _, older := range injecting {
			if fields := s.conflicts(c, older); len(fields) > 0 {
				stopped.Insert(c.Name())
				out[c.Name()] = append(out[c.Name()], Conflict{With: older.Name(), Stopped: true, Fields: fields})
				out[older.Name()] = append(out[older.Name()], Conflict{With: c.Name(), Fields: s.conflicts(older, c)})
			}
		}
		if !stopped.Has(c.Name()) {
			injecting = append(injecting, c)
		}
	}
	for _, list := range out {
		slices.SortFunc(list, func(a, b Conflict) int { return strings.Compare(a.With, b.With) })
	}
	return out, stopped
}

func byName(a, b *inject.CompiledSet) int { return strings.Compare(a.Name(), b.Name()) }

// changedConflicts returns, sorted, the names whose conflicts differ between two snapshots.
func changedConflicts(before, after map[string][]Conflict) []string {
	changed := sets.New[string]()
	for name, list := range after {
		if !reflect.DeepEqual(list, before[name]) {
			changed.Insert(name)
		}
	}
	for name := range before {
		if _, ok := after[name]; !ok {
			changed.Insert(name)
		}
	}
	return sets.List(changed)
}

// RevisionEventHandler feeds the Store from an informer of the SidecarSets' revisions.
func (s *Store) RevisionEventHandler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.revisionObject(obj, s.UpsertRevision) },
		UpdateFunc: func(_, obj any) { s.revisionObject(obj, s.UpsertRevision) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			s.revisionObject(obj, s.DeleteRevision)
		},
	}
}

func (s *Store) revisionObject(obj any, f func(*appsv1.ControllerRevision)) {
	if r, ok := obj.(*appsv1.ControllerRevision); ok {
		f(r)
	}
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

func partial(set *appsv1alpha1.SidecarSet) bool {
	ref := set.Spec.InjectionStrategy.Revision
	return ref != nil && ref.Policy == appsv1alpha1.RevisionPolicyPartial
}

// replace publishes the Snapshot with the named set recompiled, when nothing that decides what
// conflicts changed: the set was valid and still is, and its cached pairs stand (same spec,
// same pinned digests, same creation time). Conflicts are then what the last publish found, and
// resolving them again would compare every pair of sets on each status write.
func (s *Store) replace(name string) {
	prev := s.current.Load()
	c := s.sets[name]
	snap := &Snapshot{Valid: swapped(prev.Valid, c), Sets: swapped(prev.Sets, c), Conflicts: prev.Conflicts,
		Invalid: prev.Invalid, PinMissing: maps.Clone(s.pinMissing)}
	s.current.Store(snap)
}

// swapped returns a copy of list, sorted by name, with the set of c's name replaced by c (the
// list as it is when it holds none).
func swapped(list []*inject.CompiledSet, c *inject.CompiledSet) []*inject.CompiledSet {
	out := slices.Clone(list)
	if i, ok := find(out, c.Name()); ok {
		out[i] = c
	}
	return out
}

// sameContent reports whether a and b inject the same content, every version of it.
func sameContent(a, b *inject.CompiledSet) bool {
	va, vb := versions(a), versions(b)
	return slices.EqualFunc(va, vb, func(x, y *inject.CompiledSet) bool { return x.Hash == y.Hash })
}

// find is where the set named name is, or would be, in list, sorted by name.
func find(list []*inject.CompiledSet, name string) (int, bool) {
	return slices.BinarySearchFunc(list, name, func(c *inject.CompiledSet, n string) int { return strings.Compare(c.Name(), n) })
}
