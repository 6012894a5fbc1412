package inject

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// Input is what Apply needs. Only the Pod's metadata (labels, annotations), containers, init
// containers, volumes, image pull secrets, hostNetwork and pod-level resources are read; of
// the containers, only the names unless a set needs more (see the CompiledSet's TransfersEnv,
// SharesVolumes, SharesDevices, ComparesPorts and DeclaresResources). A transferEnv entry with
// sourceContainerNameFrom reads the Pod's name too.
type Input struct {
	// Pod is the Pod as admitted; never modified.
	Pod *corev1.Pod
	// Sets are the SidecarSets that may apply, sorted by name; those that do not match are
	// skipped with a reason.
	Sets []*CompiledSet
	// NamespaceLabels are the labels of the Pod's namespace. They are read only for sets with
	// a namespace selector.
	NamespaceLabels map[string]string
	// SetByName looks up any existing SidecarSet by name, matching or not. The Pod's status
	// annotation is trusted only for what a set found this way declares (see trustRecords).
	// When nil, only Sets are looked up.
	SetByName func(name string) (*CompiledSet, bool)
	// AllowedAnnotations are the annotation keys sets may patch onto the Pod
	// (spec.patchPodMetadata); nil allows none, and the others are left out with a warning.
	AllowedAnnotations *KeyAllowList
	// Key draws the Pod for the SidecarSets that pin a revision with policy Partial (see
	// CompiledSet.Pick): the admission request's UID. Empty: the Pod's namespace and name.
	Key string
	// LimitRanges are the LimitRanges of the Pod's namespace: a set whose sidecars, given their
	// defaults, break a bound of one (per container or per pod) is refused by name (see
	// checkLimitRanges). Nil checks none.
	LimitRanges []corev1.LimitRange
}

// Skip is a SidecarSet that was considered and not injected, and why.
type Skip struct {
	SidecarSet string
	Reason     MatchReason
}

// Apply computes the injection of the matching SidecarSets into the Pod. Whatever the Pod's
// status annotation says an earlier injection added is stripped first and injected again, so
// Apply of its own output changes nothing. Paused SidecarSets inject nothing new; what they
// injected earlier is kept exactly as the Pod has it, at the same place.
//
// A *RefusedError is returned when injection would clash with what the Pod or another
// SidecarSet defines.
func Apply(in Input) (*Result, error) {
	pod := in.Pod
	old, err := ParseRecords(pod.Annotations)
	if err != nil {
		return nil, &RefusedError{Reason: ReasonUnreadableRecord, Field: "metadata.annotations[" + appsv1alpha1.StatusAnnotation + "]", Detail: err.Error()}
	}
	res := &Result{pod: pod, Records: Records{}}
	old, distrusted := trustRecords(old, in.setByName, in.AllowedAnnotations)
	b := newBuilder(pod, old)
	b.warnings = distrusted.warnings()
	b.allowed = in.AllowedAnnotations
	b.limitRanges, b.bounds = limitRangesOf(in.LimitRanges)
	b.stripAnnotations(old, mergedKeys(old, in.setByName))
	// A set takes back its padding when it pads now and does not keep its sidecars (paused).
	pads := func(name string) bool {
		set, ok := in.setByName(name)
		return ok && set.Set.Spec.PodResources == appsv1alpha1.PodResourcesPad &&
			(!set.Set.Spec.InjectionStrategy.Paused || set.Match(pod.Labels, in.NamespaceLabels) != Matched)
	}
	if err := b.unpad(old, pads); err != nil {
		return nil, err
	}
	// Sets take their turns in name order, so every set's entries land in the same place
	// whether it injects now or keeps what it injected earlier.
	for _, set := range in.Sets {
		reason := set.Match(pod.Labels, in.NamespaceLabels)
		if reason == Matched && set.Set.Spec.InjectionStrategy.Paused {
			reason = InjectionPaused
			if rec, ok := old[set.Name()]; ok {
				res.Records[set.Name()] = b.keep(set.Name(), rec)
			}
		}
		if reason != Matched {
			res.Skipped = append(res.Skipped, Skip{SidecarSet: set.Name(), Reason: reason})
			continue
		}
		recorded := ""
		if rec, ok := old[set.Name()]; ok {
			recorded = rec.Hash
		}
		if set.latest != nil {
			var pick Pick
			set, pick = set.Pick(pod, recorded, in.Key)
			res.Picks = append(res.Picks, PickOf{SidecarSet: set.Name(), Pick: pick, Content: set})
		}
		rec, err := b.inject(set)
		if err != nil {
			return nil, err
		}
		res.Records[set.Name()] = rec
		res.Injected = append(res.Injected, set.Name())
	}
	b.finish(res)
	return res, nil
}

