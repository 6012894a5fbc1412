package inject

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/podrules"
)

// The namespace's LimitRanges are enforced by the API server's LimitRanger admission plugin,
// which runs again on the pod our patch leaves: it gives every container the LimitRanges'
// default requests and limits where it sets none, then refuses the pod if a container, or
// the pod's totals, breaks a bound (min, max, maxLimitRequestRatio). Its message names
// neither the SidecarSet nor the sidecar. So the engine does what LimitRanger will do, with
// LimitRanger's own functions (podrules), and refuses by name first: a sidecar is judged as
// LimitRanger will see it, defaults and all, not as the set writes it.

// ReadsLimitRanges reports whether injecting the set needs the namespace's LimitRanges: every
// container it injects gets their defaults and is held to their bounds, whether it declares
// resources or not (a sidecar without a request breaks a min or a maxLimitRequestRatio; a
// default limit can take the pod over a per-pod max).
func (c *CompiledSet) ReadsLimitRanges() bool {
	return len(c.Set.Spec.Containers)+len(c.Set.Spec.InitContainers) > 0
}

// LimitRangesReadPod reports whether, with these LimitRanges of its namespace, injection reads
// the pod's own containers' requests and limits (and restart policies) and its pod-level
// resources: a per-pod bound is judged on the pod's totals, its own containers' included.
func LimitRangesReadPod(lrs []corev1.LimitRange) bool {
	return slices.ContainsFunc(lrs, func(lr corev1.LimitRange) bool {
		return slices.ContainsFunc(lr.Spec.Limits, func(item corev1.LimitRangeItem) bool { return item.Type == corev1.LimitTypePod })
	})
}

// limitRange is a LimitRange of the pod's namespace as the API server stores it, with its
// per-container items apart from its per-pod ones: they are judged on different views.
type limitRange struct {
	*corev1.LimitRange
	// containers holds the per-container items alone; nil when there are none.
	containers *corev1.LimitRange
	// podItems holds each per-pod item alone: each is excused separately when the pod breaks
	// it without the sidecars.
	podItems []*corev1.LimitRange
}

// limitRangesOf prepares the namespace's LimitRanges: defaulted as the API server stores them
// (a hand-written one may not be), and split by what their items bound.
func limitRangesOf(in []corev1.LimitRange) ([]corev1.LimitRange, []limitRange) {
	if len(in) == 0 {
		return nil, nil
	}
	defaulted := make([]corev1.LimitRange, len(in))
	bounds := make([]limitRange, len(in))
	for i := range in {
		defaulted[i] = *podrules.DefaultedLimitRange(&in[i])
		lr := limitRange{LimitRange: &defaulted[i]}
		for _, item := range defaulted[i].Spec.Limits {
			switch item.Type {
			case corev1.LimitTypeContainer:
				if lr.containers == nil {
					lr.containers = &corev1.LimitRange{ObjectMeta: defaulted[i].ObjectMeta}
				}
				lr.containers.Spec.Limits = append(lr.containers.Spec.Limits, item)
			case corev1.LimitTypePod:
				lr.podItems = append(lr.podItems, &corev1.LimitRange{ObjectMeta: defaulted[i].ObjectMeta,
					Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{item}}})
			}
		}
		bounds[i] = lr
	}
	return defaulted, bounds
}

// limitedSidecar is an injected sidecar's requests and limits: as the set makes them (API
// server defaults applied, so requests default to limits) and as LimitRanger will leave them.
type limitedSidecar struct {
	field               string // the sidecar in the set: spec.containers[0]
	name                string
	declared, defaulted corev1.ResourceRequirements
}

