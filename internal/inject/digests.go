package inject

import (
	"fmt"
	"slices"
	"strings"

	"github.com/distribution/reference"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// PinsDigests reports whether set injects its images pinned to digests (imagePolicy.pin Digest).
func PinsDigests(set *appsv1alpha1.SidecarSet) bool {
	return set.Spec.ImagePolicy != nil && set.Spec.ImagePolicy.Pin == appsv1alpha1.ImagePinDigest
}

// ImagesToResolve are the images spec's containers and init containers name without a digest,
// each once, in the order they first appear: what a set pinning digests needs resolved.
func ImagesToResolve(spec *appsv1alpha1.SidecarSetSpec) []string {
	var out []string
	for _, list := range [][]appsv1alpha1.SidecarContainer{spec.Containers, spec.InitContainers} {
		for i := range list {
			image := list[i].Image
			if !HasDigest(image) && !slices.Contains(out, image) {
				out = append(out, image)
			}
		}
	}
	return out
}

// HasDigest reports whether image names a digest (repository@sha256:..., with or without a
// tag). An image that does not parse has none.
func HasDigest(image string) bool {
	ref, err := reference.ParseAnyReference(image)
	if err != nil {
		return false
	}
	_, ok := ref.(reference.Digested)
	return ok
}

// SamePins reports whether two status.images lists pin the same images to the same digests
// (when resolved and what a tag names now aside): whether a set's pinned content changed.
func SamePins(a, b []appsv1alpha1.ResolvedImage) bool {
	return slices.EqualFunc(a, b, func(x, y appsv1alpha1.ResolvedImage) bool { return x.Image == y.Image && x.Digest == y.Digest })
}

// PinnedImage is image, as written, pinned to digest: repository:tag@digest keeps the tag
// for people; the runtime pulls by the digest.
func PinnedImage(image, digest string) string { return image + "@" + digest }

// ImagesNotResolvedError says which images of a set pinning digests have no digest in its
// status yet, and why when the operator said.
type ImagesNotResolvedError struct {
	Set    string
	Images []string
	// Reasons are status.images[].error of Images, where set; same length as Images.
	Reasons []string
}

func (e *ImagesNotResolvedError) Error() string {
	parts := make([]string, len(e.Images))
	for i, image := range e.Images {
		parts[i] = image
		if e.Reasons[i] != "" {
			parts[i] += " (" + e.Reasons[i] + ")"
		}
	}
	return fmt.Sprintf("SidecarSet %q pins its images to digests (spec.imagePolicy.pin: Digest) and %s not resolved yet: %s",
		e.Set, map[bool]string{true: "this one is", false: "these are"}[len(e.Images) == 1], strings.Join(parts, ", "))
}

// pinDigests returns set with each image its spec names without a digest pinned to the digest
// status.images gives it, set itself when it pins none, or an *ImagesNotResolvedError naming
// the images status gives no digest. set is not modified.
func pinDigests(set *appsv1alpha1.SidecarSet) (*appsv1alpha1.SidecarSet, error) {
	if !PinsDigests(set) {
		return set, nil
	}
	wanted := ImagesToResolve(&set.Spec)
	if len(wanted) == 0 {
		return set, nil
	}
	digests := map[string]string{}
	reasons := map[string]string{}
	for _, r := range set.Status.Images {
		reasons[r.Image] = r.Error
		if r.Digest == "" {
			continue
		}
		if _, err := reference.ParseAnyReference(PinnedImage(r.Image, r.Digest)); err != nil {
			reasons[r.Image] = fmt.Sprintf("status.images gives it digest %q, which is not one: %v", r.Digest, err)
			continue
		}
		digests[r.Image] = r.Digest
	}
	missing := &ImagesNotResolvedError{Set: set.Name}
	for _, image := range wanted {
		if digests[image] == "" {
			missing.Images = append(missing.Images, image)
			missing.Reasons = append(missing.Reasons, reasons[image])
		}
	}
	if len(missing.Images) > 0 {
		return nil, missing
	}
	out := set.DeepCopy()
	for _, list := range [][]appsv1alpha1.SidecarContainer{out.Spec.Containers, out.Spec.InitContainers} {
		for i := range list {
			if d, ok := digests[list[i].Image]; ok && !HasDigest(list[i].Image) {
				list[i].Image = PinnedImage(list[i].Image, d)
			}
		}
	}
	return out, nil
}
