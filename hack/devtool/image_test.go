package main

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sidecarset/sidecarset-operator/test/testutil"
)

// TestBuildImage reads the written tarball back: one layer holding the binary at /manager
// (executable, same bytes), the entrypoint, a non-root user, and the reference it was tagged.
func TestBuildImage(t *testing.T) {
	dir := t.TempDir()
	binary := filepath.Join(dir, "manager")
	content := []byte("\x7fELF not really a manager")
	if err := os.WriteFile(binary, content, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "image.tar")
	const ref = "registry.example/sidecarset-operator:v9.9.9"
	if err := buildImage(binary, out, ref, "9.9.9"); err != nil {
		t.Fatal(err)
	}
	testutil.AssertManagerImage(t, out, ref, content)

	if err := buildImage(binary, out, "Not A Reference", "1"); err == nil {
		t.Error("an invalid image reference was accepted")
	}
	if err := buildImage(filepath.Join(dir, "missing"), out, ref, "1"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing binary: %v", err)
	}
}
