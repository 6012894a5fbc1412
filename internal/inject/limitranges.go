package inject

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/podrules"
)

// checkLimitRanges refuses a set whose sidecars break a per-container bound of a LimitRange in
// the pod's namespace (min, max, maxLimitRequestRatio): the API server's LimitRanger would
// refuse the pod with a message that names neither the sidecar nor the set. Only the requests
// and limits a sidecar carries are checked, as the API server stores them (requests default to
// limits); one it leaves unset gets the LimitRange's default, which is the namespace's own
// choice. The pod's own containers are left to the API server, whose message is then about
// them.
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
					why, kind, res := containerBreaks(item, r)
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
	return nil
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

// containerBreaks says which per-container bound of item the requests and limits r break, and
// where (kind "requests" or "limits", and the resource), as the API server's LimitRanger
// judges them; empty when none is, or when r leaves the value unset.
func containerBreaks(item corev1.LimitRangeItem, r corev1.ResourceRequirements) (why, kind string, res corev1.ResourceName) {
	for _, n := range slices.Sorted(maps.Keys(item.Min)) {
		lowest := item.Min[n]
		for _, k := range []string{"requests", "limits"} {
			if q, ok := listOf(r, k)[n]; ok && q.Cmp(lowest) < 0 {
				return fmt.Sprintf("the minimum %s per container is %s, the sidecar's %s are %s", n, quantity(lowest), k, quantity(q)), k, n
			}
		}
	}
	for _, n := range slices.Sorted(maps.Keys(item.Max)) {
		highest := item.Max[n]
		for _, k := range []string{"limits", "requests"} {
			if q, ok := listOf(r, k)[n]; ok && q.Cmp(highest) > 0 {
				return fmt.Sprintf("the maximum %s per container is %s, the sidecar's %s are %s", n, quantity(highest), k, quantity(q)), k, n
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
			return fmt.Sprintf("the highest %s limit-to-request ratio per container is %s, the sidecar's is %s to %s", n, quantity(ratio), quantity(limit), quantity(request)), "limits", n
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
