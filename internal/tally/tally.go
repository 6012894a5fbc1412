package tally

import (
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/rollout"
	"github.com/sidecarset/sidecarset-operator/internal/status"
)

// Tally keeps every SidecarSet's status counts current from Pod and Namespace events, so that a
// reconcile reads a set's counts instead of listing and classifying every Pod. Each Pod event
// costs one classification per known SidecarSet, whatever the number of Pods; a set is counted
// from scratch only when its spec changes (a new generation). It is safe for concurrent use.
type Tally struct {
	mu    sync.Mutex
	scope status.Scope
	// pods: namespace -> name -> entry, as the events last showed them.
	pods map[string]map[string]*entry
	// namespaces: name -> labels; a namespace not seen yet reads as unlabelled until its event
	// comes and its Pods are classified again.
	namespaces map[string]map[string]string
	sets       map[string]*setTally
}

// entry is one Pod and how it stands with each set that selects it.
type entry struct {
	pod *corev1.Pod
	in  map[string]*rollout.PodState // set name -> state (Pod field unset)
}

// setTally is one set's counts against the compiled spec they were taken with, and the Pods it
// selects.
type setTally struct {
	compiled *inject.CompiledSet
	version  version
	counts   status.Counts
	selected map[*entry]struct{}
	// footprints: namespace -> what the set's sidecars request and limit there, kept like
	// counts (a namespace goes when none of its Pods adds anything).
	footprints map[string]*Footprint
}

// Footprint is what a set's sidecars request and limit in one namespace, and in how many Pods.
type Footprint struct {
	Pods int32
	rollout.Footprint
}

// add counts a selected Pod's state; sign -1 takes it back.
func (st *setTally) add(namespace string, s rollout.PodState, sign int32) {
	if sign > 0 {
		st.counts.Add(s)
	} else {
		st.counts.Remove(s)
	}
	if s.Terminating || s.Excluded || !s.Injected {
		return
	}
	f := st.footprints[namespace]
	if f == nil {
		f = &Footprint{}
		st.footprints[namespace] = f
	}
	f.Pods += sign
	f.Add(s.Footprint, int64(sign))
	if f.Pods == 0 {
		delete(st.footprints, namespace)
	}
}

// version identifies a compiled spec: counts taken against one stay valid until it changes.
type version struct {
	uid        types.UID
	generation int64
	hash       string
}

func versionOf(c *inject.CompiledSet) version {
	return version{uid: c.Set.UID, generation: c.Set.Generation, hash: c.Hash}
}

// New returns an empty Tally for the webhook's scope.
func New(scope status.Scope) *Tally {
	return &Tally{scope: scope, pods: map[string]map[string]*entry{},
		namespaces: map[string]map[string]string{}, sets: map[string]*setTally{}}
}

// UpsertPod records a Pod's new state (created or updated) and returns the sets to reconcile:
// those whose counts changed and those rolling through the Pods they select (see
// reconciledOnEveryPodEvent).
// The Pod is kept, not copied: it must not be modified afterwards (cache objects are not).
func (t *Tally) UpsertPod(pod *corev1.Pod) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	byName := t.pods[pod.Namespace]
	if byName == nil {
		byName = map[string]*entry{}
		t.pods[pod.Namespace] = byName
	}
	e := byName[pod.Name]
	if e == nil {
		e = &entry{}
		byName[pod.Name] = e
	}
	e.pod = pod
	return t.classify(e, nil)
}

// DeletePod forgets a Pod and returns the sets whose counts changed.
func (t *Tally) DeletePod(namespace, name string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.pods[namespace][name]
	if e == nil {
		return nil
	}
	var changed []string
	for set, s := range e.in {
		if st := t.sets[set]; st != nil {
			st.add(namespace, *s, -1)
			delete(st.selected, e)
			changed = append(changed, set)
		}
	}
	delete(t.pods[namespace], name)
	if len(t.pods[namespace]) == 0 {
		delete(t.pods, namespace)
	}
	slices.Sort(changed)
	return changed
}

// UpsertNamespace records a Namespace's labels; when they changed, its Pods are classified
// again. It returns the sets whose counts changed.
func (t *Tally) UpsertNamespace(ns *corev1.Namespace) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	old, known := t.namespaces[ns.Name]
	if known && maps.Equal(old, ns.Labels) {
		return nil
	}
	t.namespaces[ns.Name] = ns.Labels
	return t.classifyNamespace(ns.Name)
}

// DeleteNamespace forgets a Namespace's labels (its Pods go with their own events).
func (t *Tally) DeleteNamespace(name string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, known := t.namespaces[name]; !known {
		return nil
	}
	delete(t.namespaces, name)
	return t.classifyNamespace(name)
}

