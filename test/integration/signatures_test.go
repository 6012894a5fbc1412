package integration

import (
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/cli"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/status"
	"github.com/sidecarset/sidecarset-operator/test/builders"
	"github.com/sidecarset/sidecarset-operator/test/sigstoretest"
)

// TestSignedImages: a set with imagePolicy.verify trusting a cosign key from a ConfigMap in the
// operator's namespace, its images in a registry served in the test process, signed here as
// cosign signs them. A signed digest is injected, and the set, its event and its revision name
// who signed it. An edit to an unsigned image injects nothing of it: new pods keep the last
// revision whose images verified, status.updateRevision stays, and the set says which digest
// failed and why (ImagesPinned False, VerificationFailed; an ImageVerificationFailed event). An
// image signed by another key fails as well; once the trusted key signs it and the set is
// refreshed, new pods get it.
func TestSignedImages(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	push := func(tag string) name.Digest {
		t.Helper()
		img, err := random.Image(256, 1)
		must(t, err)
		ref, err := name.ParseReference(host+"/signed-agent:"+tag, name.Insecure)
		must(t, err)
		must(t, remote.Write(ref, img))
		d, err := img.Digest()
		must(t, err)
		return ref.Context().Digest(d.String())
	}
	trusted, err := sigstoretest.NewKeySigner()
	must(t, err)
	stranger, err := sigstoretest.NewKeySigner()
	must(t, err)
	signWith := func(s *sigstoretest.Signer, d name.Digest) {
		t.Helper()
		b, err := s.Sign(d.Context().Name(), d.DigestStr())
		must(t, err)
		must(t, sigstoretest.Attach(d, b))
	}
	v1 := push("1.0")
	signWith(trusted, v1)

	keys := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: "it-signers"},
		Data: map[string]string{"cosign.pub": trusted.PublicKeyPEM()}}
	must(t, k8s.Create(ctx, keys))
	t.Cleanup(func() { deleteIgnoreNotFound(t, keys) })

	ns := newNamespace(t, nil)
	image := host + "/signed-agent:1.0"
	set := builders.SidecarSet("it-signed", builders.Selecting("signed-images"),
		builders.WithContainers(corev1.Container{Name: "agent", Image: image}))
	set.Spec.ImagePolicy = &appsv1alpha1.ImagePolicy{Pin: appsv1alpha1.ImagePinDigest,
		Verify: &appsv1alpha1.ImageVerification{Keys: []appsv1alpha1.ConfigMapKeyRef{{Name: keys.Name, Key: "cosign.pub"}}}}
	set = createSet(t, set)
	const signer = "key it-signers/cosign.pub"

	var cur *appsv1alpha1.SidecarSet
	eventually(t, "the set to say its image is pinned and verified", func() (bool, string) {
		cur = getSet(t, set)
		c := meta.FindStatusCondition(cur.Status.Conditions, appsv1alpha1.ConditionImagesPinned)
		return c != nil && c.Reason == status.ImagesPinned && cur.Status.UpdateRevision != "" &&
				contains(c.Message, "pinned and verified", inject.PinnedImage(image, v1.DigestStr())+" (signed by "+signer+")"),
			fmt.Sprintf("ImagesPinned %+v, updateRevision %q", c, cur.Status.UpdateRevision)
	})
	if got := cur.Status.Images[0].Verified; got == nil || got.Digest != v1.DigestStr() || got.Signer != signer {
		t.Errorf("status.images[0].verified = %+v; want %s signed by %s", got, v1.DigestStr(), signer)
	}
	waitForSetEvent(t, set, "ImageVerified", v1.DigestStr(), signer)
	verifiedRevision := cur.Status.UpdateRevision
	var rev appsv1.ControllerRevision
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: verifiedRevision}, &rev))
	if got := rev.Annotations[appsv1alpha1.SignaturesAnnotation]; !strings.HasSuffix(got, "\n"+inject.PinnedImage(image, v1.DigestStr())+" signed by "+signer) ||
		!strings.HasPrefix(got, "policy "+inject.VerifyPolicy(set.Spec.ImagePolicy.Verify)+"\n") {
		t.Errorf("revision %s records signatures %q; want the image's", rev.Name, got)
	}

	created := 0
	injected := func(wantImage string) {
		t.Helper()
		created++
		pod := appPod(ns, fmt.Sprintf("signed-images-%d", created), "signed-images", true)
		must(t, k8s.Create(ctx, pod))
		if got := imageOf(pod, "agent"); got != wantImage {
			t.Fatalf("pod %s has agent image %q; want %s", pod.Name, got, wantImage)
		}
	}
	injected(inject.PinnedImage(image, v1.DigestStr()))
	// explain names the digest and who signed it.
	if code, stdout, stderr := plugin(t, "", "explain", "pod", "signed-images-1", "-n", ns); code != cli.ExitOK ||
		!contains(stdout, "agent "+inject.PinnedImage(image, v1.DigestStr())+" signed by "+signer) {
		t.Errorf("explain exited %d and said:\n%s%s\nwant the pinned image and its signer named", code, stdout, stderr)
	}

	// An edit to an unsigned image: new pods keep the verified revision, and the set says why.
	v2 := push("2.0")
	image2 := host + "/signed-agent:2.0"
	patchSet(t, set, `{"spec":{"containers":[{"name":"agent","image":"`+image2+`"}]}}`)
	unsigned := inject.PinnedImage(image2, v2.DigestStr())
	eventually(t, "the set to say agent:2.0 did not verify", func() (bool, string) {
		cur = getSet(t, set)
		pinned := meta.FindStatusCondition(cur.Status.Conditions, appsv1alpha1.ConditionImagesPinned)
		ready := meta.FindStatusCondition(cur.Status.Conditions, appsv1alpha1.ConditionReady)
		return cur.Status.ObservedGeneration == cur.Generation && pinned != nil && pinned.Reason == status.ImagesVerificationFailed &&
				ready != nil && ready.Reason == status.ReadyImagesNotVerified &&
				contains(pinned.Message, unsigned, "it has no signature", "revision "+verifiedRevision),
			fmt.Sprintf("ImagesPinned %+v, Ready %+v", pinned, ready)
	})
	if cur.Status.UpdateRevision != verifiedRevision {
		t.Errorf("status.updateRevision %s while agent:2.0 does not verify; want the verified %s", cur.Status.UpdateRevision, verifiedRevision)
	}
	waitForSetEvent(t, set, "ImageVerificationFailed", unsigned, "it has no signature")
	eventually(t, "the webhook to see the edit", func() (bool, string) {
		c, ok := op.Sets.Load().Get(set.Name)
		return ok && c.Set.Generation == cur.Generation, "not yet"
	})
	injected(inject.PinnedImage(image, v1.DigestStr()))

	// Signed by a key the set does not trust: still refused.
	signWith(stranger, v2)
	refresh := func() {
		t.Helper()
		if code, stdout, stderr := plugin(t, "", "rollout", "refresh", set.Name); code != cli.ExitOK {
			t.Fatalf("rollout refresh exited %d: %s%s", code, stdout, stderr)
		}
	}
	refresh()
	eventually(t, "the set to say agent:2.0 is signed by no trusted signer", func() (bool, string) {
		cur = getSet(t, set)
		pinned := meta.FindStatusCondition(cur.Status.Conditions, appsv1alpha1.ConditionImagesPinned)
		return pinned != nil && pinned.Reason == status.ImagesVerificationFailed && contains(pinned.Message, unsigned, "no trusted signer signed it"),
			fmt.Sprintf("ImagesPinned %+v", pinned)
	})
	injected(inject.PinnedImage(image, v1.DigestStr()))

	// Signed by the trusted key and refreshed: verified, and new pods get it.
	signWith(trusted, v2)
	refresh()
	eventually(t, "agent:2.0 to verify", func() (bool, string) {
		cur = getSet(t, set)
		pinned := meta.FindStatusCondition(cur.Status.Conditions, appsv1alpha1.ConditionImagesPinned)
		return pinned != nil && pinned.Reason == status.ImagesPinned && cur.Status.UpdateRevision != verifiedRevision,
			fmt.Sprintf("ImagesPinned %+v, updateRevision %s", pinned, cur.Status.UpdateRevision)
	})
	waitForSet(t, set)
	eventually(t, "the webhook to inject agent:2.0", func() (bool, string) {
		c, ok := op.Sets.Load().Get(set.Name)
		return ok && c.Set.Spec.Containers[0].Image == unsigned, "not yet"
	})
	injected(unsigned)
}
