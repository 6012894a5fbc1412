package inject

import (
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/sets"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/podrules"
)

// InPlace is how a running Pod gets a SidecarSet's current content without being recreated:
// the sidecars whose image changes, and the new record. Only an image can change in a running
// Pod's containers; when anything else of the set's content differs, Blocked says what, and the
// Pod stays as it is until it is recreated.
type InPlace struct {
	// SidecarSet is the set whose injection is brought up to date.
	SidecarSet string
	// From and To are the set's hash in the Pod's record and the set's current hash.
	From, To string
	// Images are the sidecars whose image changes, in the Pod's order (init containers first).
	Images []ImageChange
	// Resources are the sidecars whose requests or limits change: applied through the Pod's
	// resize subresource (in-place resize), before the images.
	Resources []ResourceChange
	// PodResources are the Pod's pod-level resources after the resize, for a Pod the set
	// padded (podResources: Pad) whose sidecars' requests or limits change; nil otherwise. The
	// API server resizes them in place from Kubernetes 1.36 with the feature gate
	// InPlacePodLevelResourcesVerticalScaling; others refuse the resize.
	PodResources *corev1.ResourceRequirements
	// Blocked says, field by field, what of the set's current content a running Pod cannot
	// take. When it is set, nothing is to be patched.
	Blocked []string
	// Annotations are the patched annotations (spec.patchPodMetadata) the update changes: key
	// -> new value, nil to remove a key the set no longer patches.
	Annotations map[string]*string
	// Recreatable: what Blocked names is only that the change cannot be made in place (a
	// sidecar's other fields, a sidecar added or removed, a volume): a Pod created now would
	// be injected with it. False for edits made since injection, which recreating the Pod
	// would throw away, and for a set that no longer injects the Pod or refuses it.
	Recreatable bool

	pod     *corev1.Pod
	records Records
}

// ImageChange is one sidecar's new image.
type ImageChange struct {
	// Init is true for a container of spec.initContainers (a native sidecar).
	Init bool
	// Index is the container's index in its list.
	Index int
	// Name, From and To are the container's name, its image now and its image after.
	Name, From, To string
}

// ResourceChange is one sidecar's new requests and limits: the Pod's, with what the set
// declares set over them (what a LimitRange added stays; a request or limit the set no longer
// declares stays until the Pod is recreated).
type ResourceChange struct {
	Init  bool
	Index int
	Name  string
	To    corev1.ResourceRequirements
}

// Current reports whether the Pod already holds the set's current content. A current Pod may
// still have Resources to change: what a sidecar's resourcesPolicy computes after an app
// container was resized.
func (u *InPlace) Current() bool { return u.From == u.To }

