// Package images resolves the images of a SidecarSet pinning digests (imagePolicy.pin Digest):
// Resolver reads the digest a tag names from its registry, and Next says what the set's
// status.images becomes from what the registry answered. Next is pure.
package images

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// Resolver reads digests from registries.
type Resolver struct {
	// Insecure are the registries (host[:port]) reached over plain HTTP; every other is
	// reached over HTTPS (go-containerregistry falls back to HTTP for loopback ones, such as
	// localhost and 127.0.0.1).
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
	desc, err := remote.Head(ref, remote.WithContext(ctx), remote.WithAuthFromKeychain(keychain))
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
// names now. An image whose resolution failed keeps its digest and says why in Error. Images
// no longer wanted are dropped. refreshed reports whether every wanted image resolved, so a
// refresh asked for is done.
func Next(wanted []string, results []Result, previous []appsv1alpha1.ResolvedImage, refresh bool, now metav1.Time) (
	next []appsv1alpha1.ResolvedImage, refreshed bool) {
	refreshed = true
	for i, image := range wanted {
		cur := appsv1alpha1.ResolvedImage{Image: image}
		if j := slices.IndexFunc(previous, func(p appsv1alpha1.ResolvedImage) bool { return p.Image == image }); j >= 0 {
			cur = *previous[j].DeepCopy()
		}
		res := results[i]
		switch {
		case res.Err != nil:
			cur.Error = res.Err.Error()
			refreshed = false
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