// setByName looks a set up with SetByName, or among Sets when that is nil.
func (in *Input) setByName(name string) (*CompiledSet, bool) {
	if in.SetByName != nil {
		return in.SetByName(name)
	}
	for _, set := range in.Sets {
		if set.Name() == name {
			return set, true
		}
	}
	return nil, false
}

// owned lists, per kind, the names an earlier injection added.
type owned struct {
	containers, initContainers, volumes, pullSecrets sets.Set[string]
}

func ownedBy(recs Records) owned {
	var o owned // empty sets are nil: a pod injected for the first time costs no map
	for _, r := range recs {
		o.containers = insertNames(o.containers, r.Containers)
		o.initContainers = insertNames(o.initContainers, r.InitContainers)
		o.volumes = insertNames(o.volumes, r.Volumes)
		o.pullSecrets = insertNames(o.pullSecrets, r.ImagePullSecrets)
	}
	return o
}

func insertNames(s sets.Set[string], names []string) sets.Set[string] {
	if len(names) == 0 {
		return s
	}
	if s == nil {
		s = sets.New[string]()
	}
	return s.Insert(names...)
}

// builder accumulates the injection of the SidecarSets into one Pod.
type builder struct {
	pod *corev1.Pod
	// strip is everything an earlier injection added: it is removed, then injected again
	// (active sets) or put back as it was (paused sets). What is left is the Pod's own.
	strip owned

	appContainers []*corev1.Container // the Pod's own containers, in order

	containers, initContainers placement
	// limitRanges are the namespace's (Input.LimitRanges), defaulted as the API server stores
	// them; bounds are the same, their items split by what they bound.
	limitRanges     []corev1.LimitRange
	bounds          []limitRange
	ownView         *corev1.Pod // resourcesView without the sidecars; nil: not computed yet
	volumes         []corev1.Volume
	volumeOwner     map[string]string // volume name -> set that adds it
	pullSecrets     []corev1.LocalObjectReference
	containerOwner  map[string]string  // injected container name -> set
	copies          map[string]*Copies // rendered container name -> its entries copied from app containers
	addedContainers bool               // something went into spec.containers
	ownResourcesFit *bool              // the pod's own containers fit in its pod-level resources; nil: not computed yet
	// podResources are the pod-level resources as injection leaves them so far: the Pod's,
	// less what earlier injections padded for the sidecars removed now, plus what Pad sets add.
	podResources *corev1.ResourceRequirements
	// ownResources are the Pod's own pod-level resources: podResources before any Pad set.
	ownResources *corev1.ResourceRequirements
	// writtenOut: podResources are written out as the API server stores them (padFor).
	writtenOut bool
	warnings   []string

	allowed         *KeyAllowList         // annotation keys sets may patch
	annotations     map[string]string     // the Pod's annotations as injection leaves them
	annotationOwner map[string]patchOwner // patched annotation key -> the set that patched it
	stripped        map[string]string     // annotation key -> value an earlier injection patched, taken out
}

// placement holds the new containers of one list, split by podInjectPolicy.
type placement struct{ before, after []corev1.Container }

func (p *placement) add(c corev1.Container, before bool) {
	if before {
		p.before = append(p.before, c)
	} else {
		p.after = append(p.after, c)
	}
}

