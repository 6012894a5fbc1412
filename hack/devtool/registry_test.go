package main

import (
	"archive/tar"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
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
		if err := pushImage(host+"/agent:"+tag, binary, []string{"VERSION=agent-v1", "serve"}, authn.Anonymous); err != nil {
			t.Fatal(err)
		}
	}
	if err := pushImage(host+"/agent:v2", binary, []string{"VERSION=agent-v2", "serve"}, authn.Anonymous); err != nil {
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

	if err := pushImage(host+"/agent:x", filepath.Join(dir, "missing"), nil, authn.Anonymous); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing binary: %v", err)
	}
}

// TestRegistryPushNeedsCredentials: with credentials, the registry refuses a push (and every
// other write) without them or with wrong ones, takes one with them (read from the file
// $SIDECARSET_REGISTRY_AUTH names, as `devtool push` does), and serves pulls to anyone.
func TestRegistryPushNeedsCredentials(t *testing.T) {
	srv := httptest.NewServer(writesNeedCredentials(registry.New(), "push", "s3cret"))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()
	binary := filepath.Join(dir, "testserver")
	if err := os.WriteFile(binary, []byte("\x7fELF not really a server"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, auth := range []authn.Authenticator{authn.Anonymous, &authn.Basic{Username: "push", Password: "guess"}, &authn.Basic{Username: "other", Password: "s3cret"}} {
		err := pushImage(host+"/app:v1", binary, nil, auth)
		var terr *transport.Error
		if !errors.As(err, &terr) || terr.StatusCode != http.StatusUnauthorized {
			t.Errorf("a push with %v: %v, want 401 Unauthorized", auth, err)
		}
	}
	req, err := http.NewRequest(http.MethodDelete, srv.URL+"/v2/app/manifests/v1", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("an anonymous DELETE: %s, want 401", resp.Status)
	}

	file := filepath.Join(dir, "registry.auth")
	if err := os.WriteFile(file, []byte("push:s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(registryAuthEnv, file)
	auth, err := pushAuth()
	if err != nil {
		t.Fatal(err)
	}
	if err := pushImage(host+"/app:v1", binary, nil, auth); err != nil {
		t.Fatalf("a push with the credentials: %v", err)
	}
	ref, _ := name.NewTag(host+"/app:v1", name.Insecure)
	if _, err := remote.Image(ref); err != nil {
		t.Errorf("an anonymous pull: %v", err)
	}

	if err := os.WriteFile(file, []byte("no-password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := pushAuth(); err == nil {
		t.Error("a credentials file without user:password was accepted")
	}
}
