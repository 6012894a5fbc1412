package inject

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/podrules"
)

// Padding is what podResources: Pad adds to a Pod's pod-level resources (as the API server
// stores them: written out, see padFor) for some sidecars: regular containers and native
// sidecars (paddedSidecars; plain init containers are not padded for: they end before the app
// starts, and must fit as they are).
//
// Only the resources the Pod's pod-level requests (or limits) name are padded there: a pod
// that sets only limits has its requests filled in by the API server. The Pod keeps its QoS
// class: in a Guaranteed Pod (pod-level cpu and memory limits, with requests equal to them or
// left to default) cpu and memory requests and limits grow by the same amount, the larger of
// each sidecar's request and limit; otherwise requests grow by the sidecars' requests and
// limits by their limits (a sidecar without a limit adds its request: it shares the Pod's
// limit above that). A Burstable Pod stays Burstable: its limits never grow less than its
// requests.
func Padding(level *corev1.ResourceRequirements, guaranteed bool, sidecars []corev1.Container) corev1.ResourceRequirements {
	var out corev1.ResourceRequirements
	if level == nil {
		return out
	}
	add := func(to *corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
		if q.IsZero() {
			return
		}
		if *to == nil {
			*to = corev1.ResourceList{}
		}
		sum := (*to)[name]
		sum.Add(q)
		(*to)[name] = sum
	}
	for i := range sidecars {
		c := &sidecars[i]
		for _, name := range paddedResources(level) {
			req, hasReq := c.Resources.Requests[name]
			limit, hasLimit := c.Resources.Limits[name]
			if !hasReq && hasLimit {
				req = limit // the API server defaults a container's request to its limit
			}
			if !hasLimit {
				limit = req
			}
			reqPad, limitPad := req, limit
			if guaranteed && slices.Contains(qosResources, name) {
				both := req
				if limit.Cmp(req) > 0 {
					both = limit
				}
				reqPad, limitPad = both, both
			}
			if _, ok := level.Requests[name]; ok {
				add(&out.Requests, name, reqPad)
			}
			if _, ok := level.Limits[name]; ok {
				add(&out.Limits, name, limitPad)
			}
		}
	}
	return out
}

// paddedResources are the resources a pod-level budget names, in a fixed order.
func paddedResources(level *corev1.ResourceRequirements) []corev1.ResourceName {
	var names []corev1.ResourceName
	for _, l := range []corev1.ResourceList{level.Requests, level.Limits} {
		for name := range l {
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	return names
}

// Guaranteed reports whether pod-level resources, as the API server stores them, make a Pod
// Guaranteed: cpu and memory requests equal to their limits (the QoS class of a Pod that sets
// pod-level resources is theirs).
func Guaranteed(stored *corev1.ResourceRequirements) bool {
	if stored == nil {
		return false
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		limit, hasLimit := stored.Limits[name]
		req, hasReq := stored.Requests[name]
		if !hasLimit || !hasReq || limit.IsZero() || req.Cmp(limit) != 0 {
			return false
		}
	}
	return true
}

// qosResources are the resources a QoS class is computed from.
var qosResources = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}

// withPadding returns level plus (sign 1) or minus (sign -1) pad, as a new value; level is
// never modified (it may be the admitted Pod's).
func withPadding(level *corev1.ResourceRequirements, pad corev1.ResourceRequirements, sign int) *corev1.ResourceRequirements {
	out := level.DeepCopy()
	for _, l := range []struct {
		to   *corev1.ResourceList
		from corev1.ResourceList
	}{{&out.Requests, pad.Requests}, {&out.Limits, pad.Limits}} {
		for name, q := range l.from {
			if *l.to == nil {
				*l.to = corev1.ResourceList{}
			}
			sum := (*l.to)[name]
			if sign < 0 {
				sum.Sub(q)
			} else {
				sum.Add(q)
			}
			(*l.to)[name] = sum
		}
	}
	return out
}

// paddedSidecars are the sidecars of rec in the pod's lists that padding is for: its regular
// containers and native sidecars (init containers with restartPolicy Always), with only what
// the pod's totals read.
func paddedSidecars(pod *corev1.Pod, rec Record) []corev1.Container {
	var out []corev1.Container
	for _, l := range []struct {
		list  []corev1.Container
		names []string
		init  bool
	}{{pod.Spec.Containers, rec.Containers, false}, {pod.Spec.InitContainers, rec.InitContainers, true}} {
		for i := range l.list {
			c := &l.list[i]
			if slices.Contains(l.names, c.Name) && (!l.init || c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways) {
				out = append(out, resourcesOf(c))
			}
		}
	}
	return out
}

// padFor adds what set's sidecars just placed (rec) pad to the pod-level resources the Pod
// sets, when the set says Pad, and records it. Their resources are read as the API server
// will store them: with the namespace's LimitRange defaults. The first padding writes the
// Pod's budget out as the API server would store it without the sidecars (its requests and
// limits defaulted from its own containers, Kubernetes 1.37's rule), then pads that: a value
// the Pod left to default would otherwise be defaulted from the sidecars too, after admission,
// and change the Pod's QoS class or collapse its request.
func (b *builder) padFor(set *CompiledSet, rec *Record) error {
	if set.Set.Spec.PodResources != appsv1alpha1.PodResourcesPad || b.podResources == nil || len(rec.Containers)+len(rec.InitContainers) == 0 {
		return nil
	}
	view, err := b.resourcesView(true)
	if err != nil {
		return err
	}
	level := b.podResources
	if !b.writtenOut {
		own, err := b.ownResourcesView()
		if err != nil {
			return err
		}
		if level, err = podrules.PodLevelDefaulted(own); err != nil {
			return err
		}
	}
	pad := Padding(level, Guaranteed(level), paddedSidecars(view, *rec))
	if len(pad.Requests)+len(pad.Limits) == 0 {
		return nil
	}
	b.podResources, b.writtenOut = withPadding(level, pad, 1), true
	rec.Padded = &pad
	return nil
}

// unpad takes back what earlier injections padded the Pod for, for the sets that pad now and
// whose sidecars this injection removes (all but paused sets, which keep theirs): computed from
// those sidecars as the Pod has them, whatever amounts the record says. What a set that no
// longer pads (or no longer exists) padded stays, as the Pod's own.
func (b *builder) unpad(old Records, pads func(set string) bool) error {
	if b.podResources == nil {
		return nil
	}
	for _, name := range old.Names() {
		rec := old[name]
		if rec.Padded == nil || !pads(name) {
			continue
		}
		level := b.podResources
		if pad := Padding(level, Guaranteed(level), paddedSidecars(b.pod, rec)); len(pad.Requests)+len(pad.Limits) > 0 {
			b.podResources = withPadding(level, pad, -1)
		}
		b.ownResources, b.writtenOut = b.podResources, true
		for _, l := range []corev1.ResourceList{b.podResources.Requests, b.podResources.Limits} {
			for res, q := range l {
				if q.Sign() < 0 {
					return &RefusedError{Reason: ReasonPodResources, SidecarSet: name, Field: "spec.resources", Detail: fmt.Sprintf(
						"the pod's record says this SidecarSet padded its pod-level resources for its sidecars, and taking back what the sidecars it runs add "+
							"leaves spec.resources with less than no %s: the pod's budget was lowered since, or the record is not the operator's; "+
							"give the pod spec.resources without the sidecars' share, or remove %s", res, appsv1alpha1.StatusAnnotation)}
				}
			}
		}
	}
	return nil
}