func newBuilder(pod *corev1.Pod, old Records) *builder {
	b := &builder{
		pod:            pod,
		podResources:   pod.Spec.Resources,
		ownResources:   pod.Spec.Resources,
		strip:          ownedBy(old),
		volumeOwner:    map[string]string{},
		containerOwner: map[string]string{},
	}
	for i := range pod.Spec.Containers {
		if !b.strip.containers.Has(pod.Spec.Containers[i].Name) {
			b.appContainers = append(b.appContainers, &pod.Spec.Containers[i])
		}
	}
	return b
}

// keep puts back what a paused set injected earlier, exactly as the Pod has it, and returns
// its record reduced to what the Pod still has.
func (b *builder) keep(set string, rec Record) Record {
	out := Record{Hash: rec.Hash, NotShared: rec.NotShared, Annotations: b.keepAnnotations(set, rec), Overrides: rec.Overrides, Padded: rec.Padded}
	out.Containers = b.keepContainers(set, rec.Containers, b.pod.Spec.Containers, b.strip.containers, &b.containers)
	out.InitContainers = b.keepContainers(set, rec.InitContainers, b.pod.Spec.InitContainers, b.strip.initContainers, &b.initContainers)
	for _, name := range rec.Volumes {
		if i := slices.IndexFunc(b.pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == name }); i >= 0 {
			b.volumes = append(b.volumes, b.pod.Spec.Volumes[i])
			b.volumeOwner[name] = set
			out.Volumes = append(out.Volumes, name)
		}
	}
	for _, name := range rec.ImagePullSecrets {
		if slices.ContainsFunc(b.pod.Spec.ImagePullSecrets, func(r corev1.LocalObjectReference) bool { return r.Name == name }) &&
			!b.hasPullSecret(name) {
			b.pullSecrets = append(b.pullSecrets, corev1.LocalObjectReference{Name: name})
			out.ImagePullSecrets = append(out.ImagePullSecrets, name)
		}
	}
	return out
}

// keepContainers re-places a paused set's containers on the side of the Pod's own containers
// where they were.
func (b *builder) keepContainers(set string, names []string, list []corev1.Container, injected sets.Set[string], into *placement) []string {
	firstOwn := slices.IndexFunc(list, func(c corev1.Container) bool { return !injected.Has(c.Name) })
	var kept []string
	for _, name := range names {
		i := slices.IndexFunc(list, func(c corev1.Container) bool { return c.Name == name })
		if i < 0 {
			continue
		}
		into.add(list[i], firstOwn >= 0 && i < firstOwn)
		b.containerOwner[name] = set
		kept = append(kept, name)
	}
	return kept
}

// inject adds one SidecarSet and returns its record.
func (b *builder) inject(set *CompiledSet) (Record, error) {
	spec := &set.Set.Spec
	rec := Record{Hash: set.Hash}
	if err := b.checkOverrideValues(set); err != nil {
		return Record{}, err
	}
	for i := range spec.InitContainers {
		added, err := b.addContainer(set, "spec.initContainers", i, &spec.InitContainers[i], &b.initContainers, &rec)
		if err != nil {
			return Record{}, err
		}
		if added {
			rec.InitContainers = append(rec.InitContainers, spec.InitContainers[i].Name)
		}
	}
	for i := range spec.Containers {
		added, err := b.addContainer(set, "spec.containers", i, &spec.Containers[i], &b.containers, &rec)
		if err != nil {
			return Record{}, err
		}
		if added {
			rec.Containers = append(rec.Containers, spec.Containers[i].Name)
		}
	}
	if err := b.finishOverrides(set, &rec); err != nil {
		return Record{}, err
	}
	vols, err := b.addVolumes(set, rec)
	if err != nil {
		return Record{}, err
	}
	rec.Volumes = vols
	rec.ImagePullSecrets = b.addPullSecrets(spec.ImagePullSecrets)
	if err := b.padFor(set, &rec); err != nil {
		return Record{}, err
	}
	if err := b.checkPodResources(set, rec); err != nil {
		return Record{}, err
	}
	if err := b.checkLimitRanges(set, rec); err != nil {
		return Record{}, err
	}
	if err := b.patchMetadata(set, &rec); err != nil {
		return Record{}, err
	}
	return rec, nil
}

