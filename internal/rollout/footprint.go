package rollout

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// Footprint is what one SidecarSet's sidecars in a Pod request and limit, as the Pod's spec
// says (what the scheduler reserves and the kubelet enforces; an in-place resize changes it).
// It is a value: PodStates compare with ==.
type Footprint struct {
	Requests, Limits Amounts
	// NativeRequests and NativeLimits are the native sidecars' part of Requests and Limits:
	// cost tools that count only app containers miss them.
	NativeRequests, NativeLimits Amounts
}

// Amounts are cpu in millicores, memory and ephemeral storage in bytes.
type Amounts struct {
	CPU, Memory, EphemeralStorage int64
}

// Add adds b to a.
func (a *Amounts) Add(b Amounts, sign int64) {
	a.CPU += sign * b.CPU
	a.Memory += sign * b.Memory
	a.EphemeralStorage += sign * b.EphemeralStorage
}

// Add adds g to f (sign 1) or takes it back (sign -1).
func (f *Footprint) Add(g Footprint, sign int64) {
	f.Requests.Add(g.Requests, sign)
	f.Limits.Add(g.Limits, sign)
	f.NativeRequests.Add(g.NativeRequests, sign)
	f.NativeLimits.Add(g.NativeLimits, sign)
}

// Zero reports whether f adds nothing.
func (f Footprint) Zero() bool { return f == Footprint{} }

// amountsOf reads the three resources of a container's requests or limits.
func amountsOf(l corev1.ResourceList) Amounts {
	var a Amounts
	if q, ok := l[corev1.ResourceCPU]; ok {
		a.CPU = q.MilliValue()
	}
	if q, ok := l[corev1.ResourceMemory]; ok {
		a.Memory = q.Value()
	}
	if q, ok := l[corev1.ResourceEphemeralStorage]; ok {
		a.EphemeralStorage = q.Value()
	}
	return a
}

// footprintOf sums what the set's sidecars in an injected Pod request and limit: the Pod's
// containers, and its native sidecars (init containers with restartPolicy Always), that the
// set declares by name and the Pod's record of the set lists. A container the Pod brought
// itself under a sidecar's name (own: the record does not list it) is the Pod's, and so is
// anything the set no longer declares: a Pod's record, which its author can edit, can never
// make an app container count. Plain init containers are left out: they end before the app
// starts, and a Pod's own requests hold for its life.
func footprintOf(set *inject.CompiledSet, pod *corev1.Pod, own []string) Footprint {
	var f Footprint
	for _, l := range []struct {
		declared   []appsv1alpha1.SidecarContainer
		containers []corev1.Container
		init       bool
	}{{set.Set.Spec.Containers, pod.Spec.Containers, false}, {set.Set.Spec.InitContainers, pod.Spec.InitContainers, true}} {
		for i := range l.containers {
			c := &l.containers[i]
			if l.init && (c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways) {
				continue
			}
			if !slices.ContainsFunc(l.declared, func(d appsv1alpha1.SidecarContainer) bool { return d.Name == c.Name }) || slices.Contains(own, c.Name) {
				continue
			}
			requests, limits := amountsOf(c.Resources.Requests), amountsOf(c.Resources.Limits)
			f.Requests.Add(requests, 1)
			f.Limits.Add(limits, 1)
			if l.init {
				f.NativeRequests.Add(requests, 1)
				f.NativeLimits.Add(limits, 1)
			}
		}
	}
	return f
}
