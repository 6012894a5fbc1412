package snapshot

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/revision"
	"github.com/sidecarset/sidecarset-operator/test/builders"
)

// validSet returns a valid SidecarSet at resourceVersion rv, selecting app=demo, with one
// sidecar named after the set that runs image.
func validSet(name, rv, image string) *appsv1alpha1.SidecarSet {
	return builders.SidecarSet(name, builders.ResourceVersion(rv), builders.Selecting("demo"), builders.WithImage(image))
}

// invalidSet returns a SidecarSet whose selector cannot be compiled.
func invalidSet(name, rv string) *appsv1alpha1.SidecarSet {
	s := validSet(name, rv, "img:1")
	s.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "app", Operator: "Near", Values: []string{"demo"}}}}
	return s
}

func names(s *Snapshot) []string {
	out := make([]string, len(s.Sets))
	for i, c := range s.Sets {
		out[i] = c.Name()
	}
	return out
}

func invalidNames(s *Snapshot) []string {
	out := make([]string, 0, len(s.Invalid))
	for n := range s.Invalid {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func TestStoreSortedUpsertDelete(t *testing.T) {
	tests := []struct {
		name string
		ops  func(s *Store)
		want []string
	}{
		{name: "empty", ops: func(*Store) {}, want: []string{}},
		{name: "inserted out of order", ops: func(s *Store) {
			for _, n := range []string{"mesh-proxy", "a-first", "log-agent", "z-last", "log-agent-2"} {
				s.Upsert(validSet(n, "1", "img:1"))
			}
		}, want: []string{"a-first", "log-agent", "log-agent-2", "mesh-proxy", "z-last"}},
		{name: "deleted from the middle", ops: func(s *Store) {
			for _, n := range []string{"c", "a", "b"} {
				s.Upsert(validSet(n, "1", "img:1"))
			}
			s.Delete("b")
		}, want: []string{"a", "c"}},
		{name: "deleting an unknown name", ops: func(s *Store) {
			s.Upsert(validSet("a", "1", "img:1"))
			s.Delete("nope")
		}, want: []string{"a"}},
		{name: "updated keeps one entry", ops: func(s *Store) {
			s.Upsert(validSet("b", "1", "img:1"))
			s.Upsert(validSet("a", "1", "img:1"))
			s.Upsert(validSet("b", "2", "img:2"))
		}, want: []string{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewStore()
			tt.ops(s)
			if got := names(s.Load()); !slices.Equal(got, tt.want) {
				t.Errorf("Sets = %v, want %v", got, tt.want)
			}
			for _, n := range tt.want {
				if c, ok := s.Load().Get(n); !ok || c.Name() != n {
					t.Errorf("Get(%q) = %v, %v", n, c, ok)
				}
			}
		})
	}
}

func TestSnapshotGet(t *testing.T) {
	s := NewStore()
	if _, ok := s.Load().Get("x"); ok {
		t.Errorf("Get on the empty snapshot found something")
	}
	for _, n := range []string{"b", "d", "f"} {
		s.Upsert(validSet(n, "1", "img-"+n))
	}
	snap := s.Load()
	for _, tt := range []struct {
		name  string
		found bool
	}{{"a", false}, {"b", true}, {"c", false}, {"d", true}, {"f", true}, {"g", false}, {"", false}} {
		c, ok := snap.Get(tt.name)
		if ok != tt.found || (ok && (c.Name() != tt.name || c.Set.Spec.Containers[0].Image != "img-"+tt.name)) {
			t.Errorf("Get(%q) = %v, %v; want found %v", tt.name, c, ok, tt.found)
		}
	}
}

func TestStoreInvalid(t *testing.T) {
	s := NewStore()
	s.Upsert(validSet("a", "1", "img:1"))
	s.Upsert(validSet("log-agent", "1", "img:1"))

	// An update that cannot be compiled takes the set out of injection.
	s.Upsert(invalidSet("log-agent", "2"))
	snap := s.Load()
	if got := names(snap); !slices.Equal(got, []string{"a"}) {
		t.Errorf("Sets = %v, want [a]", got)
	}
	if _, ok := snap.Get("log-agent"); ok {
		t.Errorf("Get found the invalid set")
	}
	err := snap.Invalid["log-agent"]
	if err == nil || !strings.Contains(err.Error(), `"log-agent"`) || !strings.Contains(err.Error(), "spec.selector") {
		t.Errorf("Invalid[log-agent] = %v, want an error naming the set and spec.selector", err)
	}

	// Other ways of being invalid.
	noSelector := validSet("no-selector", "1", "img:1")
	noSelector.Spec.Selector = nil
	emptySelector := validSet("empty-selector", "1", "img:1")
	emptySelector.Spec.Selector = &metav1.LabelSelector{}
	badNamespaceSelector := validSet("bad-ns", "1", "img:1")
	badNamespaceSelector.Spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "team", Operator: metav1.LabelSelectorOpExists, Values: []string{"x"}}}}
	for _, set := range []*appsv1alpha1.SidecarSet{noSelector, emptySelector, badNamespaceSelector} {
		s.Upsert(set)
	}
	if got, want := invalidNames(s.Load()), []string{"bad-ns", "empty-selector", "log-agent", "no-selector"}; !slices.Equal(got, want) {
		t.Errorf("Invalid = %v, want %v", got, want)
	}

	// Fixed: back in Sets, gone from Invalid.
	s.Upsert(validSet("log-agent", "3", "img:3"))
	if got := names(s.Load()); !slices.Equal(got, []string{"a", "log-agent"}) {
		t.Errorf("after the fix, Sets = %v", got)
	}
	if _, ok := s.Load().Invalid["log-agent"]; ok {
		t.Errorf("after the fix, log-agent is still invalid")
	}

	// Deleting an invalid set forgets it.
	s.Delete("no-selector")
	if _, ok := s.Load().Invalid["no-selector"]; ok {
		t.Errorf("a deleted invalid set is still listed")
	}
}