// addContainer renders one sidecar container and places it. It reports false when the Pod
// already has a container of that name that carries the sidecar (nothing to add).
func (b *builder) addContainer(set *CompiledSet, field string, i int, sc *appsv1alpha1.SidecarContainer,
	into *placement, rec *Record) (bool, error) {
	name := sc.Name
	path := fmt.Sprintf("%s[%d].name", field, i)
	if other, ok := b.containerOwner[name]; ok {
		return false, &RefusedError{Reason: ReasonContainerClash, SidecarSet: set.Name(), Field: path, Detail: fmt.Sprintf(
			"SidecarSet %q also injects a container named %q into this pod; a pod's container names must be unique, so rename the container in one of the two SidecarSets or make their selectors disjoint", other, name)}
	}
	init := into == &b.initContainers
	rendered, copies, notShared := b.render(set, sc)
	rendered, err := b.withPolicyResources(set, fmt.Sprintf("%s[%d]", field, i), sc, rendered)
	if err != nil {
		return false, err
	}
	if existing, list := b.appContainer(name); existing != nil {
		if (list == "init container") == init && podHasContainer(existing, rendered, init, b.pod.Spec.HostNetwork) {
			b.containerOwner[name] = set.Name()
			return false, nil
		}
		return false, &RefusedError{Reason: ReasonContainerClash, SidecarSet: set.Name(), Field: path, Detail: fmt.Sprintf(
			"the pod already has %s named %q with a different definition; the sidecar would replace it, so rename the pod's %s or the sidecar", article(list), name, list)}
	}
	if err := b.checkHostNetworkPorts(set, field, i, rendered); err != nil {
		return false, err
	}
	if err := b.checkPorts(set, field, i, sc, rendered, init); err != nil {
		return false, err
	}
	if !init {
		if err := b.checkHostPorts(set, field, i, rendered); err != nil {
			return false, err
		}
	}
	b.containerOwner[name] = set.Name()
	if copies != nil {
		if b.copies == nil {
			b.copies = map[string]*Copies{}
		}
		b.copies[name] = copies
	}
	into.add(*rendered, sc.PodInjectPolicy == appsv1alpha1.BeforeAppContainer)
	b.addedContainers = b.addedContainers || !init
	for _, n := range notShared {
		rec.NotShared = append(rec.NotShared, n.what)
		b.warnings = append(b.warnings, fmt.Sprintf("SidecarSet %q %s left out %s", set.Name(), n.field, n.what))
	}
	return true, nil
}

func article(noun string) string {
	if strings.IndexAny(noun[:1], "aeiou") == 0 {
		return "an " + noun
	}
	return "a " + noun
}

// appContainer finds a container or init container of the Pod's own (not injected earlier)
// with that name, and says which list holds it.
func (b *builder) appContainer(name string) (*corev1.Container, string) {
	for i := range b.pod.Spec.Containers {
		if c := &b.pod.Spec.Containers[i]; c.Name == name && !b.strip.containers.Has(name) {
			return c, "container"
		}
	}
	for i := range b.pod.Spec.InitContainers {
		if c := &b.pod.Spec.InitContainers[i]; c.Name == name && !b.strip.initContainers.Has(name) {
			return c, "init container"
		}
	}
	return nil, ""
}

