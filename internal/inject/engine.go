package inject

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/podrules"
)

// Input is what Apply needs. Only the Pod's metadata (labels, annotations), containers, init
// containers, volumes, image pull secrets, hostNetwork and pod-level resources are read; of
// the containers, only the names unless a set needs more (see the CompiledSet's TransfersEnv,
// SharesVolumes, ComparesPorts and DeclaresResources).
type Input struct {
	// Pod is the Pod as admitted; never modified.
	Pod *corev1.Pod
	// Sets are the SidecarSets that may apply, sorted by name; those that do not match are
	// skipped with a reason.
	Sets []*CompiledSet
	// NamespaceLabels are the labels of the Pod's namespace. They are read only for sets with
	// a namespace selector.
	NamespaceLabels map[string]string
	// Known looks up any existing SidecarSet by name, matching or not. The Pod's status
	// annotation is trusted only for what a known set declares (see trustRecords). When nil,
	// only Sets are known.
	Known func(name string) (*CompiledSet, bool)
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
		return nil, &RefusedError{Field: "metadata.annotations[" + appsv1alpha1.StatusAnnotation + "]", Detail: err.Error()}
	}
	res := &Result{pod: pod, Records: Records{}}
	old, distrusted := trustRecords(old, in.known)
	b := newBuilder(pod, old)
	b.warnings = distrusted
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

func (in *Input) known(name string) (*CompiledSet, bool) {
	if in.Known != nil {
		return in.Known(name)
	}
	for _, c := range in.Sets {
		if c.Name() == name {
			return c, true
		}
	}
	return nil, false
}

// owned lists, per kind, the names an earlier injection added.
type owned struct {
	containers, initContainers, volumes, pullSecrets sets.Set[string]
}

func ownedBy(recs Records) owned {
	o := owned{sets.New[string](), sets.New[string](), sets.New[string](), sets.New[string]()}
	for _, r := range recs {
		o.containers.Insert(r.Containers...)
		o.initContainers.Insert(r.InitContainers...)
		o.volumes.Insert(r.Volumes...)
		o.pullSecrets.Insert(r.ImagePullSecrets...)
	}
	return o
}