// UpdateInPlace works out how the Pod, which the named SidecarSet injected earlier (its record
// says so), gets the set's current content in place. in.Sets are all SidecarSets that may apply
// to the Pod, as for Apply (the others' records are left alone); the named set must be one of
// them.
//
// The update is decided by the engine itself: the Pod with the new images and the new record
// must be what Apply keeps unchanged, that is, exactly what injecting the Pod afresh gives for
// this set (what admission plugins added to the sidecars stays). Anything else that differs is
// reported in Blocked.
//
// injected is the set as it was when it injected the Pod (its stored revision of the hash the
// Pod records), or nil when that is not known. With it, a sidecar that someone changed since
// injection (kubectl set image, an edit) is reported in Blocked and left alone.
func UpdateInPlace(in Input, set string, injected *CompiledSet) (*InPlace, error) {
	current, records, rec, err := recordedBy(in, set)
	if err != nil {
		return nil, err
	}
	u := &InPlace{SidecarSet: set, From: rec.Hash, To: current.Hash, pod: in.Pod}
	// The record is the pod's to write: what it says is checked as admission checks it before
	// anything acts on it. Patched annotations under keys the operator does not allow are the
	// pod's own (never removed or changed); an overridden value that a rule of the set (as it
	// injected the pod, and as it is now) does not allow makes the pod not updatable.
	if u.Blocked = checkRecord(&rec, current, injected, in.AllowedAnnotations); len(u.Blocked) > 0 {
		return u, nil
	}
	records[set] = rec
	// The pod's overrides are those its record says were applied, not what its annotations say
	// now: those take effect when the pod is recreated.
	in.Pod = asRecorded(in.Pod, rec, current, injected)
	if u.Current() {
		u = u.withPolicyResize(rec, current)
		u.repad(in.Pod, &rec, current)
		return u, nil
	}
	if reason := current.Match(in.Pod.Labels, in.NamespaceLabels); reason != Matched {
		u.Blocked = append(u.Blocked, fmt.Sprintf("the SidecarSet no longer injects into this pod (%s)", reason))
		return u, nil
	}
	if injected != nil && injected.Hash == u.From {
		// A resize this update already made, whose image and record patch did not follow (the
		// Pod changed in between), is the rollout's own doing, not an edit.
		asInjected := in
		asInjected.Pod = withPolicyResourcesOf(withResizeUndone(in.Pod, rec, current, injected), rec, injected)
		if u.Blocked = edits(asInjected, injected); len(u.Blocked) > 0 {
			return u, nil
		}
	}

	// The Pod as it would be after the update: new images, new record.
	target := in.Pod.DeepCopy()
	for s := range recordedSidecars(target, rec, current) {
		if s.declared == nil {
			u.Blocked = append(u.Blocked, fmt.Sprintf("%s: the SidecarSet no longer declares container %q", listField(s.init), s.pod.Name))
			continue
		}
		if image := s.declared.Image; image != s.pod.Image {
			u.Images = append(u.Images, ImageChange{Init: s.init, Index: s.index, Name: s.pod.Name, From: s.pod.Image, To: image})
			s.pod.Image = image
		}
		want, err := sidecarResources(current, s.declared, s.init, target, rec.Overrides) // requests default to limits
		if err != nil {
			u.Blocked = append(u.Blocked, err.Error())
			continue
		}
		if to, changed := resized(s.pod.Resources, want); changed {
			u.Resources = append(u.Resources, ResourceChange{Init: s.init, Index: s.index, Name: s.pod.Name, To: to})
			s.pod.Resources = to
		}
	}
	// A pod the set padded (podResources: Pad) is padded for its sidecars as they will be,
	// before Apply judges the target (repad).
	u.repad(in.Pod, &rec, current)
	if u.PodResources != nil {
		target.Spec.Resources = u.PodResources
	}
	rec.Hash = current.Hash
	records[set] = rec
	target.Annotations[appsv1alpha1.StatusAnnotation] = records.Encode()
	u.records = records

	res, err := Apply(Input{Pod: target, Sets: in.Sets, NamespaceLabels: in.NamespaceLabels, SetByName: in.SetByName,
		AllowedAnnotations: in.AllowedAnnotations})
	if err != nil {
		u.Blocked = append(u.Blocked, err.Error())
		return u, nil
	}
	// Annotations need no restart: the set's current patches are applied and those it no
	// longer declares removed, as injecting the pod afresh would leave them.
	u.Annotations = patchedAnnotationEdits(res, rec, current)
	// The record of pinned sidecar images follows the new images.
	if v, ok := res.annotations[appsv1alpha1.ImagesAnnotation]; ok {
		if u.Annotations == nil {
			u.Annotations = map[string]*string{}
		}
		u.Annotations[appsv1alpha1.ImagesAnnotation] = v
	}
	rec.Annotations = res.Records[set].Annotations
	rec.Overrides = res.Records[set].Overrides
	records[set] = rec
	u.records = records
	u.Blocked = append(u.Blocked, differences(target, res, set, "changed, and a running pod's container takes only a new image")...)
	u.Recreatable = len(u.Blocked) > 0
	if len(u.Blocked) > 0 {
		u.Images, u.Resources = nil, nil
	}
	return u, nil
}

// checkRecord leaves out of rec what the Pod's author could not have had injected (see
// trustRecord) and returns why the Pod cannot be updated on its strength: the overridden
// values that the set's rules do not allow, as it injected the Pod (injected, when known) or
// as it is now (current).
func checkRecord(rec *Record, current, injected *CompiledSet, allowed *KeyAllowList) []string {
	rec.Annotations, _ = allowedAnnotations(rec.Annotations, allowed)
	var refused []string
	for _, set := range []*CompiledSet{injected, current} {
		if set == nil {
			continue
		}
		if _, why := recordedOverrides(rec.Overrides, set); len(why) > 0 {
			refused = why
		}
	}
	return refused
}