// addVolumes adds the set's volumes that its injected containers mount, and returns the names
// it added.
func (b *builder) addVolumes(set *CompiledSet, rec Record) ([]string, error) {
	spec := &set.Set.Spec
	needed := mountedVolumes(spec, rec)
	var added []string
	for i := range spec.Volumes {
		v := &spec.Volumes[i]
		if !needed.Has(v.Name) {
			continue
		}
		needed.Delete(v.Name)
		ok, err := b.addVolume(set, i, v)
		if err != nil {
			return nil, err
		}
		if ok {
			added = append(added, v.Name)
		}
	}
	// What is left must be a volume of the Pod's own (a shared or deliberately mounted one).
	for _, name := range sets.List(needed) {
		if b.podVolume(name) == nil {
			return nil, &RefusedError{Reason: ReasonVolumeClash, SidecarSet: set.Name(), Field: "spec.volumes", Detail: fmt.Sprintf(
				"an injected container mounts volume %q, which neither the SidecarSet nor the pod defines; add it to spec.volumes of the SidecarSet", name)}
		}
	}
	return added, nil
}

// mountedVolumes is the set of volume names the SidecarSet's injected containers mount (their
// own mounts and devices; shared app mounts refer to the Pod's volumes).
func mountedVolumes(spec *appsv1alpha1.SidecarSetSpec, rec Record) sets.Set[string] {
	injected := sets.New(rec.Containers...).Insert(rec.InitContainers...)
	out := sets.New[string]()
	for _, list := range [][]appsv1alpha1.SidecarContainer{spec.InitContainers, spec.Containers} {
		for i := range list {
			if !injected.Has(list[i].Name) {
				continue
			}
			for _, m := range list[i].VolumeMounts {
				out.Insert(m.Name)
			}
			for _, d := range list[i].VolumeDevices {
				out.Insert(d.Name)
			}
		}
	}
	return out
}

func (b *builder) addVolume(set *CompiledSet, i int, v *corev1.Volume) (bool, error) {
	if existing := b.podVolume(v.Name); existing != nil {
		if sameVolume(existing, v) {
			return false, nil
		}
		return false, &RefusedError{Reason: ReasonVolumeClash, SidecarSet: set.Name(), Field: fmt.Sprintf("spec.volumes[%d].name", i), Detail: fmt.Sprintf(
			"the pod already has a volume named %q with a different definition; rename the volume in the SidecarSet or in the pod", v.Name)}
	}
	if other, ok := b.volumeOwner[v.Name]; ok {
		if prev := b.injectedVolume(v.Name); prev == nil || sameVolume(prev, v) {
			return false, nil // the same volume, brought by two sets: add it once
		}
		return false, &RefusedError{Reason: ReasonVolumeClash, SidecarSet: set.Name(), Field: fmt.Sprintf("spec.volumes[%d].name", i), Detail: fmt.Sprintf(
			"SidecarSet %q also injects a volume named %q into this pod with a different definition; give the two volumes different names or the same definition", other, v.Name)}
	}
	b.volumeOwner[v.Name] = set.Name()
	b.volumes = append(b.volumes, *v)
	return true, nil
}

// podVolume finds a volume of the Pod's own (not added by an earlier injection).
func (b *builder) podVolume(name string) *corev1.Volume {
	if b.strip.volumes.Has(name) {
		return nil
	}
	for i := range b.pod.Spec.Volumes {
		if b.pod.Spec.Volumes[i].Name == name {
			return &b.pod.Spec.Volumes[i]
		}
	}
	return nil
}

// injectedVolume finds a volume added (or kept) in this injection.
func (b *builder) injectedVolume(name string) *corev1.Volume {
	for i := range b.volumes {
		if b.volumes[i].Name == name {
			return &b.volumes[i]
		}
	}
	return nil
}

func (b *builder) addPullSecrets(refs []corev1.LocalObjectReference) []string {
	var added []string
	for _, r := range refs {
		if b.hasPullSecret(r.Name) {
			continue
		}
		b.pullSecrets = append(b.pullSecrets, r)
		added = append(added, r.Name)
	}
	return added
}

func (b *builder) hasPullSecret(name string) bool {
	for _, r := range b.pod.Spec.ImagePullSecrets {
		if r.Name == name && !b.strip.pullSecrets.Has(name) {
			return true
		}
	}
	for _, r := range b.pullSecrets {
		if r.Name == name {
			return true
		}
	}
	return false
}