// builder accumulates the injection of the SidecarSets into one Pod.
type builder struct {
	pod *corev1.Pod
	// strip is everything an earlier injection added: it is removed, then injected again
	// (active sets) or put back as it was (paused sets). What is left is the Pod's own.
	strip owned

	appContainers []*corev1.Container // the Pod's own containers, in order

	containers, initContainers placement
	volumes                    []corev1.Volume
	volumeOwner                map[string]string // volume name -> set that adds it
	pullSecrets                []corev1.LocalObjectReference
	containerOwner             map[string]string  // injected container name -> set
	copies                     map[string]*Copies // rendered container name -> its entries copied from app containers
	addedContainers            bool               // something went into spec.containers
	ownResourcesFit            *bool              // the pod's own containers fit in its pod-level resources; nil: not computed yet
	warnings                   []string
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
	out := Record{Hash: rec.Hash, NotShared: rec.NotShared}
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
func (b *builder) inject(c *CompiledSet) (Record, error) {
	spec := &c.Set.Spec
	rec := Record{Hash: c.Hash}
	for i := range spec.InitContainers {
		added, err := b.addContainer(c, "spec.initContainers", i, &spec.InitContainers[i], &b.initContainers, &rec)
		if err != nil {
			return Record{}, err
		}
		if added {
			rec.InitContainers = append(rec.InitContainers, spec.InitContainers[i].Name)
		}
	}
	for i := range spec.Containers {
		added, err := b.addContainer(c, "spec.containers", i, &spec.Containers[i], &b.containers, &rec)
		if err != nil {
			return Record{}, err
		}
		if added {
			rec.Containers = append(rec.Containers, spec.Containers[i].Name)
		}
	}
	vols, err := b.addVolumes(c, rec)
	if err != nil {
		return Record{}, err
	}
	rec.Volumes = vols
	rec.ImagePullSecrets = b.addPullSecrets(spec.ImagePullSecrets)
	if err := b.checkPodResources(c, rec); err != nil {
		return Record{}, err
	}
	return rec, nil
}

// checkPodResources refuses a set whose sidecars make the pod's containers need more than the
// pod-level resources the pod sets (spec.resources): the API server would refuse the pod with
// a message that names neither the sidecar nor the set. The pod's budget is the user's to set,
// so it is never raised behind their back. A pod over its budget without the sidecars is left
// to the API server, whose message is then about the pod's own containers.
func (b *builder) checkPodResources(c *CompiledSet, rec Record) error {
	if b.pod.Spec.Resources == nil || !c.DeclaresResources || len(rec.Containers)+len(rec.InitContainers) == 0 {
		return nil // the common case: nothing to add up
	}
	if b.ownResourcesFit == nil {
		fit := len(podrules.PodResourceErrors(b.resourcesSoFar(false))) == 0
		b.ownResourcesFit = &fit
	}
	if !*b.ownResourcesFit {
		return nil
	}
	errs := podrules.PodResourceErrors(b.resourcesSoFar(true))
	if len(errs) == 0 {
		return nil
	}
	// Report the first error that names a resource the set's sidecars declare: the field to fix.
	field, cause := "", errs[0]
	for _, e := range errs {
		if f, specific := resourceField(c, rec, e.Field); field == "" || specific {
			field, cause = f, e
			if specific {
				break
			}
		}
	}
	return &RefusedError{SidecarSet: c.Name(), Field: field, Detail: fmt.Sprintf(
		"with this SidecarSet's sidecars the pod's containers no longer fit in the pod-level resources the pod sets (%s): raise the pod's spec.resources, or lower the sidecars' requests and limits",
		cause.Error())}
}

// resourcesSoFar is the pod's resources view: its pod-level resources and its own containers,
// with the sidecars placed so far when withSidecars.
func (b *builder) resourcesSoFar(withSidecars bool) *corev1.Pod {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Resources: b.pod.Spec.Resources, OS: b.pod.Spec.OS}}
	for i := range b.pod.Spec.InitContainers {
		if c := b.pod.Spec.InitContainers[i]; !b.strip.initContainers.Has(c.Name) {
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
		}
	}
	for _, app := range b.appContainers {
		pod.Spec.Containers = append(pod.Spec.Containers, *app)
	}
	if withSidecars {
		pod.Spec.InitContainers = append(append(slices.Clone(b.initContainers.before), pod.Spec.InitContainers...), b.initContainers.after...)
		pod.Spec.Containers = append(append(slices.Clone(b.containers.before), pod.Spec.Containers...), b.containers.after...)
	}
	return pod
}

// resourceField is the field of the set that a pod-level resources error (at podField, such as
// spec.resources.requests[cpu]) comes from: the first injected sidecar that requests (or
// limits) that resource, once defaulted (specific); or the first injected sidecar's resources.
func resourceField(c *CompiledSet, rec Record, podField string) (field string, specific bool) {
	name, kind := "", "requests"
	for rest := podField; ; {
		open := strings.IndexByte(rest, '[')
		end := strings.IndexByte(rest, ']')
		if open < 0 || end < open {
			break
		}
		if key := rest[open+1 : end]; strings.Trim(key, "0123456789") != "" {
			name = key
		}
		rest = rest[end+1:]
	}
	if strings.Contains(podField, "limits") {
		kind = "limits"
	}
	injected := sets.New(rec.Containers...).Insert(rec.InitContainers...)
	first := ""
	for _, l := range []struct {
		field string
		list  []appsv1alpha1.SidecarContainer
		init  bool
	}{{"spec.initContainers", c.Set.Spec.InitContainers, true}, {"spec.containers", c.Set.Spec.Containers, false}} {
		for i := range l.list {
			if !injected.Has(l.list[i].Name) {
				continue
			}
			r := podrules.DefaultedContainer(&l.list[i].Container, l.init, false).Resources
			list := r.Requests
			if kind == "limits" {
				list = r.Limits
			}
			if _, ok := list[corev1.ResourceName(name)]; ok {
				return fmt.Sprintf("%s[%d].resources.%s[%s]", l.field, i, kind, name), true
			}
			if first == "" && (len(r.Requests) > 0 || len(r.Limits) > 0) {
				first = fmt.Sprintf("%s[%d].resources", l.field, i)
			}
		}
	}
	return first, false
}

