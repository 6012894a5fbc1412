package inject_test

import (
	"testing"

	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

func TestSameImage(t *testing.T) {
	const digest = "sha256:4c5ae3d8e1b2f0a9c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4"
	tests := []struct {
		declared, image, imageID string
		want                     bool
	}{
		{"agent:1", "agent:1", "", true},
		{"nginx", "docker.io/library/nginx:latest", "", true},
		{"nginx:1.27", "docker.io/library/nginx:1.27", "", true},
		{"registry.example/agent:2", "registry.example/agent:2", "", true},
		{"nginx:1.27", "docker.io/library/nginx:1.26", "", false},
		{"agent:2", "agent:1", "", false},
		{"ghcr.io/x/proxy@" + digest, "ghcr.io/x/proxy:v3", "ghcr.io/x/proxy@" + digest, true},
		{"ghcr.io/x/proxy@" + digest, "ghcr.io/x/proxy:v3", "ghcr.io/x/proxy@sha256:0000000000000000000000000000000000000000000000000000000000000000", false},
		{"Not A Reference", "not-a-reference", "", false},
	}
	for _, tt := range tests {
		if got := inject.SameImage(tt.declared, tt.image, tt.imageID); got != tt.want {
			t.Errorf("SameImage(%q, %q, %q) = %v, want %v", tt.declared, tt.image, tt.imageID, got, tt.want)
		}
	}
}
