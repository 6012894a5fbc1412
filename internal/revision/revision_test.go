package revision

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

func compiled(t *testing.T, image string, limit *int32) *inject.CompiledSet {
	t.Helper()
	set := &appsv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", UID: "uid-1", Labels: map[string]string{appsv1alpha1.CustomVersionLabel: "v" + image}},
		Spec: appsv1alpha1.SidecarSetSpec{
			Selector:             &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Containers:           []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "agent", Image: "agent:" + image}}},
			RevisionHistoryLimit: limit,
		},
	}
	c, err := inject.Compile(set)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// stored are revisions of agent at images 1..n (numbers 1..n), plus one of another set.
func stored(t *testing.T, n int) []appsv1.ControllerRevision {
	var out []appsv1.ControllerRevision
	for i := 1; i <= n; i++ {
		c := compiled(t, fmt.Sprint(i), nil)
		out = append(out, *Reconcile(c, "ops", nil, nil).Create)
		out[len(out)-1].Revision = int64(i)
	}
	other := compiled(t, "1", nil)
	other.Set.Name = "other"
	return append(out, *Reconcile(other, "ops", nil, nil).Create)
}

func TestReconcile(t *testing.T) {
	tests := []struct {
		name         string
		set          *inject.CompiledSet
		existing     []appsv1.ControllerRevision
		wantCreate   int64 // the new revision's number; 0: none
		wantRenumber int64
		wantDelete   []string
	}{
		{"first revision", compiled(t, "1", nil), nil, 1, 0, nil},
		{"current content stored and newest", compiled(t, "3", nil), stored(t, 3), 0, 0, nil},
		{"new content", compiled(t, "4", nil), stored(t, 3), 4, 0, nil},
		{"back to older content", compiled(t, "2", nil), stored(t, 3), 0, 4, nil},
		{"history limit default 10", compiled(t, "13", nil), stored(t, 12), 13, 0, []string{Name("agent", compiled(t, "1", nil).Hash), Name("agent", compiled(t, "2", nil).Hash)}},
		{"history limit 1", compiled(t, "3", ptr.To[int32](1)), stored(t, 3), 0, 0, []string{Name("agent", compiled(t, "1", nil).Hash)}},
		{"history limit 0, back to older content", compiled(t, "1", ptr.To[int32](0)), stored(t, 3), 0, 4,
			[]string{Name("agent", compiled(t, "2", nil).Hash), Name("agent", compiled(t, "3", nil).Hash)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Reconcile(tt.set, "ops", tt.existing, nil)
			if p.Current != Name("agent", tt.set.Hash) {
				t.Errorf("Current = %s", p.Current)
			}
			switch {
			case tt.wantCreate == 0 && p.Create != nil:
				t.Errorf("Create = %s, want none", p.Create.Name)
			case tt.wantCreate != 0 && (p.Create == nil || p.Create.Revision != tt.wantCreate || p.Create.Name != p.Current):
				t.Errorf("Create = %+v, want %s number %d", p.Create, p.Current, tt.wantCreate)
			}
			switch {
			case tt.wantRenumber == 0 && p.Renumber != nil:
				t.Errorf("Renumber = %s, want none", p.Renumber.Name)
			case tt.wantRenumber != 0 && (p.Renumber == nil || p.Renumber.Revision != tt.wantRenumber || p.Renumber.Name != p.Current):
				t.Errorf("Renumber = %+v, want %s number %d", p.Renumber, p.Current, tt.wantRenumber)
			}
			if !slices.Equal(p.Delete, tt.wantDelete) {
				t.Errorf("Delete = %v, want %v", p.Delete, tt.wantDelete)
			}
		})
	}
}

// TestRevisionRoundTrip: a stored revision gives back the content and hash it was made from,
// and carries what finds it: the set's name, the hash, the custom version, the owner.
func TestRevisionRoundTrip(t *testing.T) {
	c := compiled(t, "7", nil)
	r := Reconcile(c, "ops", nil, nil).Create
	if r.Namespace != "ops" || r.Labels[appsv1alpha1.RevisionSetLabel] != "agent" || r.Labels[appsv1alpha1.RevisionHashLabel] != c.Hash ||
		r.Labels[appsv1alpha1.CustomVersionLabel] != "v7" || len(r.OwnerReferences) != 1 || r.OwnerReferences[0].UID != "uid-1" {
		t.Errorf("revision metadata %+v", r.ObjectMeta)
	}
	now := compiled(t, "8", nil)
	back, err := Content(now.Set, r)
	if err != nil {
		t.Fatal(err)
	}
	if got := inject.Hash(&back.Spec); got != c.Hash || back.Spec.Containers[0].Image != "agent:7" {
		t.Errorf("content of the revision: hash %s image %s, want %s agent:7", got, back.Spec.Containers[0].Image, c.Hash)
	}
	if now.Set.Spec.Containers[0].Image != "agent:8" {
		t.Errorf("Content modified the set it was given")
	}
}