// addContainer renders one sidecar container and places it. It reports false when the Pod
// already has a container of that name that carries the sidecar (nothing to add).
func (b *builder) addContainer(c *CompiledSet, field string, i int, sc *appsv1alpha1.SidecarContainer,
	into *placement, rec *Record) (bool, error) {
	name := sc.Name
	path := fmt.Sprintf("%s[%d].name", field, i)
	if other, ok := b.containerOwner[name]; ok {
		return false, &RefusedError{SidecarSet: c.Name(), Field: path, Detail: fmt.Sprintf(
			"SidecarSet %q also injects a container named %q into this pod; a pod's container names must be unique, so rename the container in one of the two SidecarSets or make their selectors disjoint", other, name)}
	}
	init := into == &b.initContainers
	rendered, copies, notShared := b.render(c, sc)
	if existing, list := b.appContainer(name); existing != nil {
		if (list == "init container") == init && podHasContainer(existing, rendered, init, b.pod.Spec.HostNetwork) {
			b.containerOwner[name] = c.Name()
			return false, nil
		}
		return false, &RefusedError{SidecarSet: c.Name(), Field: path, Detail: fmt.Sprintf(
			"the pod already has %s named %q with a different definition; the sidecar would replace it, so rename the pod's %s or the sidecar", article(list), name, list)}
	}
	if err := b.checkHostNetworkPorts(c, field, i, rendered); err != nil {
		return false, err
	}
	if err := b.checkPorts(c, field, i, sc, rendered, init); err != nil {
		return false, err
	}
	if !init {
		if err := b.checkHostPorts(c, field, i, rendered); err != nil {
			return false, err
		}
	}
	b.containerOwner[name] = c.Name()
	if copies != nil {
		if b.copies == nil {
			b.copies = map[string]*Copies{}
		}
		b.copies[name] = copies
	}
	into.add(*rendered, sc.PodInjectPolicy == appsv1alpha1.BeforeAppContainer)
	b.addedContainers = b.addedContainers || !init
	rec.NotShared = append(rec.NotShared, notShared...)
	for _, n := range notShared {
		b.warnings = append(b.warnings, fmt.Sprintf("SidecarSet %q shareVolumePolicy left out %s", c.Name(), n))
	}
	return true, nil
}

// checkHostNetworkPorts refuses, in a pod on the host's network, a sidecar port that declares
// no hostPort. Kubernetes makes such a port a host port there (hostPort defaults to
// containerPort), so every pod the set injects on a node would claim the same node port: a
// second one cannot be scheduled there, or, were the port dropped, its sidecar could not bind.
// A port that declares its hostPort says the sidecar is meant to bind the node's port, and is
// injected (one such pod per node, as for any host port).
func (b *builder) checkHostNetworkPorts(c *CompiledSet, field string, i int, sidecar *corev1.Container) error {
	if !b.pod.Spec.HostNetwork {
		return nil
	}
	for pi := range sidecar.Ports {
		p := &sidecar.Ports[pi]
		if p.HostPort != 0 {
			continue
		}
		return &RefusedError{SidecarSet: c.Name(), Field: fmt.Sprintf("%s[%d].ports[%d].hostPort", field, i, pi), Detail: fmt.Sprintf(
			"the pod uses the host's network, where Kubernetes makes container port %d/%s the node's port %d too, so every pod this SidecarSet injects on a node would claim it: set hostPort: %d on the sidecar's port if it is meant to bind the node's port (one such pod per node), or keep host-network pods out of the SidecarSet's selector",
			p.ContainerPort, protocol(p), p.ContainerPort, p.ContainerPort)}
	}
	return nil
}