// resized is have with the requests and limits of want set over it, and whether that changes
// anything.
func resized(have, want corev1.ResourceRequirements) (corev1.ResourceRequirements, bool) {
	out := *have.DeepCopy()
	changed := false
	for _, l := range []struct {
		have *corev1.ResourceList
		want corev1.ResourceList
	}{{&out.Requests, want.Requests}, {&out.Limits, want.Limits}} {
		for name, q := range l.want {
			if cur, ok := (*l.have)[name]; ok && cur.Cmp(q) == 0 {
				continue
			}
			if *l.have == nil {
				*l.have = corev1.ResourceList{}
			}
			(*l.have)[name] = q
			changed = true
		}
	}
	return out, changed
}

// repad works out, for a pod the set padded (its record says so) whose sidecars' requests or
// limits change (u.Resources), its pod-level resources padded for the sidecars as they will
// be: what the sidecars it runs padded is taken back (computed from them), and what the new
// ones pad added; rec records the new padding. It leaves u.PodResources nil when nothing
// changes, and for a set that no longer pads (the padding stays the pod's own).
func (u *InPlace) repad(pod *corev1.Pod, rec *Record, set *CompiledSet) {
	level := pod.Spec.Resources
	if rec.Padded == nil || set.Set.Spec.PodResources != appsv1alpha1.PodResourcesPad || level == nil || len(u.Resources) == 0 || len(u.Blocked) > 0 {
		return
	}
	after := &corev1.Pod{Spec: corev1.PodSpec{Containers: slices.Clone(pod.Spec.Containers), InitContainers: slices.Clone(pod.Spec.InitContainers)}}
	for _, c := range u.Resources {
		list := after.Spec.Containers
		if c.Init {
			list = after.Spec.InitContainers
		}
		list[c.Index].Resources = c.To
	}
	own := withPadding(level, Padding(level, Guaranteed(level), paddedSidecars(pod, *rec)), -1)
	pad := Padding(own, Guaranteed(own), paddedSidecars(after, *rec))
	rec.Padded = &pad
	if padded := withPadding(own, pad, 1); !equality.Semantic.DeepEqual(padded, level) {
		u.PodResources = padded
	}
}

// ResizePatch returns the JSON patch operations for the Pod's resize subresource: a test of
// the Pod's resourceVersion and the sidecars' new requests and limits. Nil when no resources
// change.
func (u *InPlace) ResizePatch() []jsonpatch.Operation {
	if len(u.Resources) == 0 || len(u.Blocked) > 0 {
		return nil
	}
	ops := []jsonpatch.Operation{{Operation: "test", Path: "/metadata/resourceVersion", Value: u.pod.ResourceVersion}}
	for _, c := range u.Resources {
		ops = append(ops, jsonpatch.Operation{Operation: "replace", Path: containerPath(c.Init, c.Index) + "/resources", Value: c.To})
	}
	if u.PodResources != nil {
		for _, l := range []struct {
			path string
			list corev1.ResourceList
		}{{"/spec/resources/requests/", u.PodResources.Requests}, {"/spec/resources/limits/", u.PodResources.Limits}} {
			for _, name := range sets.List(sets.KeySet(l.list)) {
				q := l.list[name]
				ops = append(ops, jsonpatch.Operation{Operation: "add", Path: l.path + escapeJSONPointer(string(name)), Value: q.String()})
			}
		}
	}
	return ops
}

func containerPath(init bool, i int) string {
	return "/" + strings.ReplaceAll(listField(init), ".", "/") + "/" + strconv.Itoa(i)
}

