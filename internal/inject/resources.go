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

// checkPodResources refuses a set whose sidecars make the pod's containers need more than the
// pod-level resources the pod sets (spec.resources): the API server would refuse the pod with
// a message that names neither the sidecar nor the set. The pod's budget is the user's to set,
// so it is never raised behind their back. A pod over its budget without the sidecars is left
// to the API server, whose message is then about the pod's own containers. The containers are
// added up with the namespace's LimitRange defaults, which LimitRanger gives them before the
// API server validates the pod: a sidecar that declares nothing still gets a default limit.
func (b *builder) checkPodResources(set *CompiledSet, rec Record) error {
	if b.podResources == nil || (!set.DeclaresResources && len(b.limitRanges) == 0) || len(rec.Containers)+len(rec.InitContainers) == 0 {
		return nil // the common case: nothing to add up
	}
	if b.ownResourcesFit == nil {
		own, err := b.ownResourcesView()
		if err != nil {
			return err
		}
		fit := len(podrules.PodResourceErrors(own)) == 0
		b.ownResourcesFit = &fit
	}
	if !*b.ownResourcesFit {
		return nil
	}
	with, err := b.resourcesView(true)
	if err != nil {
		return err
	}
	errs := podrules.PodResourceErrors(with)
	if len(errs) == 0 {
		return nil
	}
	// Report the first error that names a resource the set's sidecars declare: the field to fix.
	field, cause := "", errs[0]
	for _, e := range errs {
		if f, specific := resourceField(set, rec, e.Field); field == "" || specific {
			field, cause = f, e
			if specific {
				break
			}
		}
	}
	return &RefusedError{Reason: ReasonPodResources, SidecarSet: set.Name(), Field: field, Detail: fmt.Sprintf(
		"with this SidecarSet's sidecars the pod's containers no longer fit in the pod-level resources the pod sets (%s): raise the pod's spec.resources, or lower the sidecars' requests and limits%s",
		cause.Error(), defaultedRequestsHint(b.podResources, cause.Field))}
}

// defaultedRequestsHint explains a pod-level request the pod may never have written: where a
// pod sets a pod-level limit and no request for a resource, API servers before 1.37 fill the
// request in from the app containers' before admission webhooks run (1.37 does it after them,
// PodLevelResourcesFixDefaulting), so the sidecars find no room in it. Empty for any other
// field.
func defaultedRequestsHint(podLevel *corev1.ResourceRequirements, field string) string {
	name, found := strings.CutPrefix(field, "spec.resources.requests[")
	if !found || podLevel == nil {
		return ""
	}
	if _, limited := podLevel.Limits[corev1.ResourceName(strings.TrimSuffix(name, "]"))]; !limited {
		return ""
	}
	return "; if the pod sets only spec.resources.limits for it, Kubernetes 1.34 to 1.36 filled the request in from the app containers before injection " +
		"(1.37 fills it in after, sidecars included): set spec.resources.requests to include the sidecars'"
}

// resourcesSoFar is the pod's resources view: its pod-level resources and OS, and its own
// containers, with the sidecars placed so far when withSidecars; of each container only what
// the pod's totals read (name, resources, restart policy), shared with the pod, not copied.
func (b *builder) resourcesSoFar(withSidecars bool) *corev1.Pod {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Resources: b.ownResources, OS: b.pod.Spec.OS}}
	if withSidecars {
		pod.Spec.Resources = b.podResources
	}
	var inits, containers []corev1.Container
	for i := range b.pod.Spec.InitContainers {
		if c := &b.pod.Spec.InitContainers[i]; !b.strip.initContainers.Has(c.Name) {
			inits = append(inits, resourcesOf(c))
		}
	}
	for _, app := range b.appContainers {
		containers = append(containers, resourcesOf(app))
	}
	if withSidecars {
		inits = slices.Concat(resourcesOfAll(b.initContainers.before), inits, resourcesOfAll(b.initContainers.after))
		containers = slices.Concat(resourcesOfAll(b.containers.before), containers, resourcesOfAll(b.containers.after))
	}
	pod.Spec.InitContainers, pod.Spec.Containers = inits, containers
	return pod
}

// resourcesOf is what a pod's totals read of a container.
func resourcesOf(c *corev1.Container) corev1.Container {
	return corev1.Container{Name: c.Name, Resources: c.Resources, RestartPolicy: c.RestartPolicy}
}

func resourcesOfAll(list []corev1.Container) []corev1.Container {
	out := make([]corev1.Container, len(list))
	for i := range list {
		out[i] = resourcesOf(&list[i])
	}
	return out
}

// resourceField is the field of the set that a pod-level resources error (at podField, such as
// spec.resources.requests[cpu]) comes from: the first injected sidecar that requests (or
// limits) that resource, once defaulted (specific); or the first injected sidecar's resources
// (the first that sets any, else the first: its value then is a LimitRange default).
func resourceField(set *CompiledSet, rec Record, podField string) (field string, specific bool) {
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
	first, anyInjected := "", ""
	for _, l := range []struct {
		field string
		list  []appsv1alpha1.SidecarContainer
		init  bool
	}{{"spec.initContainers", set.Set.Spec.InitContainers, true}, {"spec.containers", set.Set.Spec.Containers, false}} {
		for i := range l.list {
			if !injected.Has(l.list[i].Name) {
				continue
			}
			if f, specific := set.policyField(l.list[i].Name, kind, name); f != "" {
				if specific || first == "" {
					first = fmt.Sprintf("%s[%d].%s", l.field, i, f)
				}
				if specific {
					return first, true
				}
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
			if anyInjected == "" {
				anyInjected = fmt.Sprintf("%s[%d].resources", l.field, i)
				if name != "" {
					anyInjected += fmt.Sprintf(".%s[%s]", kind, name)
				}
			}
		}
	}
	if first == "" {
		// No sidecar sets the resource: a LimitRange default gives it, and the first injected
		// sidecar is where the user can set a value instead.
		return anyInjected, false
	}
	return first, false
}
