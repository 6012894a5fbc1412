package inject

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/sets"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// Result is the outcome of Apply: which SidecarSets injected and which were skipped, the
// records for the status annotation, and the edits to the Pod's lists. Render it with Pod (a
// mutated copy) or Patch (JSON patch operations against the admitted Pod).
type Result struct {
	// Records is the status annotation after injection.
	Records Records
	// Injected names the SidecarSets that injected, in order.
	Injected []string
	// Skipped are the SidecarSets considered and not injected, with the reason.
	Skipped []Skip
	// Picks say, for each injecting SidecarSet that pins a revision with policy Partial,
	// whether the Pod got the pinned revision or the current spec, and why.
	Picks []PickOf
	// Warnings are non-fatal problems to show the user (admission warnings).
	Warnings []string

	pod                        *corev1.Pod
	containers, initContainers listEdit[corev1.Container]
	volumes                    listEdit[corev1.Volume]
	pullSecrets                listEdit[corev1.LocalObjectReference]
	annotations                map[string]*string // key -> new value; nil value removes it
	// unrouted: the webhook removes the policy mode's route label (the only label it edits).
	unrouted bool
	owners   map[string]string  // injected container name -> set
	copies   map[string]*Copies // injected container name -> entries copied from app containers
	// podResources are the Pod's pod-level resources after padding (podResources: Pad); nil
	// when injection leaves them as they are.
	podResources *corev1.ResourceRequirements
}

// slot is one entry of a list after injection: an entry of the original list (orig >= 0) or a
// new one.
type slot[T any] struct {
	orig int
	item *T
}

// listEdit turns an original list into a final one by removing entries and inserting new
// ones. Kept entries keep their relative order, which is what makes a JSON patch of removals
// followed by insertions exact.
type listEdit[T any] struct {
	orig    []T
	removed []int // ascending indices into orig
	final   []slot[T]
	noop    bool
}

// newListEdit computes the edit of one list. An injected entry that the Pod's entry still
// carries (same(new, orig): what admission plugins and webhooks added to it is theirs) stays
// where it is, as the Pod has it, so a Pod another mutating webhook has added containers or volumes to after ours
// is left alone on reinvocation; one that changed is removed and injected again at its place
// by podInjectPolicy.
func newListEdit[T any](orig []T, name func(*T) string, strip sets.Set[string], before, after []T, same func(a, b *T) bool) listEdit[T] {
	e := listEdit[T]{orig: orig}
	stripped := map[string]int{}
	for i := range orig {
		if strip.Has(name(&orig[i])) {
			stripped[name(&orig[i])] = i
		}
	}
	inPlace := sets.New[int]()
	fresh := func(items []T) []*T {
		var out []*T
		for i := range items {
			if j, ok := stripped[name(&items[i])]; ok && same(&items[i], &orig[j]) {
				inPlace.Insert(j)
				continue
			}
			out = append(out, &items[i])
		}
		return out
	}
	newBefore, newAfter := fresh(before), fresh(after)
	for _, item := range newBefore {
		e.final = append(e.final, slot[T]{orig: -1, item: item})
	}
	for i := range orig {
		if strip.Has(name(&orig[i])) && !inPlace.Has(i) {
			e.removed = append(e.removed, i)
			continue
		}
		e.final = append(e.final, slot[T]{orig: i, item: &orig[i]})
	}
	for _, item := range newAfter {
		e.final = append(e.final, slot[T]{orig: -1, item: item})
	}
	e.noop = e.unchanged(same)
	return e
}

// unchanged reports whether the final list equals the original one: true on re-entry, when
// what is injected again is what was stripped.
func (e *listEdit[T]) unchanged(same func(a, b *T) bool) bool {
	if len(e.final) != len(e.orig) {
		return false
	}
	for i, s := range e.final {
		if s.orig != i && (s.orig >= 0 || !same(s.item, &e.orig[i])) {
			return false
		}
	}
	return true
}