// withResizeUndone returns pod (a copy, when anything changes) with each of the set's recorded
// sidecars that already carries the current spec's requests and limits given the injected
// revision's instead.
func withResizeUndone(pod *corev1.Pod, rec Record, current, injected *CompiledSet) *corev1.Pod {
	out := pod
	for _, l := range []struct {
		init  bool
		names []string
	}{{true, rec.InitContainers}, {false, rec.Containers}} {
		now, was := current.Set.Spec.Containers, injected.Set.Spec.Containers
		if l.init {
			now, was = current.Set.Spec.InitContainers, injected.Set.Spec.InitContainers
		}
		for _, name := range l.names {
			i := slices.IndexFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == name })
			if l.init {
				i = slices.IndexFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == name })
			}
			j := slices.IndexFunc(now, func(sc appsv1alpha1.SidecarContainer) bool { return sc.Name == name })
			k := slices.IndexFunc(was, func(sc appsv1alpha1.SidecarContainer) bool { return sc.Name == name })
			if i < 0 || j < 0 || k < 0 {
				continue
			}
			list := &out.Spec.Containers
			if l.init {
				list = &out.Spec.InitContainers
			}
			have := (*list)[i].Resources
			wantNow := podrules.DefaultedContainer(Overridden(current, &now[j].Container, rec.Overrides), l.init, pod.Spec.HostNetwork).Resources
			wantWas := podrules.DefaultedContainer(Overridden(injected, &was[k].Container, rec.Overrides), l.init, pod.Spec.HostNetwork).Resources
			if _, changed := resized(have, wantNow); changed {
				continue // not resized to the current spec
			}
			undone, changed := resized(have, wantWas)
			if !changed {
				continue
			}
			if out == pod {
				out = pod.DeepCopy()
				list = &out.Spec.Containers
				if l.init {
					list = &out.Spec.InitContainers
				}
			}
			(*list)[i].Resources = undone
		}
	}
	return out
}

// edits lists what of the set's content as it injected the Pod (injected, whose hash the
// Pod's record carries) the Pod's sidecars no longer carry: changes someone else made since.
func edits(in Input, injected *CompiledSet) []string {
	sets := slices.Clone(in.Sets)
	for i := range sets {
		if sets[i].Name() == injected.Name() {
			sets[i] = injected
		}
	}
	setByName := func(name string) (*CompiledSet, bool) {
		if name == injected.Name() {
			return injected, true
		}
		return in.setByName(name)
	}
	res, err := Apply(Input{Pod: in.Pod, Sets: sets, NamespaceLabels: in.NamespaceLabels, SetByName: setByName,
		AllowedAnnotations: in.AllowedAnnotations})
	if err != nil {
		return []string{err.Error()}
	}
	return differences(in.Pod, res, injected.Name(), "changed since injection by someone else; left alone")
}

// differences lists what of the set's content Apply would change in target, which holds the
// set's new images: the fields of a sidecar that target's container does not carry, and the
// containers, volumes and pull secrets the set would add or no longer adds. Changes Apply
// makes for other sets do not count.
func differences(target *corev1.Pod, res *Result, set, changed string) []string {
	var out []string
	recs, _ := ParseRecords(target.Annotations) // written by UpdateInPlace: it parses
	was, now := ownedBy(Records{set: recs[set]}), ownedBy(Records{set: res.Records[set]})
	for _, l := range []struct {
		init bool
		edit *listEdit[corev1.Container]
		was  sets.Set[string]
	}{
		{true, &res.initContainers, was.initContainers},
		{false, &res.containers, was.containers},
	} {
		if l.edit.noop {
			continue
		}
		field := listField(l.init)
		readded := sets.New[string]()
		for _, s := range l.edit.final {
			if s.orig >= 0 || res.owners[s.item.Name] != set {
				continue
			}
			readded.Insert(s.item.Name)
			j := slices.IndexFunc(l.edit.orig, func(c corev1.Container) bool { return c.Name == s.item.Name })
			if j < 0 {
				out = append(out, fmt.Sprintf("%s[%s]: the SidecarSet now injects this container", field, s.item.Name))
				continue
			}
			missing := missingFields(&l.edit.orig[j], s.item, l.init, target.Spec.HostNetwork)
			if len(missing) == 0 {
				missing = []string{"(position)"}
			}
			for _, f := range missing {
				out = append(out, fmt.Sprintf("%s[%s].%s: %s", field, s.item.Name, f, changed))
			}
		}
		for _, i := range l.edit.removed {
			if name := l.edit.orig[i].Name; l.was.Has(name) && !readded.Has(name) {
				out = append(out, fmt.Sprintf("%s[%s]: the SidecarSet no longer injects this container", field, name))
			}
		}
	}
	for _, s := range res.volumes.final {
		if s.orig < 0 && now.volumes.Has(s.item.Name) {
			if was.volumes.Has(s.item.Name) {
				out = append(out, fmt.Sprintf("spec.volumes[%s]: changed, and a running pod's volumes cannot change", s.item.Name))
			} else {
				out = append(out, fmt.Sprintf("spec.volumes[%s]: the SidecarSet now adds this volume", s.item.Name))
			}
		}
	}
	for _, v := range sets.List(was.volumes.Difference(now.volumes)) {
		out = append(out, fmt.Sprintf("spec.volumes[%s]: the SidecarSet no longer adds this volume", v))
	}
	for _, v := range sets.List(now.pullSecrets.Difference(was.pullSecrets)) {
		out = append(out, fmt.Sprintf("spec.imagePullSecrets[%s]: the SidecarSet now adds this pull secret", v))
	}
	return out
}