// checkLimitRanges refuses a set whose sidecars, once LimitRanger has given them the
// namespace's defaults, break a bound of a LimitRange (per container, or on the pod's totals),
// or are no longer valid (a default limit below the request the sidecar sets). The refusal
// names the set, the sidecar's field and the LimitRange; the pod's own containers are left to
// the API server, whose message is then about them.
func (b *builder) checkLimitRanges(set *CompiledSet, rec Record) error {
	if len(b.limitRanges) == 0 || len(rec.Containers)+len(rec.InitContainers) == 0 {
		return nil
	}
	sidecars, err := b.limitedSidecars(set, rec)
	if err != nil {
		return err
	}
	for _, s := range sidecars {
		if err := b.checkContainerBounds(set, s); err != nil {
			return err
		}
		if err := b.checkDefaultedResources(set, s); err != nil {
			return err
		}
	}
	return b.checkPodLimitRanges(set, rec, sidecars)
}

// limitedSidecars are the set's injected sidecars (init containers first, as the set lists
// them), their resources declared and defaulted.
func (b *builder) limitedSidecars(set *CompiledSet, rec Record) ([]limitedSidecar, error) {
	var out []limitedSidecar
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
			s, err := b.limitedSidecar(fmt.Sprintf("%s[%d]", l.field, i), c, l.init)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// limitedSidecar is the placed sidecar c's resources, declared and defaulted.
func (b *builder) limitedSidecar(field string, c *corev1.Container, init bool) (limitedSidecar, error) {
	declared := podrules.DefaultedContainer(c, init, b.pod.Spec.HostNetwork).Resources
	view, err := podrules.LimitRangeDefaulted(&corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: c.Name, Resources: declared}}}}, b.limitRanges)
	if err != nil {
		return limitedSidecar{}, err
	}
	return limitedSidecar{field: field, name: c.Name, declared: declared, defaulted: view.Spec.Containers[0].Resources}, nil
}

// checkContainerBounds judges one sidecar, defaulted, against the per-container bounds of
// every LimitRange.
func (b *builder) checkContainerBounds(set *CompiledSet, s limitedSidecar) error {
	view := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: s.name, Resources: s.defaulted}}}}
	for _, lr := range b.bounds {
		if lr.containers == nil || podrules.LimitRangeError(lr.containers, view) == nil {
			continue // the common case: one call, and no error built
		}
		br, ok := breachOf(lr.containers, view)
		if !ok {
			continue
		}
		field := fmt.Sprintf("%s.resources.%s[%s]", s.field, br.kind, br.resource)
		if f, _ := set.policyField(s.name, br.kind, string(br.resource)); f != "" {
			field = fmt.Sprintf("%s.%s", s.field, f)
		}
		from := b.defaultedBy(s, br.kind, br.resource)
		return &RefusedError{Reason: ReasonLimitRange, SidecarSet: set.Name(), Field: field, Detail: fmt.Sprintf(
			"sidecar %q breaks LimitRange %s of namespace %s (%s): the API server would refuse the pod; %s",
			s.name, lr.Name, lr.Namespace, br.why(s.defaulted, "container", from), br.fix("the sidecar's", listOf(s.declared, br.kind), from))}
	}
	return nil
}

// checkDefaultedResources refuses a sidecar that LimitRanger's defaults make invalid: a
// request the sidecar sets above the default limit it gets (or its limit below the default
// request), which the API server's validation of the pod then refuses. The resource at fault
// is found by validating each defaulted resource alone: the API server's error names the
// list (resources.requests), not always the resource.
func (b *builder) checkDefaultedResources(set *CompiledSet, s limitedSidecar) error {
	if len(s.declared.Requests) == len(s.defaulted.Requests) && len(s.declared.Limits) == len(s.defaulted.Limits) {
		return nil // nothing defaulted: the set's own validation holds its resources
	}
	if len(podrules.ContainerResourceErrors(s.defaulted)) == 0 {
		return nil
	}
	for _, n := range slices.Sorted(maps.Keys(defaultedResources(s))) {
		alone := corev1.ResourceRequirements{Requests: only(s.defaulted.Requests, n), Limits: only(s.defaulted.Limits, n)}
		errs := podrules.ContainerResourceErrors(alone)
		if len(errs) == 0 {
			continue
		}
		kind := defaultedResources(s)[n]
		from := b.defaultingLimitRange(s, kind, n)
		if from == nil {
			continue // cannot happen: the value is there, so a LimitRange gave it
		}
		return &RefusedError{Reason: ReasonLimitRange, SidecarSet: set.Name(), Field: fmt.Sprintf("%s.resources.%s[%s]", s.field, kind, n), Detail: fmt.Sprintf(
			"sidecar %q is invalid with the %s %s that LimitRange %s of namespace %s gives it by default (%s): the API server would refuse the pod; set the sidecar's %s %s, or change the LimitRange",
			s.name, n, kind, from.Name, from.Namespace, errs[0].Error(), n, kind)}
	}
	return nil
}

