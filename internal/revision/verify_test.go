package revision

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// TestVerifyingSetFallsBackOnlyToVerifiedRevisions: while a set verifying signatures waits for
// its current images, new pods get the last revision only when that revision records verified
// signatures of all its images under the set's current verify policy; a revision stored before
// verify was set records them once they verify, and a pinned revision that records none is
// not injected.
func TestVerifyingSetFallsBackOnlyToVerifiedRevisions(t *testing.T) {
	const (
		digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		digestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	)
	verify := &appsv1alpha1.ImageVerification{Keys: []appsv1alpha1.ConfigMapKeyRef{{Name: "signers", Key: "cosign.pub"}}}
	policy := inject.VerifyPolicy(verify)
	set := func(image, digest string, verified bool, withVerify bool) *appsv1alpha1.SidecarSet {
		s := &appsv1alpha1.SidecarSet{
			ObjectMeta: metav1.ObjectMeta{Name: "agent", UID: "uid-1"},
			Spec: appsv1alpha1.SidecarSetSpec{
				Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Containers:  []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "agent", Image: image}}},
				ImagePolicy: &appsv1alpha1.ImagePolicy{Pin: appsv1alpha1.ImagePinDigest},
			},
			Status: appsv1alpha1.SidecarSetStatus{Images: []appsv1alpha1.ResolvedImage{{Image: image, Digest: digest}}},
		}
		if withVerify {
			s.Spec.ImagePolicy.Verify = verify
		}
		if verified {
			s.Status.Images[0].Verified = &appsv1alpha1.VerifiedSignature{Digest: digest, Signer: "key signers/cosign.pub", Policy: policy}
		}
		return s
	}
	store := func(s *appsv1alpha1.SidecarSet, existing ...appsv1.ControllerRevision) *appsv1.ControllerRevision {
		t.Helper()
		c, err := inject.Compile(s)
		if err != nil {
			t.Fatal(err)
		}
		p := Reconcile(c, "ns", existing, func(string) bool { return false })
		if p.Create != nil {
			return p.Create
		}
		return p.Renumber
	}
	waitingOn := func(last *appsv1.ControllerRevision) *appsv1alpha1.SidecarSet {
		s := set("registry.test/agent:2", digestB, false, true) // the edit's digest is not verified
		s.Status.UpdateRevision = last.Name
		return s
	}
	lookup := func(r *appsv1.ControllerRevision) func(string) *appsv1.ControllerRevision {
		return func(name string) *appsv1.ControllerRevision {
			if name == r.Name {
				return r
			}
			return nil
		}
	}

	// Stored before verify was set: it records nothing, and nothing is injected.
	unverified := store(set("registry.test/agent:1", digestA, false, false))
	if _, ok := unverified.Annotations[appsv1alpha1.SignaturesAnnotation]; ok {
		t.Errorf("a revision of a set verifying nothing records signatures: %v", unverified.Annotations)
	}
	s := waitingOn(unverified)
	if c, waiting, err := Compile(s, s, lookup(unverified)); c != nil || waiting == nil || err == nil {
		t.Errorf("fallback to a revision with no verified signatures: compiled %v, waiting %v, err %v; want nothing injected", c != nil, waiting, err)
	}
	// Its digest verified since: the current revision records it (an update), and the
	// fallback injects it.
	verified := store(set("registry.test/agent:1", digestA, true, true), *unverified)
	if verified == nil || verified.Name != unverified.Name ||
		!strings.Contains(verified.Annotations[appsv1alpha1.SignaturesAnnotation], "registry.test/agent:1@"+digestA+" signed by key signers/cosign.pub") {
		t.Fatalf("the stored revision after its digest verified: %+v; want it to record the signature", verified)
	}
	c, waiting, err := Compile(s, s, lookup(verified))
	if err != nil || waiting == nil || c == nil || c.Set.Spec.Containers[0].Image != "registry.test/agent:1@"+digestA {
		t.Fatalf("fallback to the verified revision: %v, waiting %v; want agent:1 injected", err, waiting)
	}
	// Other signers now: what it records was verified under another policy.
	s.Spec.ImagePolicy.Verify = &appsv1alpha1.ImageVerification{Keys: []appsv1alpha1.ConfigMapKeyRef{{Name: "signers", Key: "new.pub"}}}
	if c, _, _ := Compile(s, s, lookup(verified)); c != nil {
		t.Error("fallback to a revision verified under other signers injected it")
	}
	// A pinned revision (injectionStrategy.revision) that records no signature is not injected:
	// the set's current content is, and Resolve says why.
	pinning := set("registry.test/agent:1", digestA, true, true)
	pinning.Spec.InjectionStrategy.Revision = &appsv1alpha1.RevisionRef{Name: unverified.Name}
	unverified.Labels[appsv1alpha1.RevisionSetLabel] = pinning.Name
	content, missing := Resolve(pinning, []*appsv1.ControllerRevision{unverified})
	if content != pinning || !strings.Contains(missing, "records no signature verified") {
		t.Errorf("Resolve of a pinned revision with no verified signatures: content is the set %v, missing %q", content == pinning, missing)
	}
}
