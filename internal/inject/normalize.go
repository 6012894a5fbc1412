package inject

import (
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/sidecarset/sidecarset-operator/internal/podrules"
)

// The API server defaults a Pod's fields before admission, and its admission plugins and other
// webhooks add to every container (the service account token mount, LimitRange defaults,
// imagePullPolicy Always), while a SidecarSet's containers and volumes are stored as written.
// These helpers compare the two as the API server stores them, with Kubernetes' own defaulting
// (internal/podrules). They copy and never change their arguments.
//
// The engine's contract: what a SidecarSet declares in a container is ours, everything else in
// that container belongs to whoever added it. A Pod's container carries a sidecar when it holds
// every field the rendered sidecar sets, with the same value (maps and lists may hold more
// entries); the one field an admission plugin overrides outright, imagePullPolicy, is the
// Pod's when it is Always (AlwaysPullImages).

// podHasContainer reports whether the Pod's container carries the rendered sidecar, both
// defaulted as the API server would store them in that list of a Pod on the host network or not.
func podHasContainer(pod, sidecar *corev1.Container, init, hostNetwork bool) bool {
	have, want := defaultedPair(pod, sidecar, init, hostNetwork)
	return contains(have, want)
}

// missingFields are the fields of the rendered sidecar that the Pod's container does not
// carry (see podHasContainer), by their JSON names, sorted.
func missingFields(pod, sidecar *corev1.Container, init, hostNetwork bool) []string {
	have, want := defaultedPair(pod, sidecar, init, hostNetwork)
	h, _ := have.(map[string]any)
	var out []string
	for k, w := range want.(map[string]any) {
		if !contains(h[k], w) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// defaultedPair is the Pod's container and the rendered sidecar as the API server would store
// them, as generic JSON; the one field an admission plugin overrides outright,
// imagePullPolicy, is the Pod's when it is Always (AlwaysPullImages).
func defaultedPair(pod, sidecar *corev1.Container, init, hostNetwork bool) (have, want any) {
	h := podrules.DefaultedContainer(pod, init, hostNetwork)
	w := podrules.DefaultedContainer(sidecar, init, hostNetwork)
	if h.ImagePullPolicy == corev1.PullAlways {
		w.ImagePullPolicy = corev1.PullAlways
	}
	return toJSONValue(h), toJSONValue(w)
}

// sameVolume reports whether two volumes are equal once both are defaulted. Volumes are
// compared whole: no admission plugin adds to a volume, and a volume source is all or nothing.
func sameVolume(a, b *corev1.Volume) bool {
	return equality.Semantic.DeepEqual(podrules.DefaultedVolume(a), podrules.DefaultedVolume(b))
}

// sameEnvVar reports whether two env var definitions are equal once both are defaulted: the
// Pod's come as the API server stores them (a fieldRef with apiVersion v1), a SidecarSet's and
// an offline manifest's as written, and both forms must compare alike, or the same Pod would be
// injected differently by the webhook and the kubectl plugin.
func sameEnvVar(a, b *corev1.EnvVar) bool {
	if equality.Semantic.DeepEqual(a, b) {
		return true // the common case, without defaulting
	}
	return equality.Semantic.DeepEqual(podrules.DefaultedEnvVar(a), podrules.DefaultedEnvVar(b))
}

// toJSONValue is v as generic JSON (maps, slices, strings, float64, bools): the form in which
// "holds every field, with the same value" can be decided without knowing the type.
func toJSONValue(v any) any {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encoding %T: %v", v, err)) // plain API structs: cannot fail
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		panic(fmt.Sprintf("decoding %T: %v", v, err))
	}
	return out
}

// contains reports whether have holds everything want holds: every key of a map with a
// contained value, every element of a list contained by a distinct element of have's list
// (in any order), and equal scalars.
func contains(have, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			hv, ok := h[k]
			if !ok || !contains(hv, wv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok {
			return false
		}
		used := make([]bool, len(h))
		for _, wv := range w {
			found := false
			for i, hv := range h {
				if !used[i] && contains(hv, wv) {
					used[i], found = true, true
					break
				}
			}
			if !found {
				return false
			}
		}
		return true
	default:
		return have == want
	}
}