func TestStoreResourceVersion(t *testing.T) {
	s := NewStore()
	s.Upsert(validSet("a", "5", "img:1"))
	before := s.Load()
	compiled, _ := before.Get("a")

	// The informer's resync delivers the same object again: nothing is recompiled or published.
	s.Upsert(validSet("a", "5", "img:ignored"))
	if s.Load() != before {
		t.Errorf("upserting the same resourceVersion published a new snapshot")
	}
	if c, _ := s.Load().Get("a"); c != compiled {
		t.Errorf("upserting the same resourceVersion recompiled the set")
	}

	s.Upsert(validSet("a", "6", "img:2"))
	if s.Load() == before {
		t.Fatalf("a new resourceVersion published nothing")
	}
	if c, _ := s.Load().Get("a"); c.Set.ResourceVersion != "6" || c.Hash == compiled.Hash {
		t.Errorf("after resourceVersion 6: rv %s, hash %s (was %s)", c.Set.ResourceVersion, c.Hash, compiled.Hash)
	}

	// Objects without a resourceVersion (built in tests or by hand) always replace.
	s.Upsert(validSet("b", "", "img:1"))
	s.Upsert(validSet("b", "", "img:2"))
	if c, _ := s.Load().Get("b"); c.Set.Spec.Containers[0].Image != "img:2" {
		t.Errorf("an upsert without resourceVersion was dropped: image %s", c.Set.Spec.Containers[0].Image)
	}
}

