package inject

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/podrules"
)

// Padding is what podResources: Pad adds to a Pod's pod-level resources for some sidecars
// (regular containers and native sidecars; plain init containers are not padded for: they end
// before the app starts, and must fit as they are).
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
		if c.RestartPolicy != nil && *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			continue
		}
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

// padFor adds what set's sidecars just placed (rec) pad to the pod-level resources the Pod
// sets, when the set says Pad, and records it. Their resources are read as the API server
// will store them: with the namespace's LimitRange defaults.
func (b *builder) padFor(set *CompiledSet, rec *Record) error {
	if set.Set.Spec.PodResources != appsv1alpha1.PodResourcesPad || b.podResources == nil || len(rec.Containers)+len(rec.InitContainers) == 0 {
		return nil
	}
	view, err := b.resourcesView(true)
	if err != nil {
		return err
	}
	var sidecars []corev1.Container
	for _, l := range []struct {
		list  []corev1.Container
		names []string
		init  bool
	}{{view.Spec.Containers, rec.Containers, false}, {view.Spec.InitContainers, rec.InitContainers, true}} {
		for _, c := range l.list {
			if slices.Contains(l.names, c.Name) && (!l.init || c.RestartPolicy != nil) {
				sidecars = append(sidecars, c)
			}
		}
	}
	own, err := b.ownResourcesView()
	if err != nil {
		return err
	}
	stored, err := podrules.PodLevelDefaulted(own)
	if err != nil {
		return err
	}
	guaranteed := Guaranteed(stored)
	pad := Padding(b.podResources, guaranteed, sidecars)
	if len(pad.Requests)+len(pad.Limits) == 0 {
		return nil
	}
	b.podResources = withPadding(b.podResources, pad, 1)
	if guaranteed {
		// A Guaranteed pod that left its requests to default to its limits gets them written:
		// Kubernetes 1.37 defaults them after admission from the containers' requests, which
		// now include the sidecars', and the pod would turn Burstable.
		for _, name := range qosResources {
			if _, set := b.podResources.Requests[name]; !set {
				if b.podResources.Requests == nil {
					b.podResources.Requests = corev1.ResourceList{}
				}
				if pad.Requests == nil {
					pad.Requests = corev1.ResourceList{}
				}
				// Recorded as what it adds to the request the pod had by default (its own
				// limit), as a second injection of the injected pod records it.
				b.podResources.Requests[name] = b.podResources.Limits[name]
				pad.Requests[name] = pad.Limits[name]
			}
		}
	}
	rec.Padded = &pad
	return nil
}

// unpad takes back what earlier injections padded the Pod for, for the sets whose sidecars
// this injection removes (all but paused sets, which keep theirs): computed from those
// sidecars as the Pod has them, whatever amounts the record says.
func (b *builder) unpad(old Records, kept func(set string) bool) error {
	if b.podResources == nil {
		return nil
	}
	for _, name := range old.Names() {
		rec := old[name]
		if rec.Padded == nil || kept(name) {
			continue
		}
		var sidecars []corev1.Container
		for _, l := range []struct {
			list  []corev1.Container
			names []string
		}{{b.pod.Spec.Containers, rec.Containers}, {b.pod.Spec.InitContainers, rec.InitContainers}} {
			for _, c := range l.list {
				if slices.Contains(l.names, c.Name) {
					sidecars = append(sidecars, resourcesOf(&c))
				}
			}
		}
		if pad := Padding(b.podResources, Guaranteed(b.podResources), sidecars); len(pad.Requests)+len(pad.Limits) > 0 {
			b.podResources = withPadding(b.podResources, pad, -1)
		}
		b.ownResources = b.podResources
		for _, l := range []corev1.ResourceList{b.podResources.Requests, b.podResources.Limits} {
			for res, q := range l {
				if q.Sign() < 0 {
					return &RefusedError{Reason: ReasonUnreadableRecord, SidecarSet: name, Field: "metadata.annotations[" + appsv1alpha1.StatusAnnotation + "]",
						Detail: fmt.Sprintf("the record says SidecarSet %q padded the pod-level resources for its sidecars, but spec.resources holds less %s than they add: "+
							"remove the record's padded entry (or the whole annotation) from the pod", name, res)}
				}
			}
		}
	}
	return nil
}
