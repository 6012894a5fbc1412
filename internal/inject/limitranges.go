package inject

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/podrules"
)

// checkLimitRanges refuses a set whose sidecars break a bound of a LimitRange in the pod's
// namespace (min, max, maxLimitRequestRatio, per container or per pod): the API server's
// LimitRanger would refuse the pod with a message that names neither the sidecar nor the set.
// Only the requests and limits a sidecar carries are checked, as the API server stores them
// (requests default to limits); one it leaves unset gets the LimitRange's default, which is the
// namespace's own choice. The pod's own containers are left to the API server, whose message is
// then about them: a per-pod bound is judged only when the pod keeps it without the sidecars.
func (b *builder) checkLimitRanges(set *CompiledSet, rec Record) error {
	if len(b.limitRanges) == 0 || len(rec.Containers)+len(rec.InitContainers) == 0 {
		return nil
	}
	for _, l := range []struct {
		field    string
		declared []appsv1alpha1.SidecarContainer
		names    []string
		placed   placement
		init     bool
	}{
		{"spec.initContainers", set.Set.Spec.InitContainers, rec.InitContainers, b.initContainers, true},
		{"spec.containers", set.Set.Spec.Containers, rec.Containers, b.containers, false},
	} {
		for i := range l.declared {
			name := l.declared[i].Name
			if !slices.Contains(l.names, name) {
				continue
			}
			c := l.placed.named(name)
			if c == nil {
				continue
			}
			r := podrules.DefaultedContainer(c, l.init, b.pod.Spec.HostNetwork).Resources
			for _, lr := range b.limitRanges {
				for _, item := range lr.Spec.Limits {
					if item.Type != corev1.LimitTypeContainer {
						continue
					}
					why, kind, res := bounded(item, r, "container")
					if why == "" {
						continue
					}
					field := fmt.Sprintf("%s[%d].resources.%s[%s]", l.field, i, kind, res)
					if f, _ := set.policyField(name, kind, string(res)); f != "" {
						field = fmt.Sprintf("%s[%d].%s", l.field, i, f)
					}
					return &RefusedError{SidecarSet: set.Name(), Field: field, Detail: fmt.Sprintf(
						"sidecar %q breaks LimitRange %s of namespace %s (%s): the API server would refuse the pod; change the sidecar's %s %s, or the LimitRange",
						name, lr.Name, lr.Namespace, why, res, kind)}
				}
			}
		}
	}
	return b.checkPodLimitRanges(set, rec)
}

// checkPodLimitRanges judges the per-pod bounds of the namespace's LimitRanges, with the pod's
// requests and limits totalled as LimitRanger totals them (component-helpers' PodRequests and
// PodLimits: containers and native sidecars added up, init containers' peak, pod-level resources
// when set). Values the pod's own containers leave to a LimitRange default are missing from
// both totals, so the check can only miss a breach, never invent one.
func (b *builder) checkPodLimitRanges(set *CompiledSet, rec Record) error {
	var own, with *corev1.ResourceRequirements
	for _, lr := range b.limitRanges {
		for _, item := range lr.Spec.Limits {
			if item.Type != corev1.LimitTypePod {
				continue
			}
			if with == nil {
				own, with = podTotals(b.resourcesSoFar(false)), podTotals(b.resourcesSoFar(true))
			}
			why, kind, res := bounded(item, *with, "pod")
			if why == "" {
				continue
			}
			if whyOwn, _, _ := bounded(item, *own, "pod"); whyOwn != "" {
				continue // the pod breaks it by itself
			}
			field, _ := resourceField(set, rec, fmt.Sprintf("spec.resources.%s[%s]", kind, res))
			return &RefusedError{SidecarSet: set.Name(), Field: field, Detail: fmt.Sprintf(
				"with this SidecarSet's sidecars the pod breaks LimitRange %s of namespace %s (%s): the API server would refuse the pod; lower the sidecars' %s %s, or change the LimitRange",
				lr.Name, lr.Namespace, why, res, kind)}
		}
	}
	return nil
}

func podTotals(pod *corev1.Pod) *corev1.ResourceRequirements {
	opts := resourcehelper.PodResourcesOptions{ExcludeOverhead: true}
	return &corev1.ResourceRequirements{Requests: resourcehelper.PodRequests(pod, opts), Limits: resourcehelper.PodLimits(pod, opts)}
}

// named is the placed container of that name, or nil.
func (p *placement) named(name string) *corev1.Container {
	for _, list := range [][]corev1.Container{p.before, p.after} {
		if i := slices.IndexFunc(list, func(c corev1.Container) bool { return c.Name == name }); i >= 0 {
			return &list[i]
		}
	}
	return nil
}

// bounded says which bound of item (per container or per pod: of) the requests and limits r
// break, and where (kind "requests" or "limits", and the resource), as the API server's
// LimitRanger judges them; empty when none is, or when r leaves the value unset.
func bounded(item corev1.LimitRangeItem, r corev1.ResourceRequirements, of string) (why, kind string, res corev1.ResourceName) {
	for _, n := range slices.Sorted(maps.Keys(item.Min)) {
		lowest := item.Min[n]
		for _, k := range []string{"requests", "limits"} {
			if q, ok := listOf(r, k)[n]; ok && q.Cmp(lowest) < 0 {
				return fmt.Sprintf("the minimum %s per %s is %s, %s %s are %s", n, of, quantity(lowest), whose(of), k, quantity(q)), k, n
			}
		}
	}
	for _, n := range slices.Sorted(maps.Keys(item.Max)) {
		highest := item.Max[n]
		for _, k := range []string{"limits", "requests"} {
			if q, ok := listOf(r, k)[n]; ok && q.Cmp(highest) > 0 {
				return fmt.Sprintf("the maximum %s per %s is %s, %s %s are %s", n, of, quantity(highest), whose(of), k, quantity(q)), k, n
			}
		}
	}
	for _, n := range slices.Sorted(maps.Keys(item.MaxLimitRequestRatio)) {
		ratio := item.MaxLimitRequestRatio[n]
		request, hasRequest := r.Requests[n]
		limit, hasLimit := r.Limits[n]
		if !hasRequest || !hasLimit || request.IsZero() {
			continue
		}
		if float64(limit.MilliValue())/float64(request.MilliValue()) > float64(ratio.MilliValue())/1000 {
			return fmt.Sprintf("the highest %s limit-to-request ratio per %s is %s, %s is %s to %s", n, of, quantity(ratio), whose(of), quantity(limit), quantity(request)), "limits", n
		}
	}
	return "", "", ""
}

func listOf(r corev1.ResourceRequirements, kind string) corev1.ResourceList {
	if kind == "limits" {
		return r.Limits
	}
	return r.Requests
}

func quantity(q resource.Quantity) string { return q.String() }

// whose names what a per-container or per-pod (of) bound was judged on.
func whose(of string) string {
	if of == "pod" {
		return "the pod's, with the sidecars,"
	}
	return "the sidecar's"
}
