// Package images resolves the images of a SidecarSet pinning digests (imagePolicy.pin Digest):
// Resolver reads the digest a tag names from its registry, and Next says what the set's
// status.images becomes from what the registry answered. Next is pure.
package images

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// Resolver reads digests from registries.
type Resolver struct {
	// Insecure are the registries (host[:port]) reached over plain HTTP; every other is
	// reached over HTTPS only, but loopback ones (localhost, 127.0.0.1), which may fall back
	// to HTTP.
	Insecure []string
	// Timeout bounds one resolution; 30s when zero.
	Timeout time.Duration
}

// Digest is the digest image's tag names now (of the image index, for a multi-platform
// image: each node pulls its own platform's image from it), read with a HEAD request
// (a registry's pull limits do not count it) using the credentials keychain has for the
// registry.
func (r *Resolver) Digest(ctx context.Context, image string, keychain authn.Keychain) (string, error) {
	ref, err := name.ParseReference(image)
	if err != nil {
		return "", fmt.Errorf("%q is not an image reference: %w", image, err)
	}
	if slices.Contains(r.Insecure, ref.Context().RegistryStr()) {
		if ref, err = name.ParseReference(image, name.Insecure); err != nil {
			return "", fmt.Errorf("%q is not an image reference: %w", image, err)
		}
	}
	timeout := r.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	desc, err := remote.Head(ref, remote.WithContext(ctx), remote.WithAuthFromKeychain(keychain),
		remote.WithTransport(guarded{next: remote.DefaultTransport, insecure: r.Insecure}))
	if err != nil {
		return "", fmt.Errorf("reading the digest of %s: %w", ref.Name(), err)
	}
	return desc.Digest.String(), nil
}

// Result is what the registry answered for one image: its digest, or why not.
type Result struct {
	Digest string
	Err    error
}

// Next is the set's status.images after resolving wanted (the images its spec names by tag,
// inject.ImagesToResolve) with results (one per wanted image, same order), at now. An image
// keeps the digest it was pinned to; a digest resolved later that differs from it is Latest
// (the tag moved). Only refresh (the set's images refreshed) moves Digest to what the tag
// names now, and only when every image resolved: a refresh is one new revision, never a
// revision per image as their registries answer. An image whose resolution failed keeps its
// digest and says why in Error (at most MaxError bytes). Images no longer wanted are dropped.
// refreshed reports whether every wanted image resolved, so a refresh asked for is done.
func Next(wanted []string, results []Result, previous []appsv1alpha1.ResolvedImage, refresh bool, now metav1.Time) (
	next []appsv1alpha1.ResolvedImage, refreshed bool) {
	refreshed = !slices.ContainsFunc(results, func(r Result) bool { return r.Err != nil })
	refresh = refresh && refreshed
	for i, image := range wanted {
		cur := appsv1alpha1.ResolvedImage{Image: image}
		if j := slices.IndexFunc(previous, func(p appsv1alpha1.ResolvedImage) bool { return p.Image == image }); j >= 0 {
			cur = *previous[j].DeepCopy()
		}
		res := results[i]
		switch {
		case res.Err != nil:
			cur.Error = Cut(res.Err.Error(), MaxError)
		case cur.Digest == "" || refresh:
			cur.Digest, cur.ResolvedAt, cur.Latest, cur.Error = res.Digest, &now, "", ""
		case res.Digest != cur.Digest:
			cur.Latest, cur.Error = res.Digest, ""
		default:
			cur.Latest, cur.Error = "", ""
		}
		next = append(next, cur)
	}
	return next, refreshed
}

// MaxError is the most of a registry's error kept in status.images[].error: registries and the
// proxies before them answer with whole HTML pages.
const MaxError = 512

// Cut cuts s to at most n bytes, on a rune boundary, marking the cut.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// maxBody is the most of a registry's answer read: a HEAD, a ping and a token need little,
// and an error page is cut (MaxError) anyway.
const maxBody = 256 << 10

// guarded is the resolver's transport: it reads at most maxBody bytes of any answer, and
// refuses plain HTTP to a registry not listed in insecure unless it is on loopback
// (go-containerregistry falls back to HTTP by itself for private and .local addresses, which
// would send the pull secret's credentials in the clear).
type guarded struct {
	next     http.RoundTripper
	insecure []string
}

func (g guarded) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" && !slices.Contains(g.insecure, req.URL.Host) && !loopback(req.URL.Hostname()) {
		return nil, fmt.Errorf("refusing plain HTTP to %s: list it in the manager's --insecure-registries to allow it", req.URL.Host)
	}
	resp, err := g.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = limitedBody{Reader: io.LimitReader(resp.Body, maxBody), Closer: resp.Body}
	return resp, nil
}

type limitedBody struct {
	io.Reader
	io.Closer
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
