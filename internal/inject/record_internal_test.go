package inject

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestEncodedHashReadsWhatEncodeWrites: the annotation as the operator writes it is read by
// the fast path (status reads it for every matched pod), not left to the JSON decoder.
func TestEncodedHashReadsWhatEncodeWrites(t *testing.T) {
	tests := []struct {
		name    string
		records Records
		set     string
		want    string
		found   bool
	}{
		{name: "no records", records: Records{}, set: "log-agent"},
		{name: "hash only", records: Records{"log-agent": {Hash: "80537cf62621b3ac"}}, set: "log-agent", want: "80537cf62621b3ac", found: true},
		{name: "every field, the last set", records: Records{
			"log-agent": {Hash: "1", Containers: []string{"log-agent"}},
			"mesh-proxy": {Hash: "2", Containers: []string{"a", "b"}, InitContainers: []string{"mesh-proxy"}, Volumes: []string{"certs"},
				ImagePullSecrets: []string{"ghcr"}, NotShared: []string{`data (/data): "Bidirectional" <mount> & more`}},
		}, set: "mesh-proxy", want: "2", found: true},
		{name: "another set", records: Records{"log-agent": {Hash: "1"}, "mesh-proxy": {Hash: "2"}}, set: "proxy"},
		{name: "patched annotations and overrides", records: Records{
			"log-agent":  {Hash: "1", Containers: []string{"log-agent"}, Annotations: map[string]string{"a/b": `{"x":"y"}`}, Overrides: map[string]string{"o/cpu": "1"}},
			"mesh-proxy": {Hash: "2", Overrides: map[string]string{"o": "v"}},
		}, set: "log-agent", want: "1", found: true},
		{name: "padded pod-level resources", records: Records{
			"log-agent": {Hash: "1", Containers: []string{"log-agent"}, Padded: &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}},
			"mesh-proxy": {Hash: "2", InitContainers: []string{"mesh-proxy"}, Padded: &corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi"), "hugepages-2Mi": resource.MustParse("2Mi")},
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}},
			"z-agent": {Hash: "3", Padded: &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}},
		}, set: "mesh-proxy", want: "2", found: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := tt.records.Encode()
			hash, found, ok := encodedHash(raw, tt.set)
			if !ok {
				t.Fatalf("encodedHash(%s) left the annotation to the JSON decoder", raw)
			}
			if hash != tt.want || found != tt.found {
				t.Errorf("encodedHash(%s, %q) = %q, %v; want %q, %v", raw, tt.set, hash, found, tt.want, tt.found)
			}
			rec, found, ok := encodedRecord(raw, tt.set, true)
			if !ok || found != tt.found {
				t.Fatalf("encodedRecord(%s, %q) = %+v, %v, %v", raw, tt.set, rec, found, ok)
			}
			want := tt.records[tt.set]
			for _, l := range []struct {
				raw   string
				names []string
			}{{rec.containers, want.Containers}, {rec.initContainers, want.InitContainers}} {
				for _, n := range append(slices.Clone(l.names), "not-listed") {
					if listed(l.raw, n) != slices.Contains(l.names, n) {
						t.Errorf("listed(%s, %q) = %v, want %v", l.raw, n, listed(l.raw, n), slices.Contains(l.names, n))
					}
				}
			}
		})
	}
}
