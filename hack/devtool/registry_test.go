package main

import (
	"archive/tar"
	"errors"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestPushedTestImages pushes a binary as a test image to a registry and reads it back: the
// binary is the entrypoint, items with "=" are the environment and the others the arguments,
// /tmp exists and is writable by all; pushing the same binary again gives the same digest
// (the images are reproducible), and another environment another digest.
func TestPushedTestImages(t *testing.T) {
	srv := httptest.NewServer(registry.New())
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()
	binary := filepath.Join(dir, "testserver")
	if err := os.WriteFile(binary, []byte("\x7fELF not really a server"), 0o755); err != nil {
		t.Fatal(err)
	}
	digest := func(ref string) string {
		t.Helper()
		r, err := name.NewTag(ref, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		img, err := remote.Image(r)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d.String()
	}
	for _, tag := range []string{"v1", "again"} {
		if err := pushImage(host+"/agent:"+tag, binary, []string{"VERSION=agent-v1", "serve"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := pushImage(host+"/agent:v2", binary, []string{"VERSION=agent-v2", "serve"}); err != nil {
		t.Fatal(err)
	}
	if a, b := digest(host+"/agent:v1"), digest(host+"/agent:again"); a != b {
		t.Errorf("the same binary and config pushed twice: digests %s and %s", a, b)
	}
	if digest(host+"/agent:v1") == digest(host+"/agent:v2") {
		t.Error("another VERSION gave the same image")
	}

	ref, _ := name.NewTag(host+"/agent:v1", name.Insecure)
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Config; strings.Join(got.Entrypoint, " ") != "/testserver" || strings.Join(got.Cmd, " ") != "serve" ||
		strings.Join(got.Env, " ") != "VERSION=agent-v1" {
		t.Errorf("config entrypoint %v cmd %v env %v", got.Entrypoint, got.Cmd, got.Env)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	entries := map[string]int64{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		entries[h.Name] = h.Mode
	}
	if entries["tmp/"] != 0o1777 || entries["testserver"] != 0o755 {
		t.Errorf("layer entries %v, want tmp/ (1777) and testserver (755)", entries)
	}

	if err := pushImage(host+"/agent:x", filepath.Join(dir, "missing"), nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing binary: %v", err)
	}
}