func (e *listEdit[T]) items() []T {
	if e.noop {
		return e.orig
	}
	out := make([]T, len(e.final))
	for i, s := range e.final {
		out[i] = *s.item
	}
	return out
}

// ops renders the edit as JSON patch operations on path: removals from the highest index
// down, then insertions from the lowest final index up. value renders an inserted entry
// (nil: as it is).
func (e *listEdit[T]) ops(path string, value func(*T) any) []jsonpatch.Operation {
	if value == nil {
		value = func(item *T) any { return item }
	}
	if e.noop {
		return nil
	}
	if len(e.orig) == 0 {
		if len(e.final) == 0 {
			return nil
		}
		all := make([]any, len(e.final))
		for i, s := range e.final {
			all[i] = value(s.item)
		}
		return []jsonpatch.Operation{{Operation: "add", Path: path, Value: all}}
	}
	ops := make([]jsonpatch.Operation, 0, len(e.removed)+len(e.final)-len(e.orig)+len(e.removed))
	for i := len(e.removed) - 1; i >= 0; i-- {
		ops = append(ops, jsonpatch.Operation{Operation: "remove", Path: path + "/" + strconv.Itoa(e.removed[i])})
	}
	for i, s := range e.final {
		if s.orig < 0 {
			ops = append(ops, jsonpatch.Operation{Operation: "add", Path: path + "/" + strconv.Itoa(i), Value: value(s.item)})
		}
	}
	return ops
}

// finish turns the builder's placements into list edits and annotation changes.
func (b *builder) finish(res *Result) {
	pod := b.pod
	res.Warnings = b.warnings
	res.copies = b.copies
	res.owners = b.containerOwner
	carries := func(init bool) func(sidecar, have *corev1.Container) bool {
		return func(sidecar, have *corev1.Container) bool {
			return podHasContainer(have, sidecar, init, pod.Spec.HostNetwork)
		}
	}
	res.containers = newListEdit(pod.Spec.Containers, containerName, b.strip.containers,
		b.containers.before, b.containers.after, carries(false))
	res.initContainers = newListEdit(pod.Spec.InitContainers, containerName, b.strip.initContainers,
		b.initContainers.before, b.initContainers.after, carries(true))
	res.volumes = newListEdit(pod.Spec.Volumes, func(v *corev1.Volume) string { return v.Name }, b.strip.volumes,
		nil, b.volumes, sameVolume)
	res.pullSecrets = newListEdit(pod.Spec.ImagePullSecrets, func(r *corev1.LocalObjectReference) string { return r.Name }, b.strip.pullSecrets,
		nil, b.pullSecrets, func(a, b *corev1.LocalObjectReference) bool { return *a == *b })

	if b.podResources != pod.Spec.Resources && !equality.Semantic.DeepEqual(b.podResources, pod.Spec.Resources) {
		res.podResources = b.podResources
	}
	res.annotations = map[string]*string{}
	b.annotationEdits(res.annotations)
	old, had := pod.Annotations[appsv1alpha1.StatusAnnotation]
	switch {
	case len(res.Records) > 0:
		if v := res.Records.Encode(); !had || v != old {
			res.annotations[appsv1alpha1.StatusAnnotation] = &v
		}
	case had:
		res.annotations[appsv1alpha1.StatusAnnotation] = nil
	}
	b.pinnedImages(res.annotations)
	// A pod the policy mode's admission policies sent here leaves without their marks.
	if _, ok := pod.Annotations[appsv1alpha1.WebhookRouteAnnotation]; ok {
		res.annotations[appsv1alpha1.WebhookRouteAnnotation] = nil
	}
	_, res.unrouted = pod.Labels[appsv1alpha1.WebhookRouteLabel]
	// kubectl exec and logs default to the first container: pin it to the app's when sidecars
	// join spec.containers (a BeforeAppContainer sidecar would otherwise take its place).
	if _, ok := b.annotations[appsv1alpha1.DefaultContainerAnnotation]; !ok && b.addedContainers && len(b.appContainers) > 0 {
		name := b.appContainers[0].Name
		res.annotations[appsv1alpha1.DefaultContainerAnnotation] = &name
	}
}

