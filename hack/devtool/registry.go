package main

import (
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// serveRegistry serves an OCI registry on 127.0.0.1:port until the process is stopped: the local
// cluster's real node pulls every image from it (AlwaysPullImages makes every pod pull). Blobs
// are kept in dir, manifests in memory.
func serveRegistry(port int, dir string) error {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(os.Stderr, "", log.LstdFlags)),
		registry.WithBlobHandler(registry.NewDiskBlobHandler(dir))),
		ReadHeaderTimeout: 10 * time.Second}
	log.Printf("registry serving on %s", ln.Addr())
	return srv.Serve(ln)
}

// pushImage pushes to ref (a loopback registry's host:port/name:tag) either an image tarball
// (`make image`'s, when source ends in .tar) or an image made of one static binary, run as its
// entrypoint with the given arguments and environment (an item holding "=" is a variable).
func pushImage(ref, source string, extra []string) error {
	tag, err := name.NewTag(ref, name.Insecure)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	var img v1.Image
	if strings.HasSuffix(source, ".tar") {
		if img, err = tarball.ImageFromPath(source, nil); err != nil {
			return fmt.Errorf("read image tarball %s: %w", source, err)
		}
	} else if img, err = binaryImage(source, extra); err != nil {
		return err
	}
	return remote.Write(tag, img)
}

// binaryImage is an image holding only the static binary at /NAME, its entrypoint, with the
// given arguments and environment, and an empty /tmp; times are fixed, so equal binaries give
// equal images.
func binaryImage(binary string, extra []string) (v1.Image, error) {
	content, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	base := filepath.Base(binary)
	layer, err := binaryLayer(base, content, "tmp")
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Config.Entrypoint = []string{"/" + base}
	cfg.Config.WorkingDir = "/"
	for _, e := range extra {
		if strings.Contains(e, "=") {
			cfg.Config.Env = append(cfg.Config.Env, e)
		} else {
			cfg.Config.Cmd = append(cfg.Config.Cmd, e)
		}
	}
	return mutate.ConfigFile(img, cfg)
}
