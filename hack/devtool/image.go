package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// imageUser is distroless's "nonroot": the manager never runs as root.
const imageUser = "65532:65532"

// buildImage writes a container image tarball (`docker load`, `podman load`, `kind load
// image-archive`, `crane push` read it) holding only the static binary at /manager, run as an
// unprivileged user with /manager as the entrypoint: what the Dockerfile builds, without a
// container engine or a base image from a registry.
func buildImage(binary, out, ref, version string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	content, err := os.ReadFile(binary)
	if err != nil {
		return err
	}
	layer, err := binaryLayer("manager", content)
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Config.Entrypoint = []string{"/manager"}
	cfg.Config.User = imageUser
	cfg.Config.WorkingDir = "/"
	cfg.Config.Labels = map[string]string{
		"org.opencontainers.image.title":   "sidecarset-operator",
		"org.opencontainers.image.source":  "https://github.com/sidecarset/sidecarset-operator",
		"org.opencontainers.image.version": version,
	}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	return tarball.WriteToFile(out, tag, img)
}

// binaryLayer is a layer with one executable file at /name, owned by root and not writable by
// the user the image runs as, and the given directories, writable by all (as /tmp is). Times
// are fixed, so equal binaries give equal layers.
func binaryLayer(name string, content []byte, dirs ...string) (v1.Layer, error) {
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	for _, d := range dirs {
		if err := w.WriteHeader(&tar.Header{Name: d + "/", Mode: 0o1777, Typeflag: tar.TypeDir, ModTime: time.Unix(0, 0)}); err != nil {
			return nil, err
		}
	}
	if err := w.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(content)), Typeflag: tar.TypeReg,
		ModTime: time.Unix(0, 0)}); err != nil {
		return nil, err
	}
	if _, err := w.Write(content); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	raw := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil })
}