func containerName(c *corev1.Container) string { return c.Name }

// Changed reports whether the Pod needs any change.
func (r *Result) Changed() bool {
	return !r.containers.noop || !r.initContainers.noop || !r.volumes.noop || !r.pullSecrets.noop || len(r.annotations) > 0 || r.podResources != nil || r.unrouted
}

// Pod returns a copy of the input Pod with the injection applied. The input is not modified.
func (r *Result) Pod() *corev1.Pod {
	pod := r.pod.DeepCopy()
	pod.Spec.Containers = deepCopied(r.containers.items(), (*corev1.Container).DeepCopy)
	pod.Spec.InitContainers = deepCopied(r.initContainers.items(), (*corev1.Container).DeepCopy)
	pod.Spec.Volumes = deepCopied(r.volumes.items(), (*corev1.Volume).DeepCopy)
	pod.Spec.ImagePullSecrets = deepCopied(r.pullSecrets.items(), func(l *corev1.LocalObjectReference) *corev1.LocalObjectReference { c := *l; return &c })
	if r.podResources != nil {
		pod.Spec.Resources = r.podResources.DeepCopy()
	}
	for k, v := range r.annotations {
		if v == nil {
			delete(pod.Annotations, k)
			continue
		}
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[k] = *v
	}
	if r.unrouted {
		delete(pod.Labels, appsv1alpha1.WebhookRouteLabel)
	}
	return pod
}

func deepCopied[T any](in []T, cp func(*T) *T) []T {
	if in == nil {
		return nil
	}
	out := make([]T, len(in))
	for i := range in {
		out[i] = *cp(&in[i])
	}
	return out
}

// Patch returns the JSON patch operations that turn the admitted Pod into the injected one.
// It adds and removes list entries by index and never rewrites an entry it did not inject, so
// fields of the Pod this binary's API types do not know survive. Entries copied from the app
// containers (transferEnv, shareVolumePolicy) are rendered from the decoded Pod: PatchFrom
// keeps their unknown fields too.
func (r *Result) Patch() []jsonpatch.Operation { return r.patch(nil) }

// PatchFrom is Patch that reads the admitted Pod's JSON through admitted: the env and
// volumeMounts entries a sidecar copies from an app container keep the fields of the app's
// entry that this binary's API types do not know (those of a newer API server), so a copy is
// never less than what the app has.
func (r *Result) PatchFrom(admitted Admitted) ([]jsonpatch.Operation, error) {
	if len(r.copies) == 0 || admitted == nil {
		return r.Patch(), nil
	}
	rendered := map[string]any{}
	for _, e := range []*listEdit[corev1.Container]{&r.containers, &r.initContainers} {
		for _, s := range e.final {
			if copies := r.copies[s.item.Name]; s.orig < 0 && copies != nil {
				v, err := withUnknownFields(s.item, copies, admitted)
				if err != nil {
					return nil, fmt.Errorf("container %q: %w", s.item.Name, err)
				}
				rendered[s.item.Name] = v
			}
		}
	}
	return r.patch(func(c *corev1.Container) any {
		if v, ok := rendered[c.Name]; ok {
			return v
		}
		return c
	}), nil
}

func (r *Result) patch(container func(*corev1.Container) any) []jsonpatch.Operation {
	var ops []jsonpatch.Operation
	ops = append(ops, r.initContainers.ops("/spec/initContainers", container)...)
	ops = append(ops, r.containers.ops("/spec/containers", container)...)
	ops = append(ops, r.volumes.ops("/spec/volumes", nil)...)
	ops = append(ops, r.pullSecrets.ops("/spec/imagePullSecrets", nil)...)
	ops = append(ops, r.podResourcesOps()...)
	if r.unrouted {
		ops = append(ops, jsonpatch.Operation{Operation: "remove", Path: "/metadata/labels/" + escapeJSONPointer(appsv1alpha1.WebhookRouteLabel)})
	}
	return append(ops, r.annotationOps()...)
}