// defaultedResources are the resources a LimitRange default gives the sidecar a value of, and
// which list it gives (limits when it gives both).
func defaultedResources(s limitedSidecar) map[corev1.ResourceName]string {
	out := map[corev1.ResourceName]string{}
	for _, kind := range []string{"requests", "limits"} {
		for n := range listOf(s.defaulted, kind) {
			if _, own := listOf(s.declared, kind)[n]; !own {
				out[n] = kind
			}
		}
	}
	return out
}

// only is list's value of n alone; nil when list has none.
func only(list corev1.ResourceList, n corev1.ResourceName) corev1.ResourceList {
	q, ok := list[n]
	if !ok {
		return nil
	}
	return corev1.ResourceList{n: q}
}

// checkPodLimitRanges judges the per-pod bounds of the namespace's LimitRanges on the pod's
// totals with the sidecars, every container defaulted as LimitRanger defaults it, totalled
// as LimitRanger totals them (containers and native sidecars added up, init containers'
// peak, pod-level resources when set). A bound the pod breaks without the sidecars is the
// pod's own: it is left to the API server.
func (b *builder) checkPodLimitRanges(set *CompiledSet, rec Record, sidecars []limitedSidecar) error {
	var with *corev1.Pod
	for _, lr := range b.bounds {
		for _, item := range lr.podItems {
			if with == nil {
				var err error
				if with, err = b.resourcesView(true); err != nil {
					return err
				}
			}
			if podrules.LimitRangeError(item, with) == nil {
				continue
			}
			own, err := b.ownResourcesView()
			if err != nil {
				return err
			}
			if podrules.LimitRangeError(item, own) != nil {
				continue // the pod breaks it by itself
			}
			br, ok := breachOf(item, with)
			if !ok {
				continue
			}
			field, specific := resourceField(set, rec, fmt.Sprintf("spec.resources.%s[%s]", br.kind, br.resource))
			if !specific {
				// No sidecar sets the value: name the first that a LimitRange default gives it.
				if i := slices.IndexFunc(sidecars, func(s limitedSidecar) bool { _, ok := listOf(s.defaulted, br.kind)[br.resource]; return ok }); i >= 0 {
					field = fmt.Sprintf("%s.resources.%s[%s]", sidecars[i].field, br.kind, br.resource)
				}
			}
			totals := podTotals(with)
			return &RefusedError{Reason: ReasonLimitRange, SidecarSet: set.Name(), Field: field, Detail: fmt.Sprintf(
				"with this SidecarSet's sidecars, given the namespace's LimitRange defaults, the pod breaks LimitRange %s of namespace %s (%s): the API server would refuse the pod; lower the sidecars' %s %s (set them where a LimitRange default gives them), or change the LimitRange",
				lr.Name, lr.Namespace, br.why(*totals, "pod", ""), br.resource, br.kind)}
		}
	}
	return nil
}

// resourcesView is resourcesSoFar with LimitRanger's defaults given to every container, as the
// API server will have given them when it judges the pod.
func (b *builder) resourcesView(withSidecars bool) (*corev1.Pod, error) {
	pod := b.resourcesSoFar(withSidecars)
	if len(b.limitRanges) == 0 {
		return pod, nil
	}
	return podrules.LimitRangeDefaulted(pod, b.limitRanges)
}