// checkPorts compares the sidecar's ports with those of the containers that run alongside it
// (containers of a pod share one network namespace). A container port (number and protocol)
// one of them declares already is refused: only one of the two can listen on it, and the API
// server merely warns of a duplicate port definition. A port name one of the pod's own
// containers declares is refused where the sidecar comes first (Services' named targetPorts and
// other lookups by name would reach the sidecar instead of the app) and warned of otherwise.
// The API server gives no error for either.
// Plain init containers run alone, before the others, and are not compared.
func (b *builder) checkPorts(c *CompiledSet, field string, i int, sc *appsv1alpha1.SidecarContainer, sidecar *corev1.Container, init bool) error {
	if len(sidecar.Ports) == 0 || !runsAlongside(sidecar, init) {
		return nil // the common case: nothing to compare
	}
	running := b.runningContainers()
	before := sc.PodInjectPolicy == appsv1alpha1.BeforeAppContainer
	for pi := range sidecar.Ports {
		p := &sidecar.Ports[pi]
		path := fmt.Sprintf("%s[%d].ports[%d]", field, i, pi)
		for _, r := range running {
			if slices.ContainsFunc(r.c.Ports, func(q corev1.ContainerPort) bool { return samePort(&q, p) }) {
				return &RefusedError{SidecarSet: c.Name(), Field: path + ".containerPort", Detail: fmt.Sprintf(
					"%s already declares container port %d/%s; the containers of a pod share one network, so only one of them can listen on it: change the sidecar's containerPort, or keep such pods out of the SidecarSet's selector",
					r.who, p.ContainerPort, protocol(p))}
			}
		}
		if p.Name == "" {
			continue
		}
		for _, r := range running {
			if !r.app || !slices.ContainsFunc(r.c.Ports, func(q corev1.ContainerPort) bool { return q.Name == p.Name }) {
				continue
			}
			if why, first := sidecarComesFirst(init, before, r.init); first {
				return &RefusedError{SidecarSet: c.Name(), Field: path + ".name", Detail: fmt.Sprintf(
					"%s already declares a port named %q and the sidecar comes before it (%s), so lookups of the port by name would reach the sidecar instead of the app: rename the sidecar's port",
					r.who, p.Name, why)}
			}
			b.warnings = append(b.warnings, fmt.Sprintf(
				"SidecarSet %q container %q: port name %q is also the name of a port of %s, which comes first and keeps it for lookups by name; rename the sidecar's port to tell them apart",
				c.Name(), sidecar.Name, p.Name, r.who))
		}
	}
	return nil
}

// runningContainer is a container that runs alongside the app: a regular one or a native
// sidecar (an init container that restarts), the pod's own or injected in this admission.
type runningContainer struct {
	c    *corev1.Container
	who  string
	app  bool // the pod's own, not a sidecar
	init bool // a native sidecar
}

func (b *builder) runningContainers() []runningContainer {
	var out []runningContainer
	for i := range b.pod.Spec.InitContainers {
		if c := &b.pod.Spec.InitContainers[i]; !b.strip.initContainers.Has(c.Name) && runsAlongside(c, true) {
			out = append(out, runningContainer{c: c, who: fmt.Sprintf("the pod's init container %q", c.Name), app: true, init: true})
		}
	}
	for _, app := range b.appContainers {
		out = append(out, runningContainer{c: app, who: fmt.Sprintf("the pod's container %q", app.Name), app: true})
	}
	for _, l := range []struct {
		lists [][]corev1.Container
		init  bool
	}{{[][]corev1.Container{b.initContainers.before, b.initContainers.after}, true}, {[][]corev1.Container{b.containers.before, b.containers.after}, false}} {
		for _, list := range l.lists {
			for i := range list {
				if c := &list[i]; runsAlongside(c, l.init) {
					out = append(out, runningContainer{c: c, who: fmt.Sprintf("container %q of SidecarSet %q", c.Name, b.containerOwner[c.Name]), init: l.init})
				}
			}
		}
	}
	return out
}

