package inject

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/podrules"
)

// The containers of a pod share one network namespace (and, on the host's network, the node's):
// these checks refuse the sidecar ports that could not work in the pod, as the API server does
// not (it refuses only a host port bound twice, with a message that names no SidecarSet).

// checkHostNetworkPorts refuses, in a pod on the host's network, a sidecar port that declares
// no hostPort. Kubernetes makes such a port a host port there (hostPort defaults to
// containerPort), so every pod the set injects on a node would claim the same node port: a
// second one cannot be scheduled there, or, were the port dropped, its sidecar could not bind.
// A port that declares its hostPort says the sidecar is meant to bind the node's port, and is
// injected (one such pod per node, as for any host port).
func (b *builder) checkHostNetworkPorts(set *CompiledSet, field string, i int, sidecar *corev1.Container) error {
	if !b.pod.Spec.HostNetwork {
		return nil
	}
	for pi := range sidecar.Ports {
		p := &sidecar.Ports[pi]
		if p.HostPort != 0 {
			continue
		}
		return &RefusedError{Reason: ReasonPortClash, SidecarSet: set.Name(), Field: fmt.Sprintf("%s[%d].ports[%d].hostPort", field, i, pi), Detail: fmt.Sprintf(
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
func (b *builder) checkPorts(set *CompiledSet, field string, i int, sc *appsv1alpha1.SidecarContainer, sidecar *corev1.Container, init bool) error {
	if len(sidecar.Ports) == 0 || !runsAlongside(sidecar, init) {
		return nil // the common case: nothing to compare
	}
	running := b.runningContainers()
	before := sc.PodInjectPolicy == appsv1alpha1.BeforeAppContainer
	for pi := range sidecar.Ports {
		p := &sidecar.Ports[pi]
		path := fmt.Sprintf("%s[%d].ports[%d]", field, i, pi)
		for _, r := range running {
			if slices.ContainsFunc(r.container.Ports, func(q corev1.ContainerPort) bool { return samePort(&q, p) }) {
				return &RefusedError{Reason: ReasonPortClash, SidecarSet: set.Name(), Field: path + ".containerPort", Detail: fmt.Sprintf(
					"%s already declares container port %d/%s; the containers of a pod share one network, so only one of them can listen on it: change the sidecar's containerPort, or keep such pods out of the SidecarSet's selector",
					r.who, p.ContainerPort, protocol(p))}
			}
		}
		if p.Name == "" {
			continue
		}
		for _, r := range running {
			if !r.app || !slices.ContainsFunc(r.container.Ports, func(q corev1.ContainerPort) bool { return q.Name == p.Name }) {
				continue
			}
			if why, first := sidecarComesFirst(init, before, r.init); first {
				return &RefusedError{Reason: ReasonPortClash, SidecarSet: set.Name(), Field: path + ".name", Detail: fmt.Sprintf(
					"%s already declares a port named %q and the sidecar comes before it (%s), so lookups of the port by name would reach the sidecar instead of the app: rename the sidecar's port",
					r.who, p.Name, why)}
			}
			b.warnings = append(b.warnings, fmt.Sprintf(
				"SidecarSet %q container %q: port name %q is also the name of a port of %s, which comes first and keeps it for lookups by name; rename the sidecar's port to tell them apart",
				set.Name(), sidecar.Name, p.Name, r.who))
		}
	}
	return nil
}

// runningContainer is a container that runs alongside the app: a regular one or a native
// sidecar (an init container that restarts), the pod's own or injected in this admission.
type runningContainer struct {
	container *corev1.Container
	who       string
	app       bool // the pod's own, not a sidecar
	init      bool // a native sidecar
}

func (b *builder) runningContainers() []runningContainer {
	var out []runningContainer
	for i := range b.pod.Spec.InitContainers {
		if c := &b.pod.Spec.InitContainers[i]; !b.strip.initContainers.Has(c.Name) && runsAlongside(c, true) {
			out = append(out, runningContainer{container: c, who: fmt.Sprintf("the pod's init container %q", c.Name), app: true, init: true})
		}
	}
	for _, app := range b.appContainers {
		out = append(out, runningContainer{container: app, who: fmt.Sprintf("the pod's container %q", app.Name), app: true})
	}
	for _, l := range []struct {
		lists [][]corev1.Container
		init  bool
	}{{[][]corev1.Container{b.initContainers.before, b.initContainers.after}, true}, {[][]corev1.Container{b.containers.before, b.containers.after}, false}} {
		for _, list := range l.lists {
			for i := range list {
				if c := &list[i]; runsAlongside(c, l.init) {
					out = append(out, runningContainer{container: c, who: fmt.Sprintf("container %q of SidecarSet %q", c.Name, b.containerOwner[c.Name]), init: l.init})
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
	return !init || podrules.NativeSidecar(c)
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
func (b *builder) checkHostPorts(set *CompiledSet, field string, i int, sidecar *corev1.Container) error {
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
			return &RefusedError{Reason: ReasonPortClash, SidecarSet: set.Name(), Field: fmt.Sprintf("%s[%d].ports[%d].hostPort", field, i, pi), Detail: fmt.Sprintf(
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