// ownResourcesView is resourcesView without the sidecars, computed once per pod.
func (b *builder) ownResourcesView() (*corev1.Pod, error) {
	if b.ownView == nil {
		view, err := b.resourcesView(false)
		if err != nil {
			return nil, err
		}
		b.ownView = view
	}
	return b.ownView, nil
}

// defaultedBy names the LimitRange whose default gave the sidecar its kind (requests or
// limits) of resource n; empty when the sidecar sets it itself. The defaults are applied one
// LimitRange more at a time, as LimitRanger applies them, until the value appears: only a
// refusal asks.
func (b *builder) defaultedBy(s limitedSidecar, kind string, n corev1.ResourceName) string {
	if lr := b.defaultingLimitRange(s, kind, n); lr != nil {
		return lr.Name
	}
	return ""
}

func (b *builder) defaultingLimitRange(s limitedSidecar, kind string, n corev1.ResourceName) *corev1.LimitRange {
	if _, own := listOf(s.declared, kind)[n]; own {
		return nil
	}
	view := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: s.name, Resources: s.declared}}}}
	for i := range b.limitRanges {
		got, err := podrules.LimitRangeDefaulted(view, b.limitRanges[:i+1])
		if err != nil {
			return nil
		}
		if _, given := listOf(got.Spec.Containers[0].Resources, kind)[n]; given {
			return &b.limitRanges[i]
		}
	}
	return nil
}

// limitBreach is the first bound of a LimitRange that a view breaks, as LimitRanger judges it,
// and which of the view's lists (kind: requests or limits) is to change to keep it.
type limitBreach struct {
	bound    string // min, max or maxLimitRequestRatio
	resource corev1.ResourceName
	enforced resource.Quantity
	kind     string
}

// breachOf finds the first bound of lr that view breaks: each bound of each item alone, in a
// stable order (min, max, then maxLimitRequestRatio; resources by name), is handed to
// LimitRanger's validation. Which list is at fault is asked of LimitRanger too, with the
// other list taken out of the view.
func breachOf(lr *corev1.LimitRange, view *corev1.Pod) (limitBreach, bool) {
	for _, item := range lr.Spec.Limits {
		for _, bound := range []struct {
			name string
			list corev1.ResourceList
		}{{"min", item.Min}, {"max", item.Max}, {"maxLimitRequestRatio", item.MaxLimitRequestRatio}} {
			for _, n := range slices.Sorted(maps.Keys(bound.list)) {
				one := oneBound(lr, item.Type, bound.name, n, bound.list[n])
				if podrules.LimitRangeError(one, view) == nil {
					continue
				}
				br := limitBreach{bound: bound.name, resource: n, enforced: bound.list[n]}
				switch bound.name {
				case "min": // still broken without the limits: the requests are too low, or missing
					br.kind = either(podrules.LimitRangeError(one, changed(view, dropLimits)) != nil, "requests", "limits")
				case "max": // still broken without the requests: the limits are too high, or missing
					br.kind = either(podrules.LimitRangeError(one, changed(view, dropRequests)) != nil, "limits", "requests")
				default: // still broken with limits equal to requests: a request is missing, or 0
					br.kind = either(podrules.LimitRangeError(one, changed(view, limitsAsRequests(n))) != nil, "requests", "limits")
				}
				return br, true
			}
		}
	}
	return limitBreach{}, false
}

// oneBound is a LimitRange with a single bound of lr: one resource's min, max or ratio.
func oneBound(lr *corev1.LimitRange, t corev1.LimitType, bound string, n corev1.ResourceName, q resource.Quantity) *corev1.LimitRange {
	item := corev1.LimitRangeItem{Type: t}
	list := corev1.ResourceList{n: q}
	switch bound {
	case "min":
		item.Min = list
	case "max":
		item.Max = list
	default:
		item.MaxLimitRequestRatio = list
	}
	return &corev1.LimitRange{ObjectMeta: lr.ObjectMeta, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{item}}}
}

