package inject

import (
	"strings"

	"github.com/distribution/reference"
)

// SameImage reports whether a container the kubelet reports running image (its status.image)
// with imageID (status.imageID) runs declared, the image a spec names. Runtimes report image
// references normalized ("nginx" runs as "docker.io/library/nginx:latest"), and for an image
// pinned by digest often the tag they pulled instead: the digest is then found in imageID.
func SameImage(declared, image, imageID string) bool {
	if declared == image {
		return true
	}
	want, err := reference.ParseNormalizedNamed(declared)
	if err != nil {
		return false
	}
	if digested, ok := want.(reference.Digested); ok {
		return strings.HasSuffix(imageID, "@"+digested.Digest().String()) || normalized(image) == reference.TagNameOnly(want).String()
	}
	return normalized(image) == reference.TagNameOnly(want).String()
}

func normalized(image string) string {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return image
	}
	return reference.TagNameOnly(named).String()
}