// Patch returns the JSON patch operations of the update: a test of the Pod's resourceVersion
// (the optimistic lock: a Pod changed since it was read is not patched), the new images, and
// the new record. Nil when the Pod is current or the update is blocked. With resources to
// change, apply ResizePatch first: the resourceVersion tested is the Pod's at the time of the
// call.
func (u *InPlace) Patch() []jsonpatch.Operation {
	if u.Current() || len(u.Blocked) > 0 {
		return nil
	}
	ops := []jsonpatch.Operation{{Operation: "test", Path: "/metadata/resourceVersion", Value: u.pod.ResourceVersion}}
	for _, c := range u.Images {
		ops = append(ops, jsonpatch.Operation{Operation: "replace", Path: containerPath(c.Init, c.Index) + "/image", Value: c.To})
	}
	for _, k := range sets.List(sets.KeySet(u.Annotations)) {
		path := "/metadata/annotations/" + escapeJSONPointer(k)
		if v := u.Annotations[k]; v != nil {
			ops = append(ops, jsonpatch.Operation{Operation: "add", Path: path, Value: *v}) // add replaces a member
		} else {
			ops = append(ops, jsonpatch.Operation{Operation: "remove", Path: path})
		}
	}
	return append(ops, jsonpatch.Operation{Operation: "replace",
		Path: "/metadata/annotations/" + escapeJSONPointer(appsv1alpha1.StatusAnnotation), Value: u.records.Encode()})
}

func listField(init bool) string {
	if init {
		return "spec.initContainers"
	}
	return "spec.containers"
}

// patchedAnnotationEdits are the annotation changes res makes for the set's patches: the keys
// its record lists and the keys it declares now. Changes for other sets are theirs.
func patchedAnnotationEdits(res *Result, rec Record, set *CompiledSet) map[string]*string {
	keys := sets.KeySet(rec.Annotations)
	for i := range set.Set.Spec.PatchPodMetadata {
		keys.Insert(sets.KeySet(set.Set.Spec.PatchPodMetadata[i].Annotations).UnsortedList()...)
	}
	var out map[string]*string
	for k := range keys {
		if v, ok := res.annotations[k]; ok {
			if out == nil {
				out = map[string]*string{}
			}
			out[k] = v
		}
	}
	return out
}

// recordedSidecar is a container of a Pod that a set's record lists: where it is, and what the
// set declares of that name now (nil when it no longer declares it).
type recordedSidecar struct {
	init     bool
	index    int
	pod      *corev1.Container // the Pod's own; changes to it change the Pod
	declared *appsv1alpha1.SidecarContainer
}

// recordedSidecars yields the Pod's init containers, then containers, that rec lists as
// injected by set, in the Pod's order.
func recordedSidecars(pod *corev1.Pod, rec Record, set *CompiledSet) iter.Seq[recordedSidecar] {
	return func(yield func(recordedSidecar) bool) {
		for _, l := range []struct {
			init     bool
			names    []string
			pod      []corev1.Container
			declared []appsv1alpha1.SidecarContainer
		}{
			{true, rec.InitContainers, pod.Spec.InitContainers, set.Set.Spec.InitContainers},
			{false, rec.Containers, pod.Spec.Containers, set.Set.Spec.Containers},
		} {
			for i := range l.pod {
				if !slices.Contains(l.names, l.pod[i].Name) {
					continue
				}
				s := recordedSidecar{init: l.init, index: i, pod: &l.pod[i]}
				if j := slices.IndexFunc(l.declared, func(sc appsv1alpha1.SidecarContainer) bool { return sc.Name == l.pod[i].Name }); j >= 0 {
					s.declared = &l.declared[j]
				}
				if !yield(s) {
					return
				}
			}
		}
	}
}
