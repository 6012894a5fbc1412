//go:build e2e

package realnode

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/test/sigstoretest"
)

// TestDigestPinnedSidecarOnRealNode: a set pinning its image to a digest and verifying its
// signature, the operator (from its image, on the node's network) resolving it from the node's
// loopback registry, where the test attached a cosign-style signature by a key the set trusts
// (a ConfigMap in the operator's namespace); the pod's sidecar names repository:tag@digest, the
// digest the registry gives for the tag, the set says who signed it, the pinned-images admission
// policy admitted the pod with its record, and containerd pulls and runs exactly that digest
// (its imageID).
func TestDigestPinnedSidecarOnRealNode(t *testing.T) {
	ns := newNamespace(t, "pinned")
	img := image("agent:v1")
	ref, err := name.ParseReference(img, name.Insecure)
	must(t, err)
	desc, err := remote.Head(ref, remote.WithContext(ctx))
	must(t, err)
	digest := desc.Digest.String()

	// Sign it as cosign does, pushing with the credentials hack/node.sh made for the registry.
	creds, err := os.ReadFile(filepath.Join(os.Getenv("SIDECARSET_CLUSTER_DIR"), "node", "registry.auth"))
	must(t, err)
	user, password, _ := strings.Cut(strings.TrimSpace(string(creds)), ":")
	signer, err := sigstoretest.NewKeySigner()
	must(t, err)
	bundle, err := signer.Sign(ref.Context().Name(), digest)
	must(t, err)
	must(t, sigstoretest.Attach(ref.Context().Digest(digest), bundle, remote.WithContext(ctx),
		remote.WithAuth(&authn.Basic{Username: user, Password: password})))
	keys := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: "e2e-signers"},
		Data: map[string]string{"cosign.pub": signer.PublicKeyPEM()}}
	must(t, k8s.Create(ctx, keys))
	t.Cleanup(func() { _ = k8s.Delete(ctx, keys) })

	set := &appsv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-pinned"},
		Spec: appsv1alpha1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pinned"}},
			Containers: []appsv1alpha1.SidecarContainer{{Container: probed("agent", img)}},
			ImagePolicy: &appsv1alpha1.ImagePolicy{Pin: appsv1alpha1.ImagePinDigest,
				Verify: &appsv1alpha1.ImageVerification{Keys: []appsv1alpha1.ConfigMapKeyRef{{Name: keys.Name, Key: "cosign.pub"}}}},
		},
	}
	must(t, k8s.Create(ctx, set))
	t.Cleanup(func() { _ = k8s.Delete(ctx, set) })
	took := eventually(t, converge, "the set's image to be pinned", func() (bool, string) {
		var cur appsv1alpha1.SidecarSet
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), &cur))
		c := meta.FindStatusCondition(cur.Status.Conditions, appsv1alpha1.ConditionImagesPinned)
		return c != nil && c.Status == metav1.ConditionTrue && cur.Status.ObservedGeneration == cur.Generation,
			fmt.Sprintf("ImagesPinned %+v, images %+v", c, cur.Status.Images)
	})
	var cur appsv1alpha1.SidecarSet
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), &cur))
	if len(cur.Status.Images) != 1 || cur.Status.Images[0].Digest != digest {
		t.Fatalf("status.images %+v; the registry says %s names %s", cur.Status.Images, img, digest)
	}
	if v := cur.Status.Images[0].Verified; v == nil || v.Digest != digest || v.Signer != "key e2e-signers/cosign.pub" {
		t.Errorf("status.images[0].verified = %+v; want %s signed by key e2e-signers/cosign.pub", v, digest)
	}
	t.Logf("%s pinned to %s and its signature verified %s after the set was created", img, digest, took)

	newDeployment(t, ns, "pinned", 1)
	waitForCounts(t, set, 1)
	pod := podsOf(t, ns, "pinned")[0]
	want := inject.PinnedImage(img, digest)
	if got := containerNamed(pod.Spec.Containers, "agent"); got == nil || got.Image != want {
		t.Fatalf("pod %s runs agent %+v; want image %s", pod.Name, got, want)
	}
	if got := pod.Annotations[appsv1alpha1.ImagesAnnotation]; got != "agent="+want {
		t.Errorf("pod %s records %s=%q; want agent=%s (what the pinned-images policy checks)", pod.Name, appsv1alpha1.ImagesAnnotation, got, want)
	}
	st := status(&pod, "agent")
	if !strings.HasSuffix(st.ImageID, "@"+digest) || !st.Ready {
		t.Errorf("containerd reports agent imageID %q (ready %v); want one ending @%s", st.ImageID, st.Ready, digest)
	}
	if hash, _ := inject.InjectedHash(pod.Annotations, set.Name); hash != cur.Status.Hash {
		t.Errorf("pod records hash %s; the set's status says %s", hash, cur.Status.Hash)
	}
	t.Logf("pod %s runs %s; containerd reports imageID %s", pod.Name, want, st.ImageID)
}