// podResourcesOps set the padded pod-level requests and limits one by one, so that the rest of
// spec.resources (fields this binary may not know) stays as admitted.
func (r *Result) podResourcesOps() []jsonpatch.Operation {
	if r.podResources == nil {
		return nil
	}
	var ops []jsonpatch.Operation
	for _, l := range []struct {
		path     string
		was, now corev1.ResourceList
	}{{"/spec/resources/requests", r.pod.Spec.Resources.Requests, r.podResources.Requests},
		{"/spec/resources/limits", r.pod.Spec.Resources.Limits, r.podResources.Limits}} {
		if len(l.was) == 0 && len(l.now) > 0 {
			ops = append(ops, jsonpatch.Operation{Operation: "add", Path: l.path, Value: l.now})
			continue
		}
		for _, name := range sets.List(sets.KeySet(l.now)) {
			if q, now := l.was[name], l.now[name]; q.Cmp(now) != 0 {
				ops = append(ops, jsonpatch.Operation{Operation: "add", Path: l.path + "/" + escapeJSONPointer(string(name)), Value: now.String()})
			}
		}
	}
	return ops
}

func (r *Result) annotationOps() []jsonpatch.Operation {
	if len(r.annotations) == 0 {
		return nil
	}
	keys := sets.List(sets.KeySet(r.annotations))
	// An empty map is absent from the Pod's JSON: adding under it would fail.
	if len(r.pod.Annotations) == 0 {
		all := map[string]string{}
		for _, k := range keys {
			if v := r.annotations[k]; v != nil {
				all[k] = *v
			}
		}
		return []jsonpatch.Operation{{Operation: "add", Path: "/metadata/annotations", Value: all}}
	}
	ops := make([]jsonpatch.Operation, 0, len(keys))
	for _, k := range keys {
		path := "/metadata/annotations/" + escapeJSONPointer(k)
		if v := r.annotations[k]; v != nil {
			ops = append(ops, jsonpatch.Operation{Operation: "add", Path: path, Value: *v})
		} else {
			ops = append(ops, jsonpatch.Operation{Operation: "remove", Path: path})
		}
	}
	return ops
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func escapeJSONPointer(s string) string { return pointerEscaper.Replace(s) }

// pinnedImages records, in the ImagesAnnotation, the image of each injected sidecar that names
// a digest, as "container=image" entries joined by commas, sorted: what the shipped
// ValidatingAdmissionPolicy holds the pod's final state to, so that a mutating webhook called
// after this one cannot swap a pinned sidecar's bytes. It replaces whatever the pod's author
// wrote there, and is removed when no injected sidecar names a digest.
func (b *builder) pinnedImages(annotations map[string]*string) {
	var entries []string
	for _, list := range [][]corev1.Container{b.containers.before, b.containers.after, b.initContainers.before, b.initContainers.after} {
		for i := range list {
			// The set's images were validated when it compiled: ":" marks a digest.
			if _, d, ok := strings.Cut(list[i].Image, "@"); ok && strings.Contains(d, ":") {
				entries = append(entries, list[i].Name+"="+list[i].Image)
			}
		}
	}
	slices.Sort(entries)
	old, had := b.pod.Annotations[appsv1alpha1.ImagesAnnotation]
	switch v := strings.Join(entries, ","); {
	case v != "" && (!had || v != old):
		annotations[appsv1alpha1.ImagesAnnotation] = &v
	case v == "" && had:
		annotations[appsv1alpha1.ImagesAnnotation] = nil
	}
}
