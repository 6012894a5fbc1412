//go:build e2e

package realnode

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// TestDigestPinnedSidecarOnRealNode: a set pinning its image to a digest, the operator (from
// its image, on the node's network) resolving it from the node's loopback registry; the pod's
// sidecar names repository:tag@digest, the digest the registry gives for the tag, and
// containerd pulls and runs exactly that (its imageID).
func TestDigestPinnedSidecarOnRealNode(t *testing.T) {
	ns := newNamespace(t, "pinned")
	img := image("agent:v1")
	ref, err := name.ParseReference(img, name.Insecure)
	must(t, err)
	desc, err := remote.Head(ref, remote.WithContext(ctx))
	must(t, err)
	digest := desc.Digest.String()

	set := &appsv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-pinned"},
		Spec: appsv1alpha1.SidecarSetSpec{
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pinned"}},
			Containers:  []appsv1alpha1.SidecarContainer{{Container: probed("agent", img)}},
			ImagePolicy: &appsv1alpha1.ImagePolicy{Pin: appsv1alpha1.ImagePinDigest},
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
	t.Logf("%s pinned to %s %s after the set was created", img, digest, took)

	newDeployment(t, ns, "pinned", 1)
	waitForCounts(t, set, 1)
	pod := podsOf(t, ns, "pinned")[0]
	want := inject.PinnedImage(img, digest)
	if got := containerNamed(pod.Spec.Containers, "agent"); got == nil || got.Image != want {
		t.Fatalf("pod %s runs agent %+v; want image %s", pod.Name, got, want)
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