func TestSnapshotsAreImmutable(t *testing.T) {
	s := NewStore()
	s.Upsert(validSet("b", "1", "img:1"))
	s.Upsert(validSet("d", "1", "img:1"))
	s.Upsert(invalidSet("x", "1"))
	old := s.Load()
	oldSets := slices.Clone(old.Sets)
	oldB, _ := old.Get("b")

	s.Upsert(validSet("a", "1", "img:1"))
	s.Upsert(validSet("c", "1", "img:1"))
	s.Upsert(validSet("b", "2", "img:2"))
	s.Upsert(invalidSet("y", "1"))
	s.Delete("d")
	s.Delete("x")

	if !slices.Equal(old.Sets, oldSets) {
		t.Errorf("a handed-out snapshot changed: %v, was %v", names(old), oldSets)
	}
	if c, _ := old.Get("b"); c != oldB || c.Set.ResourceVersion != "1" {
		t.Errorf("a handed-out snapshot's set b changed")
	}
	if got := invalidNames(old); !slices.Equal(got, []string{"x"}) {
		t.Errorf("a handed-out snapshot's Invalid changed: %v", got)
	}
	if got := names(s.Load()); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("current Sets = %v", got)
	}
	if got := invalidNames(s.Load()); !slices.Equal(got, []string{"y"}) {
		t.Errorf("current Invalid = %v", got)
	}
}

func TestStoreReady(t *testing.T) {
	s := NewStore()
	if s.Ready() {
		t.Errorf("a new store is Ready before SetSynced")
	}
	var synced atomic.Bool
	s.SetSynced(synced.Load)
	if s.Ready() {
		t.Errorf("Ready before the informer synced")
	}
	synced.Store(true)
	if !s.Ready() {
		t.Errorf("not Ready after the informer synced")
	}
	s.SetSynced(func() bool { return false })
	if s.Ready() {
		t.Errorf("Ready ignores the newly installed function")
	}
}

func TestEventHandler(t *testing.T) {
	s := NewStore()
	h := s.EventHandler()

	h.OnAdd(validSet("b", "1", "img:1"), true)
	h.OnAdd(validSet("a", "1", "img:1"), false)
	h.OnAdd(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, false) // not a SidecarSet: ignored
	if got := names(s.Load()); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("after adds, Sets = %v", got)
	}

	h.OnUpdate(validSet("a", "1", "img:1"), validSet("a", "2", "img:2"))
	if c, _ := s.Load().Get("a"); c.Set.Spec.Containers[0].Image != "img:2" {
		t.Errorf("update not applied: image %s", c.Set.Spec.Containers[0].Image)
	}
	h.OnUpdate(validSet("b", "1", "img:1"), invalidSet("b", "2"))
	if _, ok := s.Load().Invalid["b"]; !ok {
		t.Errorf("an update to an invalid spec is not listed as invalid")
	}

	h.OnDelete(validSet("a", "2", "img:2"))
	if _, ok := s.Load().Get("a"); ok {
		t.Errorf("delete not applied")
	}

	// A delete missed while the watch was down arrives as a tombstone.
	h.OnAdd(validSet("c", "1", "img:1"), false)
	h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "c", Obj: validSet("c", "1", "img:1")})
	if _, ok := s.Load().Get("c"); ok {
		t.Errorf("tombstone delete not applied")
	}
	h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "b", Obj: invalidSet("b", "2")})
	if len(s.Load().Invalid) != 0 {
		t.Errorf("tombstone delete of an invalid set not applied: %v", s.Load().Invalid)
	}

	// Tombstones and deletes of other kinds are ignored.
	h.OnAdd(validSet("d", "1", "img:1"), false)
	h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "d", Obj: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "d"}}})
	h.OnDelete(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "d"}})
	h.OnDelete(nil)
	if got := names(s.Load()); !slices.Equal(got, []string{"d"}) {
		t.Errorf("after foreign deletes, Sets = %v, want [d]", got)
	}
}

