package snapshot

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

var epoch = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)

// agedSet is a SidecarSet created at epoch+age seconds that injects the named containers into
// pods labelled app=demo (or app=<app> when app is set).
func agedSet(name string, age int, app string, containers ...string) *appsv1alpha1.SidecarSet {
	if app == "" {
		app = "demo"
	}
	s := &appsv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1", Generation: 1, UID: k8stypes.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(age) * time.Second))},
		Spec: appsv1alpha1.SidecarSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
	}
	for _, c := range containers {
		s.Spec.Containers = append(s.Spec.Containers, appsv1alpha1.SidecarContainer{Container: corev1.Container{Name: c, Image: "img:1"}})
	}
	return s
}

// conflictSummary renders a snapshot's conflicts as "set: other(stopped|keeps) ..." lines.
func conflictSummary(s *Snapshot) []string {
	out := []string{}
	for name, list := range s.Conflicts {
		var parts []string
		for _, c := range list {
			role := "keeps"
			if c.Stopped {
				role = "stopped"
			}
			parts = append(parts, fmt.Sprintf("%s(%s)", c.With, role))
		}
		out = append(out, name+": "+strings.Join(parts, " "))
	}
	slices.Sort(out)
	return out
}

func validNames(s *Snapshot) []string {
	out := make([]string, len(s.Valid))
	for i, c := range s.Valid {
		out[i] = c.Name()
	}
	return out
}

func TestStoreResolvesConflicts(t *testing.T) {
	tests := []struct {
		name          string
		sets          []*appsv1alpha1.SidecarSet
		then          func(s *Store)
		wantInjecting []string
		wantConflicts []string
	}{
		{
			name:          "no shared names",
			sets:          []*appsv1alpha1.SidecarSet{agedSet("a", 0, "", "x"), agedSet("b", 1, "", "y")},
			wantInjecting: []string{"a", "b"}, wantConflicts: []string{},
		},
		{
			name:          "the older set keeps injecting, the newer one is stopped",
			sets:          []*appsv1alpha1.SidecarSet{agedSet("a-new", 5, "", "proxy"), agedSet("z-old", 1, "", "proxy")},
			wantInjecting: []string{"z-old"},
			wantConflicts: []string{"a-new: z-old(stopped)", "z-old: a-new(keeps)"},
		},
		{
			name:          "created in the same second: the name decides",
			sets:          []*appsv1alpha1.SidecarSet{agedSet("b", 3, "", "proxy"), agedSet("a", 3, "", "proxy")},
			wantInjecting: []string{"a"},
			wantConflicts: []string{"a: b(keeps)", "b: a(stopped)"},
		},
		{
			name: "a stopped set stops nothing",
			sets: []*appsv1alpha1.SidecarSet{
				agedSet("first", 0, "", "proxy"), agedSet("second", 1, "", "proxy", "logger"), agedSet("third", 2, "", "logger")},
			wantInjecting: []string{"first", "third"},
			wantConflicts: []string{"first: second(keeps)", "second: first(stopped)"},
		},
		{
			name: "one set against two older ones",
			sets: []*appsv1alpha1.SidecarSet{
				agedSet("one", 0, "", "proxy"), agedSet("two", 1, "", "logger"), agedSet("three", 2, "", "logger", "proxy")},
			wantInjecting: []string{"one", "two"},
			wantConflicts: []string{"one: three(keeps)", "three: one(stopped) two(stopped)", "two: three(keeps)"},
		},
		{
			name:          "disjoint selectors never conflict",
			sets:          []*appsv1alpha1.SidecarSet{agedSet("a", 0, "web", "proxy"), agedSet("b", 1, "db", "proxy")},
			wantInjecting: []string{"a", "b"}, wantConflicts: []string{},
		},
		{
			name: "deleting the older set lets the newer one inject",
			sets: []*appsv1alpha1.SidecarSet{agedSet("a", 0, "", "proxy"), agedSet("b", 1, "", "proxy")},
			then: func(s *Store) { s.Delete("a") }, wantInjecting: []string{"b"}, wantConflicts: []string{},
		},
		{
			name: "renaming the newer set's container ends the conflict",
			sets: []*appsv1alpha1.SidecarSet{agedSet("a", 0, "", "proxy"), agedSet("b", 1, "", "proxy")},
			then: func(s *Store) {
				b := agedSet("b", 1, "", "proxy-2")
				b.ResourceVersion, b.Generation = "2", 2
				s.Upsert(b)
			},
			wantInjecting: []string{"a", "b"}, wantConflicts: []string{},
		},
		{
			name: "moving the newer set to other pods ends the conflict",
			sets: []*appsv1alpha1.SidecarSet{agedSet("a", 0, "", "proxy"), agedSet("b", 1, "", "proxy")},
			then: func(s *Store) {
				b := agedSet("b", 1, "db", "proxy")
				b.ResourceVersion, b.Generation = "2", 2
				s.Upsert(b)
			},
			wantInjecting: []string{"a", "b"}, wantConflicts: []string{},
		},
		{
			name: "a status write keeps the verdict",
			sets: []*appsv1alpha1.SidecarSet{agedSet("a", 0, "", "proxy"), agedSet("b", 1, "", "proxy")},
			then: func(s *Store) {
				b := agedSet("b", 1, "", "proxy")
				b.ResourceVersion = "7"
				s.Upsert(b)
			},
			wantInjecting: []string{"a"}, wantConflicts: []string{"a: b(keeps)", "b: a(stopped)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewStore()
			for _, set := range tt.sets {
				s.Upsert(set)
			}
			if tt.then != nil {
				tt.then(s)
			}
			snap := s.Load()
			if got := names(snap); !slices.Equal(got, tt.wantInjecting) {
				t.Errorf("injecting = %q, want %q", got, tt.wantInjecting)
			}
			if got := conflictSummary(snap); !slices.Equal(got, tt.wantConflicts) {
				t.Errorf("conflicts = %q, want %q", got, tt.wantConflicts)
			}
			var all []string
			for _, set := range tt.sets {
				if _, ok := s.sets[set.Name]; ok {
					all = append(all, set.Name)
				}
			}
			slices.Sort(all)
			if got := validNames(snap); !slices.Equal(got, all) {
				t.Errorf("valid = %q, want every compiled set %q", got, all)
			}
		})
	}
}