func (t *Tally) classifyNamespace(name string) []string {
	changed := map[string]struct{}{}
	for _, e := range t.pods[name] {
		for _, set := range t.classify(e, changed) {
			changed[set] = struct{}{}
		}
	}
	return slices.Sorted(maps.Keys(changed))
}

// classify compares a Pod with every known set and moves the counts by the difference. It
// returns the sets to reconcile that are not in skip.
func (t *Tally) classify(e *entry, skip map[string]struct{}) []string {
	var out []string
	for name, st := range t.sets {
		s, selected := rollout.Classify(st.compiled, e.pod, t.namespaceLabels, t.scope)
		s.Pod = nil
		old, was := e.in[name]
		changed := was != selected || was && *old != s
		switch {
		case changed && was && selected:
			// Updated where it is held: a PodState is too large for a map to hold inline, and
			// each insert would allocate.
			st.add(e.pod.Namespace, *old, -1)
			st.add(e.pod.Namespace, s, 1)
			*old = s
		case changed && was:
			st.add(e.pod.Namespace, *old, -1)
			delete(e.in, name)
			delete(st.selected, e)
		case changed:
			st.add(e.pod.Namespace, s, 1)
			if e.in == nil {
				e.in = map[string]*rollout.PodState{}
			}
			held := s // a copy: taking s's address would put every classification on the heap
			e.in[name] = &held
			st.selected[e] = struct{}{}
		}
		if _, done := skip[name]; !done && (changed || (selected || was) && reconciledOnEveryPodEvent(st) || selected && resizeFollows(st, e.pod)) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func (t *Tally) namespaceLabels(name string) map[string]string { return t.namespaces[name] }

// reconciledOnEveryPodEvent reports whether a set is reconciled on every event of a Pod it
// selects, not only on count changes: a rolling update in progress (a Pod whose edit was
// reverted, or whose refused resize may now fit, is looked at again).
func reconciledOnEveryPodEvent(st *setTally) bool {
	return st.compiled.Set.Spec.UpdateStrategy.Type == appsv1alpha1.RollingUpdate && st.counts.Updated < st.counts.Matched
}

// resizeFollows reports whether a rolling set's sidecar with a resourcesPolicy is to be resized
// in pod, whose app container was resized in place: its counts do not change (its hash is
// current), and the rollout must hear of it all the same.
func resizeFollows(st *setTally, pod *corev1.Pod) bool {
	return st.compiled.Set.Spec.UpdateStrategy.Type == appsv1alpha1.RollingUpdate && inject.NeedsPolicyResize(st.compiled, pod)
}

// Sync makes the set's counts follow the compiled spec and returns them. A set seen for the
// first time, or whose spec changed, is counted over every Pod the Tally holds.
func (t *Tally) Sync(c *inject.CompiledSet) status.Counts {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sync(c).counts
}

func (t *Tally) sync(c *inject.CompiledSet) *setTally {
	name, v := c.Name(), versionOf(c)
	st := t.sets[name]
	if st != nil && st.version == v {
		return st
	}
	if st != nil {
		for e := range st.selected {
			delete(e.in, name)
		}
	}
	st = &setTally{compiled: c, version: v, selected: map[*entry]struct{}{}, footprints: map[string]*Footprint{}}
	t.sets[name] = st
	for _, byName := range t.pods {
		for _, e := range byName {
			s, selected := rollout.Classify(c, e.pod, t.namespaceLabels, t.scope)
			if !selected {
				continue
			}
			s.Pod = nil
			st.add(e.pod.Namespace, s, 1)
			if e.in == nil {
				e.in = map[string]*rollout.PodState{}
			}
			e.in[name] = &s
			st.selected[e] = struct{}{}
		}
	}
	return st
}

// Selected syncs the set like Sync and returns the Pods it selects (in no particular order) with the labels of their namespaces: what a rollout plans over.
func (t *Tally) Selected(c *inject.CompiledSet) ([]*corev1.Pod, func(string) map[string]string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.sync(c)
	pods := make([]*corev1.Pod, 0, len(st.selected))
	labels := map[string]map[string]string{}
	for e := range st.selected {
		pods = append(pods, e.pod)
		labels[e.pod.Namespace] = t.namespaces[e.pod.Namespace]
	}
	return pods, func(ns string) map[string]string { return labels[ns] }
}

// Footprints syncs the set like Sync and returns what its sidecars request and limit in each
// namespace where it injected Pods (a copy).
func (t *Tally) Footprints(c *inject.CompiledSet) map[string]Footprint {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.sync(c)
	out := make(map[string]Footprint, len(st.footprints))
	for ns, f := range st.footprints {
		out[ns] = *f
	}
	return out
}

// Forget drops a deleted set.
func (t *Tally) Forget(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.sets[name]
	if st == nil {
		return
	}
	for e := range st.selected {
		delete(e.in, name)
	}
	delete(t.sets, name)
}