// TestStoreConcurrent reads snapshots while sets are added, updated and deleted; run with
// -race. Every snapshot a reader sees must be sorted and findable by name.
func TestStoreConcurrent(t *testing.T) {
	s := NewStore()
	s.SetSynced(func() bool { return true })
	var wg sync.WaitGroup
	var done atomic.Bool
	for range 2 {
		wg.Go(func() {
			for !done.Load() {
				snap := s.Load()
				if !slices.IsSortedFunc(snap.Sets, func(a, b *inject.CompiledSet) int { return strings.Compare(a.Name(), b.Name()) }) {
					t.Errorf("unsorted snapshot: %v", names(snap))
					return
				}
				for _, c := range snap.Sets {
					if got, ok := snap.Get(c.Name()); !ok || got != c {
						t.Errorf("Get(%q) misses a set of its own snapshot", c.Name())
						return
					}
				}
				_ = s.Ready()
			}
		})
	}
	h := s.EventHandler()
	for i := range 300 {
		name := fmt.Sprintf("set-%02d", (i*7)%40)
		switch i % 5 {
		case 3:
			h.OnDelete(validSet(name, "", ""))
		case 4:
			h.OnUpdate(nil, invalidSet(name, fmt.Sprint(i)))
		default:
			h.OnAdd(validSet(name, fmt.Sprint(i), "img:1"), false)
		}
	}
	done.Store(true)
	wg.Wait()
}

// TestStorePinnedRevision: a set that pins a stored revision injects that revision's content;
// until the revision is there, and after it goes, it injects its current spec and the
// snapshot says what it pins.
func TestStorePinnedRevision(t *testing.T) {
	s := NewStore()
	c1, rev := storedRevision(t, "agent:1")
	v2 := validSet("agent", "2", "agent:2")
	v2.Spec.InjectionStrategy.Revision = &appsv1alpha1.RevisionRef{Name: rev.Name}
	c2, err := inject.Compile(v2)
	if err != nil {
		t.Fatal(err)
	}
	hash := func() string {
		c, ok := s.Load().Get("agent")
		if !ok {
			t.Fatal("agent is not in the snapshot")
		}
		return c.Hash
	}

	s.Upsert(v2)
	if hash() != c2.Hash || s.Load().PinMissing["agent"] != "revision "+rev.Name+", which is not stored" {
		t.Errorf("before the revision: hash %s (current %s), pin missing %q", hash(), c2.Hash, s.Load().PinMissing)
	}
	s.UpsertRevision(rev)
	if hash() != c1.Hash || len(s.Load().PinMissing) != 0 {
		t.Errorf("with the revision: hash %s, want the pinned %s; pin missing %q", hash(), c1.Hash, s.Load().PinMissing)
	}
	if c, _ := s.Load().Get("agent"); c.Set.Spec.Containers[0].Image != "agent:1" || c.Set.Spec.InjectionStrategy.Revision == nil {
		t.Errorf("pinned set: image %s, pin %v; want the revision's image and the set's own strategy", c.Set.Spec.Containers[0].Image, c.Set.Spec.InjectionStrategy.Revision)
	}
	s.DeleteRevision(rev)
	if hash() != c2.Hash || s.Load().PinMissing["agent"] == "" {
		t.Errorf("after the revision went: hash %s (current %s), pin missing %q", hash(), c2.Hash, s.Load().PinMissing)
	}
}

