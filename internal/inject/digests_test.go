package inject_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/test/builders"
)

const (
	digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// pinnedSet is a set pinning digests with a sidecar, a native sidecar and an init container
// named by digest already, with status.images as given.
func pinnedSet(images ...appsv1alpha1.ResolvedImage) *appsv1alpha1.SidecarSet {
	set := builders.SidecarSet("pinned", builders.Selecting("web"),
		builders.WithContainers(corev1.Container{Name: "proxy", Image: "registry.example/proxy:1.0"}))
	always := corev1.ContainerRestartPolicyAlways
	set.Spec.InitContainers = []appsv1alpha1.SidecarContainer{
		{Container: corev1.Container{Name: "agent", Image: "registry.example/agent:2.0", RestartPolicy: &always}},
		{Container: corev1.Container{Name: "setup", Image: "registry.example/setup@" + digestB}},
		{Container: corev1.Container{Name: "again", Image: "registry.example/proxy:1.0"}},
	}
	set.Spec.ImagePolicy = &appsv1alpha1.ImagePolicy{Pin: appsv1alpha1.ImagePinDigest}
	set.Status.Images = images
	return set
}

func TestImagesToResolve(t *testing.T) {
	got := inject.ImagesToResolve(&pinnedSet().Spec)
	want := []string{"registry.example/proxy:1.0", "registry.example/agent:2.0"}
	if !slices.Equal(got, want) {
		t.Errorf("ImagesToResolve() = %q, want %q (each tag once, digests left out)", got, want)
	}
}

func TestHasDigest(t *testing.T) {
	for image, want := range map[string]bool{
		"nginx":                                      false,
		"registry.example/proxy:1.0":                 false,
		"registry.example/proxy@" + digestA:          true,
		"registry.example/proxy:1.0@" + digestA:      true,
		"127.0.0.1:5000/proxy:1.0@" + digestA:        true,
		"registry.example/proxy@sha256:not-a-digest": false,
		"UPPER/case:1":                               false,
	} {
		if got := inject.HasDigest(image); got != want {
			t.Errorf("HasDigest(%q) = %v, want %v", image, got, want)
		}
	}
}

// TestCompilePinsDigests: a set pinning digests is compiled, hashed and stored with its images
// pinned to status.images' digests; while one has none, Compile says which and why.
func TestCompilePinsDigests(t *testing.T) {
	resolved := []appsv1alpha1.ResolvedImage{
		{Image: "registry.example/proxy:1.0", Digest: digestA, ResolvedAt: &metav1.Time{}},
		{Image: "registry.example/agent:2.0", Digest: digestB},
	}
	tests := []struct {
		name       string
		set        *appsv1alpha1.SidecarSet
		wantImages []string // containers, then init containers
		wantErr    string
	}{
		{name: "all resolved", set: pinnedSet(resolved...), wantImages: []string{
			"registry.example/proxy:1.0@" + digestA,
			"registry.example/agent:2.0@" + digestB, "registry.example/setup@" + digestB, "registry.example/proxy:1.0@" + digestA}},
		{name: "tags when the set does not pin", set: func() *appsv1alpha1.SidecarSet {
			s := pinnedSet(resolved...)
			s.Spec.ImagePolicy.Pin = appsv1alpha1.ImagePinTag
			return s
		}(), wantImages: []string{"registry.example/proxy:1.0", "registry.example/agent:2.0", "registry.example/setup@" + digestB, "registry.example/proxy:1.0"}},
		{name: "one not resolved yet", set: pinnedSet(resolved[0]), wantErr: `this one is not resolved yet: registry.example/agent:2.0`},
		{name: "none resolved, with why", set: pinnedSet(appsv1alpha1.ResolvedImage{Image: "registry.example/proxy:1.0", Error: "unauthorized"}),
			wantErr: `these are not resolved yet: registry.example/proxy:1.0 (unauthorized), registry.example/agent:2.0`},
		{name: "a digest in status that is not one", set: pinnedSet(resolved[0], appsv1alpha1.ResolvedImage{Image: "registry.example/agent:2.0", Digest: "sha256:short"}),
			wantErr: `registry.example/agent:2.0 (status.images gives it digest "sha256:short", which is not one`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.set.DeepCopy()
			c, err := inject.Compile(tt.set)
			if tt.wantErr != "" {
				var waiting *inject.ImagesNotResolvedError
				if !errors.As(err, &waiting) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Compile() error = %v, want an ImagesNotResolvedError containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, list := range [][]appsv1alpha1.SidecarContainer{c.Set.Spec.Containers, c.Set.Spec.InitContainers} {
				for _, s := range list {
					got = append(got, s.Image)
				}
			}
			if !slices.Equal(got, tt.wantImages) {
				t.Errorf("compiled images = %q, want %q", got, tt.wantImages)
			}
			if c.Hash != inject.Hash(&c.Set.Spec) {
				t.Errorf("hash %s is not the hash of the compiled content %s", c.Hash, inject.Hash(&c.Set.Spec))
			}
			if tt.set.Spec.Containers[0].Image != before.Spec.Containers[0].Image {
				t.Error("Compile modified the set it was given")
			}
		})
	}
	// Another digest behind the same tags is another hash: a new revision.
	a, err := inject.Compile(pinnedSet(resolved...))
	if err != nil {
		t.Fatal(err)
	}
	moved := slices.Clone(resolved)
	moved[0].Digest = digestB
	b, err := inject.Compile(pinnedSet(moved...))
	if err != nil {
		t.Fatal(err)
	}
	if a.Hash == b.Hash {
		t.Error("a new digest behind the same tag kept the hash: the rollout would not see it")
	}
	// Stored content is injected as stored: compiled again, it keeps its digests and its hash.
	stored, err := inject.WithContent(pinnedSet(), inject.Content(&a.Set.Spec))
	if err != nil {
		t.Fatal(err)
	}
	again, err := inject.Compile(stored)
	if err != nil {
		t.Fatalf("compiling stored pinned content: %v", err)
	}
	if again.Hash != a.Hash {
		t.Errorf("stored content compiles to hash %s, want %s", again.Hash, a.Hash)
	}
}

// TestCompileVerifiesSignatures: a set with imagePolicy.verify injects a digest only once its
// signature verified under the current verify policy; images named by digest are verified too.
func TestCompileVerifiesSignatures(t *testing.T) {
	verify := &appsv1alpha1.ImageVerification{Keys: []appsv1alpha1.ConfigMapKeyRef{{Name: "signers", Key: "cosign.pub"}}}
	policy := inject.VerifyPolicy(verify)
	signed := func(image, digest, policy string) appsv1alpha1.ResolvedImage {
		return appsv1alpha1.ResolvedImage{Image: image, Digest: digest,
			Verified: &appsv1alpha1.VerifiedSignature{Digest: digest, Signer: "key signers/cosign.pub", Policy: policy}}
	}
	all := []appsv1alpha1.ResolvedImage{
		signed("registry.example/proxy:1.0", digestA, policy),
		signed("registry.example/agent:2.0", digestB, policy),
		signed("registry.example/setup@"+digestB, digestB, policy),
	}
	verifying := func(images ...appsv1alpha1.ResolvedImage) *appsv1alpha1.SidecarSet {
		s := pinnedSet(images...)
		s.Spec.ImagePolicy.Verify = verify
		return s
	}
	with := func(i int, change func(*appsv1alpha1.ResolvedImage)) []appsv1alpha1.ResolvedImage {
		out := make([]appsv1alpha1.ResolvedImage, len(all))
		for j := range all {
			out[j] = *all[j].DeepCopy()
		}
		change(&out[i])
		return out
	}
	if got, want := inject.ImagesToPin(verifying()), []string{"registry.example/proxy:1.0", "registry.example/agent:2.0",
		"registry.example/setup@" + digestB}; !slices.Equal(got, want) {
		t.Errorf("ImagesToPin = %q; want every image, by tag or digest, once: %q", got, want)
	}
	for _, tt := range []struct {
		name    string
		set     *appsv1alpha1.SidecarSet
		wantErr string // "" when it compiles
		failed  bool
	}{
		{name: "every digest verified", set: verifying(all...)},
		{name: "one not verified yet", set: verifying(with(1, func(r *appsv1alpha1.ResolvedImage) { r.Verified = nil })...),
			wantErr: `this one has not: registry.example/agent:2.0@` + digestB},
		{name: "one failed, with why", set: verifying(with(0, func(r *appsv1alpha1.ResolvedImage) {
			r.Verified, r.VerificationError = nil, "no trusted signer signed it"
		})...), wantErr: `registry.example/proxy:1.0@` + digestA + ` (no trusted signer signed it)`, failed: true},
		{name: "verified under other signers", set: verifying(with(0, func(r *appsv1alpha1.ResolvedImage) { r.Verified.Policy = "0123456789abcdef" })...),
			wantErr: `this one has not: registry.example/proxy:1.0@` + digestA},
		{name: "verified an older digest", set: verifying(with(0, func(r *appsv1alpha1.ResolvedImage) { r.Digest = digestB })...),
			wantErr: `this one has not: registry.example/proxy:1.0@` + digestB},
		{name: "an image named by digest is verified too", set: verifying(all[:2]...),
			wantErr: `this one is not resolved yet: registry.example/setup@` + digestB},
		{name: "status gives an image named by digest another digest", set: verifying(with(2, func(r *appsv1alpha1.ResolvedImage) {
			r.Digest, r.Verified.Digest = digestA, digestA
		})...), wantErr: `registry.example/setup@` + digestB + ` (status.images gives it digest "` + digestA + `", not the one it names)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := inject.Compile(tt.set)
			if tt.wantErr == "" {
				if err != nil || c.Set.Spec.Containers[0].Image != "registry.example/proxy:1.0@"+digestA {
					t.Fatalf("Compile() = %v; want the verified digests injected", err)
				}
				return
			}
			var waiting *inject.ImagesNotResolvedError
			if !errors.As(err, &waiting) || !strings.Contains(err.Error(), tt.wantErr) || waiting.Failed() != tt.failed {
				t.Fatalf("Compile() error = %v (failed %v); want an ImagesNotResolvedError containing %q, failed %v",
					err, waiting != nil && waiting.Failed(), tt.wantErr, tt.failed)
			}
		})
	}
}