// storedPtrs is stored as pointers, as the callers of Pinned and Resolve hold revisions.
func storedPtrs(t *testing.T, n int) []*appsv1.ControllerRevision {
	revs := stored(t, n)
	ptrs := make([]*appsv1.ControllerRevision, len(revs))
	for i := range revs {
		ptrs[i] = &revs[i]
	}
	return ptrs
}

func TestPinned(t *testing.T) {
	ptrs := storedPtrs(t, 3)
	v2 := compiled(t, "2", nil)
	set := compiled(t, "9", nil).Set
	for _, tt := range []struct {
		ref  *appsv1alpha1.RevisionRef
		want string
	}{
		{nil, ""},
		{&appsv1alpha1.RevisionRef{Name: Name("agent", v2.Hash)}, Name("agent", v2.Hash)},
		{&appsv1alpha1.RevisionRef{CustomVersion: "v2"}, Name("agent", v2.Hash)},
		{&appsv1alpha1.RevisionRef{CustomVersion: "v7"}, ""},
		{&appsv1alpha1.RevisionRef{Name: Name("other", compiled(t, "1", nil).Hash)}, ""}, // another set's
	} {
		set.Spec.InjectionStrategy.Revision = tt.ref
		got := Pinned(set, ptrs)
		if (got == nil && tt.want != "") || (got != nil && got.Name != tt.want) {
			t.Errorf("Pinned(%+v) = %v, want %q", tt.ref, got, tt.want)
		}
	}
}

// TestResolve: a set injects the content of the revision it pins, its own spec while it pins
// none, and its own spec with the reason while the pinned revision is missing or unreadable.
func TestResolve(t *testing.T) {
	ptrs := storedPtrs(t, 2)
	v1 := compiled(t, "1", nil)
	broken := ptrs[1].DeepCopy()
	broken.Data.Raw = []byte(`{"containers": 7}`)
	for _, tt := range []struct {
		name      string
		ref       *appsv1alpha1.RevisionRef
		revs      []*appsv1.ControllerRevision
		wantImage string
		missing   string
	}{
		{name: "no pin", revs: ptrs, wantImage: "agent:9"},
		{name: "pinned by name", ref: &appsv1alpha1.RevisionRef{Name: Name("agent", v1.Hash)}, revs: ptrs, wantImage: "agent:1"},
		{name: "pinned by custom version", ref: &appsv1alpha1.RevisionRef{CustomVersion: "v1"}, revs: ptrs, wantImage: "agent:1"},
		{name: "not stored", ref: &appsv1alpha1.RevisionRef{CustomVersion: "v7"}, revs: ptrs, wantImage: "agent:9",
			missing: "the revision with " + appsv1alpha1.CustomVersionLabel + "=v7, which is not stored"},
		{name: "unreadable", ref: &appsv1alpha1.RevisionRef{Name: broken.Name}, revs: []*appsv1.ControllerRevision{broken}, wantImage: "agent:9",
			missing: "revision " + broken.Name + ", which cannot be read"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			set := compiled(t, "9", nil).Set
			set.Spec.InjectionStrategy.Revision = tt.ref
			content, missing := Resolve(set, tt.revs)
			if got := content.Spec.Containers[0].Image; got != tt.wantImage {
				t.Errorf("injects %s, want %s", got, tt.wantImage)
			}
			if tt.missing == "" && missing != "" || tt.missing != "" && !strings.HasPrefix(missing, tt.missing) {
				t.Errorf("missing = %q, want %q", missing, tt.missing)
			}
			if content.Name != set.Name || !reflect.DeepEqual(content.Spec.InjectionStrategy.Revision, tt.ref) {
				t.Errorf("the resolved set lost its name or pin: %s, %+v", content.Name, content.Spec.InjectionStrategy.Revision)
			}
		})
	}
}

