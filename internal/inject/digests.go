package inject

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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

// SamePins reports whether two status.images lists pin the same images to the same digests,
// verified alike (when resolved and what a tag names now aside): whether a set's pinned
// content, or whether it may be injected, changed.
func SamePins(a, b []appsv1alpha1.ResolvedImage) bool {
	return slices.EqualFunc(a, b, func(x, y appsv1alpha1.ResolvedImage) bool {
		return x.Image == y.Image && x.Digest == y.Digest && verifiedAs(x) == verifiedAs(y)
	})
}

// PinnedImage is image, as written, pinned to digest: repository:tag@digest keeps the tag
// for people; the runtime pulls by the digest.
func PinnedImage(image, digest string) string {
	if DigestOf(image) != "" {
		return image // named by digest in the spec already
	}
	return image + "@" + digest
}

// ImagesNotResolvedError says which images of a set pinning digests have no digest in its
// status yet, and why when the operator said; and, for a set verifying signatures, which
// pinned digests have not verified.
type ImagesNotResolvedError struct {
	Set    string
	Images []string
	// Reasons are status.images[].error of Images, where set; same length as Images.
	Reasons []string
	// Unverified are the pinned images (repository:tag@digest) whose signatures have not
	// verified (imagePolicy.verify), and UnverifiedReasons why (status.images[].verificationError),
	// where said; same length.
	Unverified        []string
	UnverifiedReasons []string
}

// Failed reports whether a signature failed to verify, rather than a verification or a
// resolution not done yet.
func (e *ImagesNotResolvedError) Failed() bool {
	return slices.ContainsFunc(e.UnverifiedReasons, func(r string) bool { return r != "" })
}

func (e *ImagesNotResolvedError) Error() string {
	var msgs []string
	if len(e.Images) > 0 {
		msgs = append(msgs, fmt.Sprintf("SidecarSet %q pins its images to digests (spec.imagePolicy.pin: Digest) and %s not resolved yet: %s",
			e.Set, map[bool]string{true: "this one is", false: "these are"}[len(e.Images) == 1], withReasons(e.Images, e.Reasons)))
	}
	if len(e.Unverified) > 0 {
		msgs = append(msgs, fmt.Sprintf("SidecarSet %q injects only images whose signatures verified (spec.imagePolicy.verify) and %s not: %s",
			e.Set, map[bool]string{true: "this one has", false: "these have"}[len(e.Unverified) == 1], withReasons(e.Unverified, e.UnverifiedReasons)))
	}
	return strings.Join(msgs, "; ")
}

func withReasons(items, reasons []string) string {
	parts := make([]string, len(items))
	for i, item := range items {
		parts[i] = item
		if reasons[i] != "" {
			parts[i] += " (" + reasons[i] + ")"
		}
	}
	return strings.Join(parts, ", ")
}

// pinDigests returns set with each image its spec names without a digest pinned to the digest
// status.images gives it, set itself when it pins none, or an *ImagesNotResolvedError naming
// the images status gives no digest, or, for a set verifying signatures, no digest verified
// under its current spec.imagePolicy.verify. set is not modified.
func pinDigests(set *appsv1alpha1.SidecarSet) (*appsv1alpha1.SidecarSet, error) {
	if !PinsDigests(set) {
		return set, nil
	}
	wanted := ImagesToPin(set)
	if len(wanted) == 0 {
		return set, nil
	}
	policy := VerifyPolicy(set.Spec.ImagePolicy.Verify)
	digests := map[string]string{}
	reasons := map[string]string{}
	missing := &ImagesNotResolvedError{Set: set.Name}
	for _, r := range set.Status.Images {
		reasons[r.Image] = r.Error
		if r.Digest == "" || !slices.Contains(wanted, r.Image) {
			continue
		}
		if d := DigestOf(r.Image); d != "" {
			if d != r.Digest {
				reasons[r.Image] = fmt.Sprintf("status.images gives it digest %q, not the one it names", r.Digest)
				continue
			}
		} else if _, err := reference.ParseAnyReference(PinnedImage(r.Image, r.Digest)); err != nil {
			reasons[r.Image] = fmt.Sprintf("status.images gives it digest %q, which is not one: %v", r.Digest, err)
			continue
		}
		if verifies(set) && (r.Verified == nil || r.Verified.Digest != r.Digest || r.Verified.Policy != policy) {
			missing.Unverified = append(missing.Unverified, PinnedImage(r.Image, r.Digest))
			missing.UnverifiedReasons = append(missing.UnverifiedReasons, r.VerificationError)
			digests[r.Image] = "-"
			continue
		}
		digests[r.Image] = r.Digest
	}
	for _, image := range wanted {
		if digests[image] == "" {
			missing.Images = append(missing.Images, image)
			missing.Reasons = append(missing.Reasons, reasons[image])
		}
	}
	if len(missing.Images) > 0 || len(missing.Unverified) > 0 {
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

// VerifyPolicy is a hash of a set's spec.imagePolicy.verify, recorded with each verified
// signature (status.images[].verified.policy): a digest verified under other signers is not
// verified under these. Empty when verify is nil.
func VerifyPolicy(spec *appsv1alpha1.ImageVerification) string {
	if spec == nil {
		return ""
	}
	data, _ := json.Marshal(spec)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// verifies reports whether set requires its images' signatures verified (imagePolicy.verify).
func verifies(set *appsv1alpha1.SidecarSet) bool {
	return set.Spec.ImagePolicy != nil && set.Spec.ImagePolicy.Verify != nil
}

// ImagesToVerify are the images of a set verifying signatures (imagePolicy.verify): every image
// its containers and init containers name, by tag or by digest, each once, in the order they
// first appear. An image named by digest is pinned already, and verified all the same.
func ImagesToVerify(spec *appsv1alpha1.SidecarSetSpec) []string {
	var out []string
	for _, list := range [][]appsv1alpha1.SidecarContainer{spec.Containers, spec.InitContainers} {
		for i := range list {
			if !slices.Contains(out, list[i].Image) {
				out = append(out, list[i].Image)
			}
		}
	}
	return out
}

// ImagesToPin are the images whose digests a set's status.images records: ImagesToVerify for a
// set verifying signatures, else ImagesToResolve.
func ImagesToPin(set *appsv1alpha1.SidecarSet) []string {
	if verifies(set) {
		return ImagesToVerify(&set.Spec)
	}
	return ImagesToResolve(&set.Spec)
}

// DigestOf is the digest image names (repository@sha256:...), empty when it names none.
func DigestOf(image string) string {
	ref, err := reference.ParseAnyReference(image)
	if err != nil {
		return ""
	}
	if d, ok := ref.(reference.Digested); ok {
		return d.Digest().String()
	}
	return ""
}

// verifiedAs is which digest an image's signature verified, under which policy: whether a
// digest may be injected changes with it.
func verifiedAs(r appsv1alpha1.ResolvedImage) string {
	if r.Verified == nil {
		return ""
	}
	return r.Verified.Digest + " " + r.Verified.Policy
}
