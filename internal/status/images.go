package status

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/images"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/revision"
)

// Reasons of the ImagesPinned condition, and Ready's while images wait.
const (
	// ImagesPinned: every image is pinned to the digest status.images gives.
	ImagesPinned = "Pinned"
	// ImagesTagMoved: pinned, and a tag names another digest now (status.images[].latest).
	ImagesTagMoved = "TagMoved"
	// ImagesResolving: an image has no digest yet (ImagesPinned False).
	ImagesResolving = "Resolving"
	// ImagesVerifying: a pinned digest's signature is not verified yet (imagePolicy.verify).
	ImagesVerifying = "Verifying"
	// ImagesVerificationFailed: a pinned digest's signature did not verify; status.images says why.
	ImagesVerificationFailed = "VerificationFailed"
	// ReadyResolvingImages is Ready's reason while an image has no digest yet.
	ReadyResolvingImages = "ResolvingImages"
	// ReadyImagesNotVerified is Ready's reason while a pinned digest's signature has not verified.
	ReadyImagesNotVerified = "ImagesNotVerified"
)

// WithImages sets the ImagesPinned condition of a set pinning digests into conditions, and
// Ready False while images wait (waiting, from revision.Compile), saying what new pods get
// meanwhile: lastRevision (the revision it injected last) or, when empty, no sidecars of the
// set. For other sets it removes ImagesPinned.
func WithImages(conditions *[]metav1.Condition, previous []metav1.Condition, set *appsv1alpha1.SidecarSet,
	waiting *inject.ImagesNotResolvedError, lastRevision string, now metav1.Time) {
	if !inject.PinsDigests(set) {
		meta.RemoveStatusCondition(conditions, appsv1alpha1.ConditionImagesPinned)
		return
	}
	cond := metav1.Condition{Type: appsv1alpha1.ConditionImagesPinned, ObservedGeneration: set.Generation, LastTransitionTime: now}
	if waiting != nil {
		meanwhile := "new matching pods get no sidecars of this set until then"
		last := "the last one resolved"
		if len(waiting.Unverified) > 0 {
			last = "the last one whose images resolved and verified"
		}
		switch {
		case set.Spec.InjectionStrategy.Revision != nil:
			// The webhook injects the pinned revision, whatever the current spec waits for.
			meanwhile = "new matching pods get " + revision.Describe(set.Spec.InjectionStrategy.Revision) +
				" (spec.injectionStrategy.revision) meanwhile"
		case lastRevision != "":
			meanwhile = "new matching pods get revision " + lastRevision + " (" + last + ") until then"
		}
		reason, ready := ImagesResolving, readyResolvingImages
		switch {
		case waiting.Failed():
			reason, ready = ImagesVerificationFailed, readyImagesVerificationFailed
		case len(waiting.Images) == 0:
			reason, ready = ImagesVerifying, readyImagesVerifying
		}
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, reason, capped(waiting.Error())+"; "+meanwhile
		keepTransition(&cond, previous)
		meta.SetStatusCondition(conditions, cond)
		setReady(conditions, previous, ready, cond.Message, set.Generation, now)
		return
	}
	var pinned, moved []string
	for _, r := range set.Status.Images {
		if r.Digest == "" {
			continue
		}
		entry := inject.PinnedImage(r.Image, r.Digest)
		if r.Verified != nil && r.Verified.Digest == r.Digest {
			entry += " (signed by " + r.Verified.Signer + ")"
		}
		pinned = append(pinned, entry)
		if r.Latest != "" && r.Latest != r.Digest {
			moved = append(moved, fmt.Sprintf("%s now names %s", r.Image, r.Latest))
		}
	}
	cond.Status, cond.Reason = metav1.ConditionTrue, ImagesPinned
	what := "pinned"
	if set.Spec.ImagePolicy.Verify != nil {
		what = "pinned and verified"
	}
	cond.Message = fmt.Sprintf("%d images %s: %s", len(pinned), what, strings.Join(pinned, ", "))
	if len(pinned) == 0 {
		cond.Message = "every image is named by digest in the spec"
	}
	if len(moved) > 0 {
		cond.Reason = ImagesTagMoved
		cond.Message += fmt.Sprintf("; tags moved since: %s; pods keep the pinned digests until the set's images are refreshed "+
			"(kubectl sidecarset rollout refresh %s), which rolls the new ones out", strings.Join(moved, ", "), set.Name)
	}
	cond.Message = capped(cond.Message)
	keepTransition(&cond, previous)
	meta.SetStatusCondition(conditions, cond)
}

// maxMessage bounds the messages WithImages writes, far under a condition's 32768: they name
// images, which a spec does not bound.
const maxMessage = 4096

func capped(msg string) string { return images.Cut(msg, maxMessage) }

// keepTransition keeps the previous condition's transition time when its status is unchanged.
func keepTransition(c *metav1.Condition, previous []metav1.Condition) {
	if was := meta.FindStatusCondition(previous, c.Type); was != nil && was.Status == c.Status {
		c.LastTransitionTime = was.LastTransitionTime
	}
}