// changed is a copy of view with change made to every container's resources and the pod's.
func changed(view *corev1.Pod, change func(*corev1.ResourceRequirements)) *corev1.Pod {
	out := view.DeepCopy()
	for _, list := range [][]corev1.Container{out.Spec.Containers, out.Spec.InitContainers} {
		for i := range list {
			change(&list[i].Resources)
		}
	}
	if out.Spec.Resources != nil {
		change(out.Spec.Resources)
	}
	return out
}

func dropLimits(r *corev1.ResourceRequirements)   { r.Limits = nil }
func dropRequests(r *corev1.ResourceRequirements) { r.Requests = nil }

func limitsAsRequests(n corev1.ResourceName) func(*corev1.ResourceRequirements) {
	return func(r *corev1.ResourceRequirements) {
		if r.Limits == nil {
			r.Limits = corev1.ResourceList{}
		}
		if q, ok := r.Requests[n]; ok {
			r.Limits[n] = q
		} else {
			delete(r.Limits, n)
		}
	}
}

// either is a when first holds, else b.
func either(first bool, a, b string) string {
	if first {
		return a
	}
	return b
}

// why says which bound is broken and by what, for the requests and limits r that were judged
// (a sidecar's, or the pod's totals: of); from names the LimitRange whose default gave the
// value at fault, if one did.
func (br limitBreach) why(r corev1.ResourceRequirements, of, from string) string {
	subject, whose := "the sidecar", "the sidecar's"
	if of == "pod" {
		subject, whose = "the pod, with the sidecars,", "the pod's, with the sidecars,"
	}
	n := br.resource
	observed := func(kind string) string {
		q, ok := listOf(r, kind)[n]
		switch {
		case !ok:
			return fmt.Sprintf("%s has no %s %s", subject, n, kind)
		case from != "" && kind == br.kind:
			return fmt.Sprintf("%s %s are %s, the default of LimitRange %s", whose, kind, quantity(q), from)
		default:
			return fmt.Sprintf("%s %s are %s", whose, kind, quantity(q))
		}
	}
	switch br.bound {
	case "min":
		return fmt.Sprintf("the minimum %s per %s is %s, %s", n, of, quantity(br.enforced), observed(br.kind))
	case "max":
		return fmt.Sprintf("the maximum %s per %s is %s, %s", n, of, quantity(br.enforced), observed(br.kind))
	}
	ratio := fmt.Sprintf("the highest %s limit-to-request ratio per %s is %s, ", n, of, quantity(br.enforced))
	request, hasRequest := r.Requests[n]
	limit, hasLimit := r.Limits[n]
	switch {
	case !hasRequest || request.IsZero():
		return ratio + observed("requests")
	case !hasLimit || limit.IsZero():
		return ratio + observed("limits")
	}
	ratio += fmt.Sprintf("%s is %s to %s", whose, quantity(limit), quantity(request))
	if from != "" {
		ratio += fmt.Sprintf(" (its %s is the default of LimitRange %s)", strings.TrimSuffix(br.kind, "s"), from)
	}
	return ratio
}

// fix says what to change: the sidecar's own value (declared, when it sets one), or a value
// it should set instead of the default it gets.
func (br limitBreach) fix(whose string, declared corev1.ResourceList, from string) string {
	if _, own := declared[br.resource]; own && from == "" {
		return fmt.Sprintf("change %s %s %s, or the LimitRange", whose, br.resource, br.kind)
	}
	return fmt.Sprintf("set %s %s %s, or change the LimitRange", whose, br.resource, br.kind)
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

func listOf(r corev1.ResourceRequirements, kind string) corev1.ResourceList {
	if kind == "limits" {
		return r.Limits
	}
	return r.Requests
}

func quantity(q resource.Quantity) string { return q.String() }