// runsAlongside reports whether a container of the regular (init false) or init list runs
// while the app does: every regular container, and init containers that restart (native
// sidecars).
func runsAlongside(c *corev1.Container, init bool) bool {
	return !init || c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// sidecarComesFirst says whether a sidecar (a native one when init; placed before the app's
// containers of its list when before) comes before an app container (a native sidecar when
// appInit) where a port is looked up by name, and why. Services look in spec.containers first,
// then in the native sidecars; the pod spec, as the API server's own warning reads it, lists
// init containers first. The sidecar is taken to come first when it does in either order.
func sidecarComesFirst(init, before, appInit bool) (string, bool) {
	switch {
	case init && !appInit:
		return "init containers come first in the pod spec, and the API server warns that Services and probes selecting a port by name use the first", true
	case !init && appInit:
		return "Services look named targetPorts up in spec.containers before native sidecars", true
	case before:
		return "podInjectPolicy BeforeAppContainer", true
	}
	return "", false
}

// samePort reports whether two ports are the same container port: number and protocol (TCP
// when unset).
func samePort(a, b *corev1.ContainerPort) bool {
	return a.ContainerPort == b.ContainerPort && protocol(a) == protocol(b)
}

func protocol(p *corev1.ContainerPort) corev1.Protocol {
	if p.Protocol == "" {
		return corev1.ProtocolTCP
	}
	return p.Protocol
}

// checkHostPorts refuses a sidecar whose host port another container in spec.containers
// already binds (the API server refuses such a Pod with a bare duplicate-value error; init
// containers run one at a time and are checked alone).
func (b *builder) checkHostPorts(c *CompiledSet, field string, i int, sidecar *corev1.Container) error {
	if len(sidecar.Ports) == 0 {
		return nil // the common case: nothing to default, nothing to compare
	}
	mine := podrules.DefaultedContainer(sidecar, false, b.pod.Spec.HostNetwork)
	var holders map[string]string // computed once, and only for a sidecar that binds a host port
	for pi, p := range mine.Ports {
		if p.HostPort == 0 {
			continue
		}
		if holders == nil {
			holders = b.containersWithHostPorts()
		}
		key := podrules.HostPortKey(p)
		if holder, ok := holders[key]; ok {
			return &RefusedError{SidecarSet: c.Name(), Field: fmt.Sprintf("%s[%d].ports[%d].hostPort", field, i, pi), Detail: fmt.Sprintf(
				"%s already binds host port %s; a host port can be bound once per pod, so change or remove the sidecar's hostPort or the other one", holder, key)}
		}
	}
	return nil
}

// containersWithHostPorts maps each host port (protocol/hostIP/port, as the API server keys
// them) bound in spec.containers so far to who binds it.
func (b *builder) containersWithHostPorts() map[string]string {
	out := map[string]string{}
	note := func(c *corev1.Container, who string) {
		for _, p := range podrules.DefaultedContainer(c, false, b.pod.Spec.HostNetwork).Ports {
			if p.HostPort != 0 {
				out[podrules.HostPortKey(p)] = who
			}
		}
	}
	for _, app := range b.appContainers {
		note(app, fmt.Sprintf("the pod's container %q", app.Name))
	}
	for _, list := range [][]corev1.Container{b.containers.before, b.containers.after} {
		for i := range list {
			note(&list[i], fmt.Sprintf("container %q of SidecarSet %q", list[i].Name, b.containerOwner[list[i].Name]))
		}
	}
	return out
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
func (b *builder) addVolumes(c *CompiledSet, rec Record) ([]string, error) {
	spec := &c.Set.Spec
	needed := mountedVolumes(spec, rec)
	var added []string
	for i := range spec.Volumes {
		v := &spec.Volumes[i]
		if !needed.Has(v.Name) {
			continue
		}
		needed.Delete(v.Name)
		ok, err := b.addVolume(c, i, v)
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
			return nil, &RefusedError{SidecarSet: c.Name(), Field: "spec.volumes", Detail: fmt.Sprintf(
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

func (b *builder) addVolume(c *CompiledSet, i int, v *corev1.Volume) (bool, error) {
	if existing := b.podVolume(v.Name); existing != nil {
		if sameVolume(existing, v) {
			return false, nil
		}
		return false, &RefusedError{SidecarSet: c.Name(), Field: fmt.Sprintf("spec.volumes[%d].name", i), Detail: fmt.Sprintf(
			"the pod already has a volume named %q with a different definition; rename the volume in the SidecarSet or in the pod", v.Name)}
	}
	if other, ok := b.volumeOwner[v.Name]; ok {
		if prev := b.injectedVolume(v.Name); prev == nil || sameVolume(prev, v) {
			return false, nil // the same volume, brought by two sets: add it once
		}
		return false, &RefusedError{SidecarSet: c.Name(), Field: fmt.Sprintf("spec.volumes[%d].name", i), Detail: fmt.Sprintf(
			"SidecarSet %q also injects a volume named %q into this pod with a different definition; give the two volumes different names or the same definition", other, v.Name)}
	}
	b.volumeOwner[v.Name] = c.Name()
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