// TestReconcileKeepsRecordedRevisions: a revision that a pod still records is never pruned,
// whatever the history limit, and the limit counts only the others.
func TestReconcileKeepsRecordedRevisions(t *testing.T) {
	name := func(image string) string { return Name("agent", compiled(t, image, nil).Hash) }
	tests := []struct {
		name       string
		limit      int32
		inUse      []string // images whose revisions pods record
		wantDelete []string
	}{
		{"limit 0, nothing recorded", 0, nil, []string{name("1"), name("2"), name("3")}},
		{"limit 0 keeps what pods record", 0, []string{"2"}, []string{name("1"), name("3")}},
		{"limit 1 counts only what no pod records", 1, []string{"1"}, []string{name("2")}},
		{"everything recorded", 0, []string{"1", "2", "3"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inUse := map[string]bool{}
			for _, image := range tt.inUse {
				inUse[compiled(t, image, nil).Hash] = true
			}
			p := Reconcile(compiled(t, "4", ptr.To(tt.limit)), "ops", stored(t, 3), func(hash string) bool { return inUse[hash] })
			if !slices.Equal(p.Delete, tt.wantDelete) {
				t.Errorf("Delete = %v, want %v", p.Delete, tt.wantDelete)
			}
		})
	}
}

// TestReconcileKeepsPinnedRevision: the revision the set pins (spec.injectionStrategy.revision,
// by name or custom version) is never pruned while the set pins it, even when no Pod records it
// any more (the running Pods rolled to the current spec, which is what a pin is for); pruned, it
// would leave every new Pod with the current spec. The history limit counts only the others.
func TestReconcileKeepsPinnedRevision(t *testing.T) {
	name := func(image string) string { return Name("agent", compiled(t, image, nil).Hash) }
	tests := []struct {
		name       string
		ref        *appsv1alpha1.RevisionRef
		current    string // the set's image; its custom-version label is "v" + image
		limit      int32
		wantDelete []string
	}{
		{name: "pinned by name, Always", ref: &appsv1alpha1.RevisionRef{Name: name("1")}, current: "4", limit: 1,
			wantDelete: []string{name("2")}},
		{name: "pinned by custom version, Partial", ref: &appsv1alpha1.RevisionRef{CustomVersion: "v1", Policy: appsv1alpha1.RevisionPolicyPartial},
			current: "4", limit: 1, wantDelete: []string{name("2")}},
		{name: "limit 0 keeps the pin alone", ref: &appsv1alpha1.RevisionRef{Name: name("2")}, current: "4", limit: 0,
			wantDelete: []string{name("1"), name("3")}},
		{name: "a pin on the current revision keeps no other", ref: &appsv1alpha1.RevisionRef{CustomVersion: "v3"}, current: "3", limit: 0,
			wantDelete: []string{name("1"), name("2")}},
		{name: "a pin that resolves to nothing keeps no other", ref: &appsv1alpha1.RevisionRef{CustomVersion: "v7"}, current: "4", limit: 1,
			wantDelete: []string{name("1"), name("2")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := compiled(t, tt.current, ptr.To(tt.limit))
			c.Set.Spec.InjectionStrategy.Revision = tt.ref
			pinned := Pinned(c.Set, storedPtrs(t, 3))
			p := Reconcile(c, "ops", stored(t, 3), func(string) bool { return false })
			if pinned != nil && pinned.Name != p.Current && slices.Contains(p.Delete, pinned.Name) {
				t.Errorf("Reconcile deletes %s, the revision spec.injectionStrategy.revision pins (Delete = %v): new pods then get the current spec", pinned.Name, p.Delete)
			}
			if !slices.Equal(p.Delete, tt.wantDelete) {
				t.Errorf("Delete = %v, want %v", p.Delete, tt.wantDelete)
			}
		})
	}
}

