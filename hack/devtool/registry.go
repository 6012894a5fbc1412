package main

import (
	"crypto/subtle"
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

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// registryAuthEnv names the file holding the registry's credentials ("user:password") that
// `devtool push` sends; hack/node.sh sets it.
const registryAuthEnv = "SIDECARSET_REGISTRY_AUTH"

// serveRegistry serves an OCI registry on 127.0.0.1:port until the process is stopped: the local
// cluster's real node pulls every image from it (AlwaysPullImages makes every pod pull). Blobs
// are kept in dir, manifests in memory. With an authFile (a file holding "user:password"), every
// request that writes (any method but GET and HEAD: pushes, uploads, deletions) must carry these
// credentials, so no other user of the machine can push or replace an image; pulls stay
// anonymous (containerd pulls without credentials, and the images hold no secret).
func serveRegistry(port int, dir, authFile string) error {
	h := registry.New(registry.Logger(log.New(os.Stderr, "", log.LstdFlags)),
		registry.WithBlobHandler(registry.NewDiskBlobHandler(dir)))
	if authFile != "" {
		user, password, err := readCredentials(authFile)
		if err != nil {
			return err
		}
		h = writesNeedCredentials(h, user, password)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	log.Printf("registry serving on %s (pushes need credentials: %t)", ln.Addr(), authFile != "")
	return srv.Serve(ln)
}

// writesNeedCredentials answers 401 to every request but GET and HEAD that does not carry user
// and password as HTTP basic authentication.
func writesNeedCredentials(next http.Handler, user, password string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			u, p, ok := r.BasicAuth()
			if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(user))&subtle.ConstantTimeCompare([]byte(p), []byte(password)) != 1 {
				w.Header().Set("WWW-Authenticate", `Basic realm="sidecarset-local-registry"`)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = fmt.Fprintln(w, `{"errors":[{"code":"UNAUTHORIZED","message":"pushing to this registry needs its credentials"}]}`)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// readCredentials reads "user:password" (one line) from file.
func readCredentials(file string) (user, password string, err error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", "", err
	}
	user, password, ok := strings.Cut(strings.TrimSpace(string(b)), ":")
	if !ok || user == "" || password == "" {
		return "", "", fmt.Errorf("%s: want one line user:password", file)
	}
	return user, password, nil
}

// pushAuth is what `devtool push` authenticates with: the credentials in the file named by
// $SIDECARSET_REGISTRY_AUTH, else none.
func pushAuth() (authn.Authenticator, error) {
	file := os.Getenv(registryAuthEnv)
	if file == "" {
		return authn.Anonymous, nil
	}
	user, password, err := readCredentials(file)
	if err != nil {
		return nil, fmt.Errorf("$%s: %w", registryAuthEnv, err)
	}
	return &authn.Basic{Username: user, Password: password}, nil
}

// pushImage pushes to ref (a loopback registry's host:port/name:tag) either an image tarball
// (`make image`'s, when source ends in .tar) or an image made of one static binary, run as its
// entrypoint with the given arguments and environment (an item holding "=" is a variable).
func pushImage(ref, source string, extra []string, auth authn.Authenticator) error {
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
	return remote.Write(tag, img, remote.WithAuth(auth))
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
