package status

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// TestWithImages: ImagesPinned says what a set pinning digests injects (pinned, a tag moved,
// or waiting, and what new pods get meanwhile), Ready is False while images wait, transition
// times are kept while a condition's status stays, and other sets carry no ImagesPinned.
func TestWithImages(t *testing.T) {
	then, now := metav1.NewTime(time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)), metav1.NewTime(time.Date(2026, 11, 28, 2, 0, 0, 0, time.UTC))
	set := func(pin appsv1alpha1.ImagePin, images ...appsv1alpha1.ResolvedImage) *appsv1alpha1.SidecarSet {
		s := &appsv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "mesh", Generation: 3}}
		s.Spec.ImagePolicy = &appsv1alpha1.ImagePolicy{Pin: pin}
		s.Status.Images = images
		return s
	}
	readyTrue := metav1.Condition{Type: appsv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Injecting", LastTransitionTime: then}
	waiting := &inject.ImagesNotResolvedError{Set: "mesh", Images: []string{"proxy:2"}, Reasons: []string{"unauthorized"}}
	for _, tc := range []struct {
		name                    string
		set                     *appsv1alpha1.SidecarSet
		waiting                 *inject.ImagesNotResolvedError
		last                    string
		previous                []metav1.Condition
		status, reason          string // ImagesPinned's; "" for none
		ready, readyReason      string
		message                 []string
		pinnedSince, readySince metav1.Time
	}{
		{name: "tags", set: set(appsv1alpha1.ImagePinTag), ready: "True", readyReason: "Injecting", readySince: then},
		{name: "pinned", set: set(appsv1alpha1.ImagePinDigest, appsv1alpha1.ResolvedImage{Image: "proxy:1", Digest: "sha256:aa"}),
			status: "True", reason: ImagesPinned, ready: "True", readyReason: "Injecting", message: []string{"1 images pinned: proxy:1@sha256:aa"},
			pinnedSince: now, readySince: then},
		{name: "a tag moved", set: set(appsv1alpha1.ImagePinDigest, appsv1alpha1.ResolvedImage{Image: "proxy:1", Digest: "sha256:aa", Latest: "sha256:bb"}),
			previous: []metav1.Condition{{Type: appsv1alpha1.ConditionImagesPinned, Status: metav1.ConditionTrue, Reason: ImagesPinned, LastTransitionTime: then}},
			status:   "True", reason: ImagesTagMoved, ready: "True", readyReason: "Injecting",
			message: []string{"proxy:1 now names sha256:bb", "kubectl sidecarset rollout refresh mesh"}, pinnedSince: then, readySince: then},
		{name: "waiting, with a last revision", set: set(appsv1alpha1.ImagePinDigest), waiting: waiting, last: "mesh-abc",
			status: "False", reason: ImagesResolving, ready: "False", readyReason: ReadyResolvingImages,
			message: []string{"proxy:2 (unauthorized)", "new matching pods get revision mesh-abc"}, pinnedSince: now, readySince: now},
		{name: "waiting, with a pinned revision", set: func() *appsv1alpha1.SidecarSet {
			s := set(appsv1alpha1.ImagePinDigest)
			s.Spec.InjectionStrategy.Revision = &appsv1alpha1.RevisionRef{Name: "mesh-old", Policy: appsv1alpha1.RevisionPolicyPartial}
			return s
		}(), waiting: waiting, last: "mesh-abc",
			status: "False", reason: ImagesResolving, ready: "False", readyReason: ReadyResolvingImages,
			message: []string{"new matching pods get revision mesh-old (spec.injectionStrategy.revision) meanwhile"}, pinnedSince: now, readySince: now},
		{name: "waiting, nothing to inject", set: set(appsv1alpha1.ImagePinDigest), waiting: waiting,
			previous: []metav1.Condition{{Type: appsv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: ReadyResolvingImages, LastTransitionTime: then}},
			status:   "False", reason: ImagesResolving, ready: "False", readyReason: ReadyResolvingImages,
			message: []string{"get no sidecars of this set until then"}, pinnedSince: now, readySince: then},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// As Compute leaves them: Ready, and no ImagesPinned.
			conds := []metav1.Condition{readyTrue}
			WithImages(&conds, tc.previous, tc.set, tc.waiting, tc.last, now)
			pinned := meta.FindStatusCondition(conds, appsv1alpha1.ConditionImagesPinned)
			switch {
			case tc.status == "" && pinned != nil:
				t.Errorf("ImagesPinned = %+v on a set that does not pin", pinned)
			case tc.status != "" && (pinned == nil || string(pinned.Status) != tc.status || pinned.Reason != tc.reason ||
				!pinned.LastTransitionTime.Equal(&tc.pinnedSince) || pinned.ObservedGeneration != 3):
				t.Errorf("ImagesPinned = %+v, want %s %s since %s at generation 3", pinned, tc.status, tc.reason, tc.pinnedSince)
			}
			for _, part := range tc.message {
				if !strings.Contains(pinned.Message, part) {
					t.Errorf("ImagesPinned message %q does not say %q", pinned.Message, part)
				}
			}
			ready := meta.FindStatusCondition(conds, appsv1alpha1.ConditionReady)
			if string(ready.Status) != tc.ready || ready.Reason != tc.readyReason || !ready.LastTransitionTime.Equal(&tc.readySince) {
				t.Errorf("Ready = %+v, want %s %s since %s", ready, tc.ready, tc.readyReason, tc.readySince)
			}
		})
	}
}

// TestWithImagesBoundsItsMessages: images a spec names without bound (and registries' errors)
// never make a condition message the API server refuses, which would freeze the whole status.
func TestWithImagesBoundsItsMessages(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 28, 2, 0, 0, 0, time.UTC))
	long := "registry.example/" + strings.Repeat("é", 20000) + ":1"
	set := &appsv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "mesh"}}
	set.Spec.ImagePolicy = &appsv1alpha1.ImagePolicy{Pin: appsv1alpha1.ImagePinDigest}
	waiting := &inject.ImagesNotResolvedError{Set: "mesh", Images: []string{long, long}, Reasons: []string{"", ""}}
	var conds []metav1.Condition
	WithImages(&conds, nil, set, waiting, "mesh-abc", now)
	set.Status.Images = []appsv1alpha1.ResolvedImage{{Image: long, Digest: "sha256:aa", Latest: "sha256:bb"}}
	var pinned []metav1.Condition
	WithImages(&pinned, nil, set, nil, "", now)
	for _, c := range append(conds, pinned...) {
		if len(c.Message) > maxMessage+200 || !utf8.ValidString(c.Message) {
			t.Errorf("%s: a message of %d bytes (valid UTF-8: %v), want at most %d", c.Type, len(c.Message), utf8.ValidString(c.Message), maxMessage+200)
		}
	}
	if c := meta.FindStatusCondition(conds, appsv1alpha1.ConditionImagesPinned); !strings.HasSuffix(c.Message, "revision mesh-abc (the last one resolved) until then") {
		t.Errorf("the cut message no longer says what new pods get: ...%s", c.Message[len(c.Message)-100:])
	}
}