// TestReconcileFollowsPinByCustomVersion: a pin by custom version resolves to the newest
// revision with that version; once the current content carries it (stored anew, or renumbered
// by a rollback), the older revisions with that version are ordinary history.
func TestReconcileFollowsPinByCustomVersion(t *testing.T) {
	existing := stored(t, 3)
	existing[0].Labels[appsv1alpha1.CustomVersionLabel] = "stable" // images 1 and 2 both "stable"
	existing[1].Labels[appsv1alpha1.CustomVersionLabel] = "stable"
	c := compiled(t, "1", ptr.To[int32](0)) // back to image 1: renumbered, the newest "stable"
	c.Set.Spec.InjectionStrategy.Revision = &appsv1alpha1.RevisionRef{CustomVersion: "stable"}
	p := Reconcile(c, "ops", existing, nil)
	want := []string{Name("agent", compiled(t, "2", nil).Hash), Name("agent", compiled(t, "3", nil).Hash)}
	if p.Renumber == nil || !slices.Equal(p.Delete, want) {
		t.Errorf("Renumber %v, Delete = %v; want the current renumbered and %v deleted", p.Renumber != nil, p.Delete, want)
	}
	c = compiled(t, "4", ptr.To[int32](0)) // new content: image 2 is the newest "stable"
	c.Set.Spec.InjectionStrategy.Revision = &appsv1alpha1.RevisionRef{CustomVersion: "stable"}
	p = Reconcile(c, "ops", existing, nil)
	want = []string{Name("agent", compiled(t, "1", nil).Hash), Name("agent", compiled(t, "3", nil).Hash)}
	if !slices.Equal(p.Delete, want) {
		t.Errorf("Delete = %v, want %v (image 2's revision, the newest stable, kept)", p.Delete, want)
	}
}

// TestCompileWaitingForDigests: a set pinning digests stores its pinned content; edited to an
// image not resolved yet, it compiles to that stored revision (what new pods keep getting), and
// says which image waits; with no revision stored, or another set's, it compiles to nothing.
func TestCompileWaitingForDigests(t *testing.T) {
	const digest = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	set := &appsv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", UID: "uid-1"},
		Spec: appsv1alpha1.SidecarSetSpec{
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Containers:  []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "agent", Image: "agent:1"}}},
			ImagePolicy: &appsv1alpha1.ImagePolicy{Pin: appsv1alpha1.ImagePinDigest},
		},
		Status: appsv1alpha1.SidecarSetStatus{Images: []appsv1alpha1.ResolvedImage{{Image: "agent:1", Digest: digest}}},
	}
	first, err := inject.Compile(set)
	if err != nil {
		t.Fatal(err)
	}
	rev := Reconcile(first, "ops", nil, nil).Create
	if got := string(rev.Data.Raw); !strings.Contains(got, "agent:1@"+digest) {
		t.Fatalf("the revision stores %s; want the pinned image agent:1@%s", got, digest)
	}
	edited := set.DeepCopy()
	edited.Spec.Containers[0].Image = "agent:2"
	edited.Status.UpdateRevision = rev.Name
	lookup := func(revs ...*appsv1.ControllerRevision) func(string) *appsv1.ControllerRevision {
		return func(name string) *appsv1.ControllerRevision {
			for _, r := range revs {
				if r.Name == name {
					return r
				}
			}
			return nil
		}
	}

	c, waiting, err := Compile(edited, edited, lookup(rev))
	if err != nil || waiting == nil || c == nil {
		t.Fatalf("Compile() = %v, %v, %v; want the stored revision, waiting for agent:2", c, waiting, err)
	}
	if c.Hash != first.Hash || c.Set.Spec.Containers[0].Image != "agent:1@"+digest {
		t.Errorf("compiled hash %s image %s; want the stored revision's %s, agent:1@%s", c.Hash, c.Set.Spec.Containers[0].Image, first.Hash, digest)
	}
	if !slices.Equal(waiting.Images, []string{"agent:2"}) {
		t.Errorf("waiting for %q, want agent:2", waiting.Images)
	}

	other := rev.DeepCopy()
	other.Labels[appsv1alpha1.RevisionSetLabel] = "other"
	for name, stored := range map[string]func(string) *appsv1.ControllerRevision{"nothing stored": lookup(), "another set's": lookup(other)} {
		if c, waiting, err := Compile(edited, edited, stored); c != nil || waiting == nil || err == nil {
			t.Errorf("%s: Compile() = %v, %v, %v; want nothing, waiting for agent:2", name, c, waiting, err)
		}
	}

	// Resolved, the edited set compiles to its own content.
	edited.Status.Images = append(edited.Status.Images, appsv1alpha1.ResolvedImage{Image: "agent:2", Digest: digest})
	if c, waiting, err = Compile(edited, edited, lookup(rev)); err != nil || waiting != nil || c.Set.Spec.Containers[0].Image != "agent:2@"+digest {
		t.Errorf("resolved: Compile() = %v, %v, %v; want agent:2@%s", c, waiting, err, digest)
	}
}
