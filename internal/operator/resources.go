package operator

import (
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// sharedResources hands the pod cache one copy of each distinct set of requests and limits.
// The pods of a workload carry the same ones, and their maps would otherwise be half of what
// the cache keeps of a pod (BenchmarkTrimmedPodMemory). Cached objects are never modified
// (readers get deep copies), so sharing them is safe.
var sharedResources = &resourcesInterner{max: 4096}

// resourcesInterner keeps up to max distinct requirements; past that, new ones are kept by
// their pods alone, so its own memory is bounded however many distinct values a vertical
// autoscaler writes over time.
type resourcesInterner struct {
	mu   sync.Mutex
	max  int
	seen map[string]corev1.ResourceRequirements
}

func (s *resourcesInterner) get(r corev1.ResourceRequirements) corev1.ResourceRequirements {
	if len(r.Requests) == 0 && len(r.Limits) == 0 && len(r.Claims) == 0 {
		return corev1.ResourceRequirements{}
	}
	key := resourcesKey(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	if shared, ok := s.seen[key]; ok {
		return shared
	}
	if s.seen == nil {
		s.seen = map[string]corev1.ResourceRequirements{}
	}
	if len(s.seen) < s.max {
		s.seen[key] = r
	}
	return r
}

// resourcesKey is r written out canonically: equal requirements, equal keys.
func resourcesKey(r corev1.ResourceRequirements) string {
	var b strings.Builder
	for _, l := range []corev1.ResourceList{r.Requests, r.Limits} {
		names := make([]string, 0, len(l))
		for n := range l {
			names = append(names, string(n))
		}
		slices.Sort(names)
		for _, n := range names {
			q := l[corev1.ResourceName(n)]
			b.WriteString(n)
			b.WriteByte('=')
			b.WriteString(q.String())
			b.WriteByte(',')
		}
		b.WriteByte('|')
	}
	for _, c := range r.Claims {
		b.WriteString(c.Name)
		b.WriteByte('/')
		b.WriteString(c.Request)
		b.WriteByte(',')
	}
	return b.String()
}
