package testutil

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// ManagerImageUser is the user the manager's image runs as: distroless's "nonroot".
const ManagerImageUser = "65532:65532"

// AssertManagerImage checks that an image tarball tagged ref holds what the Dockerfile's image
// holds: one layer with exactly the binary at /manager (executable, not writable by group or
// others), /manager as the entrypoint, and a non-root user.
func AssertManagerImage(t testing.TB, path, ref string, binary []byte) {
	t.Helper()
	tag, err := name.NewTag(ref)
	Must(t, err)
	img, err := tarball.ImageFromPath(path, &tag)
	if err != nil {
		t.Fatalf("reading %s as %s: %v", path, ref, err)
	}
	cfg, err := img.ConfigFile()
	Must(t, err)
	if !slices.Equal(cfg.Config.Entrypoint, []string{"/manager"}) || cfg.Config.User != ManagerImageUser || cfg.OS != "linux" {
		t.Errorf("config: entrypoint %v, user %q, os %q; want [/manager], %s, linux", cfg.Config.Entrypoint, cfg.Config.User, cfg.OS, ManagerImageUser)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d (%v), want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	Must(t, err)
	defer func() { _ = rc.Close() }()
	r := tar.NewReader(rc)
	var files []string
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		Must(t, err)
		files = append(files, h.Name)
		got, err := io.ReadAll(r)
		Must(t, err)
		if h.Name == "manager" && (h.Mode&0o111 == 0 || h.Mode&0o022 != 0 || !bytes.Equal(got, binary)) {
			t.Errorf("/manager: mode %o, %d bytes; want executable, not group/world writable, the binary's %d bytes", h.Mode, len(got), len(binary))
		}
	}
	if !slices.Equal(files, []string{"manager"}) {
		t.Errorf("layer files %v, want [manager]", files)
	}
}