// TestConflictFieldsNameBothSides checks that each side's entry holds paths into its own spec.
func TestConflictFieldsNameBothSides(t *testing.T) {
	s := NewStore()
	s.Upsert(agedSet("old", 0, "", "proxy"))
	s.Upsert(agedSet("new", 1, "", "logger", "proxy"))
	c := s.Load().Conflicts
	if len(c["new"]) != 1 || len(c["new"][0].Fields) != 1 || !strings.HasPrefix(c["new"][0].Fields[0], "spec.containers[1].name") {
		t.Errorf("new's conflicts = %+v, want one field at spec.containers[1].name", c["new"])
	}
	if len(c["old"]) != 1 || len(c["old"][0].Fields) != 1 || !strings.HasPrefix(c["old"][0].Fields[0], "spec.containers[0].name") ||
		!strings.Contains(c["old"][0].Fields[0], `SidecarSet "new"`) {
		t.Errorf("old's conflicts = %+v, want one field at spec.containers[0].name naming SidecarSet \"new\"", c["old"])
	}
}

// TestSubscribeNamesWhatChanged checks that subscribers hear of exactly the sets whose
// conflicts changed, which is what makes the reconciler update the other set's status.
func TestSubscribeNamesWhatChanged(t *testing.T) {
	s := NewStore()
	var heard [][]string
	s.Subscribe(func(names []string) { heard = append(heard, slices.Clone(names)) })
	s.Upsert(agedSet("a", 0, "", "proxy"))
	s.Upsert(agedSet("c", 0, "", "other"))
	s.Upsert(agedSet("b", 1, "", "proxy"))
	status := agedSet("b", 1, "", "proxy")
	status.ResourceVersion = "9"
	s.Upsert(status)
	s.Delete("a")
	want := [][]string{{"a", "b"}, {"a", "b"}}
	if fmt.Sprint(heard) != fmt.Sprint(want) {
		t.Errorf("heard %q, want %q", heard, want)
	}
}

// TestStatusWriteReplacesTheSet checks that a status write (same generation) publishes the set as
// written, in Valid and, for a set that injects, in Sets, with the verdict it had, and leaves the
// snapshot before it as it was.
func TestStatusWriteReplacesTheSet(t *testing.T) {
	for _, name := range []string{"a", "b"} {
		t.Run(name, func(t *testing.T) {
			s := NewStore()
			s.Upsert(agedSet("a", 0, "", "proxy"))
			s.Upsert(agedSet("b", 1, "", "proxy"))
			s.Upsert(agedSet("c", 2, "", "logger"))
			before := s.Load()
			written := agedSet(name, map[string]int{"a": 0, "b": 1}[name], "", "proxy")
			written.ResourceVersion = "7"
			written.Status.MatchedPods = 3
			s.Upsert(written)
			snap := s.Load()
			if got, want := conflictSummary(snap), []string{"a: b(keeps)", "b: a(stopped)"}; !slices.Equal(got, want) {
				t.Errorf("conflicts = %q, want %q", got, want)
			}
			if got := names(snap); !slices.Equal(got, []string{"a", "c"}) {
				t.Errorf("injecting = %q, want [a c]", got)
			}
			for _, list := range [][]*inject.CompiledSet{snap.Valid, snap.Sets} {
				for _, c := range list {
					if c.Name() == name && c.Set.ResourceVersion != "7" {
						t.Errorf("%s published at resourceVersion %s, want 7", name, c.Set.ResourceVersion)
					}
				}
			}
			if !slices.Equal(validNames(snap), []string{"a", "b", "c"}) {
				t.Errorf("valid = %q, want [a b c]", validNames(snap))
			}
			// Resolved once, before the write: the same map, not a new one with the same content.
			if reflect.ValueOf(snap.Conflicts).Pointer() != reflect.ValueOf(before.Conflicts).Pointer() {
				t.Errorf("a status write resolved the conflicts again")
			}
			for _, c := range before.Valid {
				if c.Set.ResourceVersion != "1" {
					t.Errorf("the snapshot before the write changed: %s at resourceVersion %s", c.Name(), c.Set.ResourceVersion)
				}
			}
		})
	}
}

// BenchmarkStatusWrite is what the Store does with a status write (an update of a set that keeps
// its generation) among 100 SidecarSets, every one of them selecting the same pods.
func BenchmarkStatusWrite(b *testing.B) {
	s := NewStore()
	for i := range 100 {
		s.Upsert(agedSet(fmt.Sprintf("set-%03d", i), i, "", fmt.Sprintf("sidecar-%03d", i)))
	}
	set := agedSet("set-050", 50, "", "sidecar-050")
	for i := 0; b.Loop(); i++ {
		written := *set
		written.ResourceVersion = strconv.Itoa(i + 2)
		s.Upsert(&written)
	}
}