// TestStorePartialRevision: a set that pins a revision with policy Partial injects either
// content, so it conflicts with a set that clashes with its current spec only.
func TestStorePartialRevision(t *testing.T) {
	s := NewStore()
	c1, rev := storedRevision(t, "agent:1")
	v2 := validSet("agent", "2", "agent:2")
	v2.Spec.InjectionStrategy.Revision = &appsv1alpha1.RevisionRef{Name: rev.Name, Policy: appsv1alpha1.RevisionPolicyPartial}
	v2.Spec.Containers = append(v2.Spec.Containers, appsv1alpha1.SidecarContainer{Container: corev1.Container{Name: "shared-name", Image: "logs:1"}})
	s.UpsertRevision(rev)
	s.Upsert(v2)
	c, _ := s.Load().Get("agent")
	if c.Hash != c1.Hash || c.Latest() == nil || c.Latest().Set.Spec.Containers[0].Image != "agent:2" {
		t.Fatalf("Partial set: hash %s (pinned %s), latest %v; want the pinned revision and the current spec beside it", c.Hash, c1.Hash, c.Latest())
	}

	// A newer set declaring a container of the name only the current spec has is stopped.
	other := validSet("other", "1", "other:1")
	other.CreationTimestamp = metav1.NewTime(v2.CreationTimestamp.Add(time.Hour))
	other.Spec.Containers[0].Name = "shared-name"
	s.Upsert(other)
	conflicts := s.Load().Conflicts["other"]
	if len(conflicts) != 1 || !conflicts[0].Stopped || conflicts[0].With != "agent" {
		t.Errorf("conflicts of other: %+v, want it stopped by agent's current spec", conflicts)
	}

	// With Always, only the pinned revision injects.
	always := v2.DeepCopy()
	always.ResourceVersion = "3"
	always.Generation++
	always.Spec.InjectionStrategy.Revision.Policy = appsv1alpha1.RevisionPolicyAlways
	s.Upsert(always)
	if c, _ := s.Load().Get("agent"); c.Latest() != nil || len(s.Load().Conflicts["other"]) != 0 {
		t.Errorf("Always: latest %v, conflicts %+v; want the pinned revision only", c.Latest(), s.Load().Conflicts["other"])
	}
}

// storedRevision is the revision the operator stores for set agent running image, and that
// set compiled.
func storedRevision(t *testing.T, image string) (*inject.CompiledSet, *appsv1.ControllerRevision) {
	t.Helper()
	c, err := inject.Compile(validSet("agent", "1", image))
	if err != nil {
		t.Fatal(err)
	}
	return c, revision.Reconcile(c, "ops", nil, nil).Create
}

// TestWaitingDigestsKeepInjecting: a set pinning digests whose edited image has none yet goes
// on injecting the revision it injected last; with a Partial pin to a stored revision, every
// new pod gets the pinned one meanwhile (the current spec has nothing to inject yet).
func TestWaitingDigestsKeepInjecting(t *testing.T) {
	_, last := storedRevision(t, "agent:1")
	waiting := func(edit func(*appsv1alpha1.SidecarSet)) *appsv1alpha1.SidecarSet {
		set := validSet("agent", "2", "agent:2")
		set.Spec.ImagePolicy = &appsv1alpha1.ImagePolicy{Pin: appsv1alpha1.ImagePinDigest}
		set.Status.UpdateRevision = last.Name
		edit(set)
		return set
	}
	for name, set := range map[string]*appsv1alpha1.SidecarSet{
		"the last revision": waiting(func(*appsv1alpha1.SidecarSet) {}),
		"a Partial pin": waiting(func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InjectionStrategy.Revision = &appsv1alpha1.RevisionRef{Name: last.Name, Policy: appsv1alpha1.RevisionPolicyPartial}
		}),
	} {
		t.Run(name, func(t *testing.T) {
			s := NewStore()
			s.UpsertRevision(last)
			s.Upsert(set)
			c, ok := s.Load().Get("agent")
			if !ok {
				t.Fatalf("the set injects nothing while agent:2 waits (invalid: %v)", s.Load().Invalid["agent"])
			}
			if got := c.Set.Spec.Containers[0].Image; got != "agent:1" {
				t.Errorf("new pods get %s, want the last revision's agent:1", got)
			}
		})
	}
	// Without the last revision stored, the set injects nothing, and says why.
	s := NewStore()
	s.Upsert(waiting(func(*appsv1alpha1.SidecarSet) {}))
	if _, ok := s.Load().Get("agent"); ok || s.Load().Invalid["agent"] == nil {
		t.Errorf("with no revision stored, a waiting set injects (or says nothing): %v", s.Load().Invalid["agent"])
	}
}
