package images_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/images"
	"github.com/sidecarset/sidecarset-operator/test/sigstoretest"
)

const (
	repo    = "registry.test/agent"
	issuer  = "https://issuer.test"
	subject = "https://ci.test/agent/release.yaml@refs/tags/v1"
)

func digestOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// TestVerify: who signed a digest, among the bundles attached to it, for keys and keyless
// identities against a trusted root generated here, and why not when nobody trusted did.
func TestVerify(t *testing.T) {
	trusted, err := sigstoretest.NewKeySigner()
	must(t, err)
	other, err := sigstoretest.NewKeySigner()
	must(t, err)
	ca, err := sigstoretest.NewCA()
	must(t, err)
	rootJSON, err := ca.TrustedRoot()
	must(t, err)
	now := time.Now()
	keyless, err := ca.Signer(issuer, subject, now.Add(-time.Minute), now.Add(time.Hour))
	must(t, err)
	expired, err := ca.Signer(issuer, subject, now.Add(-2*time.Hour), now.Add(-time.Hour))
	must(t, err)
	stranger, err := ca.Signer(issuer, "https://ci.test/someone-else.yaml@refs/heads/main", now.Add(-time.Minute), now.Add(time.Hour))
	must(t, err)
	foreignCA, err := sigstoretest.NewCA()
	must(t, err)
	forged, err := foreignCA.Signer(issuer, subject, now.Add(-time.Minute), now.Add(time.Hour))
	must(t, err)

	manifest := `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json"}`
	digest := digestOf(manifest)
	other1 := digestOf("another image")
	bundle := func(b []byte, err error) []byte {
		t.Helper()
		must(t, err)
		return b
	}
	byKeys := &appsv1alpha1.ImageVerification{Keys: []appsv1alpha1.ConfigMapKeyRef{{Name: "signers", Key: "cosign.pub"}}}
	byIdentity := &appsv1alpha1.ImageVerification{Identities: []appsv1alpha1.SignerIdentity{{Issuer: issuer, Subject: subject}},
		TrustedRoot: &appsv1alpha1.ConfigMapKeyRef{Name: "sigstore", Key: "trusted_root.json"}}
	byRegExp := &appsv1alpha1.ImageVerification{Identities: []appsv1alpha1.SignerIdentity{{Issuer: issuer, SubjectRegExp: `^https://ci\.test/agent/.*$`}},
		TrustedRoot: byIdentity.TrustedRoot}
	byUnanchored := &appsv1alpha1.ImageVerification{Identities: []appsv1alpha1.SignerIdentity{{Issuer: issuer, SubjectRegExp: `https://ci\.test/agent/`}},
		TrustedRoot: byIdentity.TrustedRoot}
	lookalike, err := ca.Signer(issuer, "https://ci.test/attacker/x.yaml@refs/heads/https://ci.test/agent/", now.Add(-time.Minute), now.Add(time.Hour))
	must(t, err)
	keyPEM := [][]byte{[]byte(trusted.PublicKeyPEM())}

	for _, tc := range []struct {
		name    string
		spec    *appsv1alpha1.ImageVerification
		keys    [][]byte
		root    []byte
		bundles [][]byte
		signer  string // "" when it must not verify
		why     string // part of the error when it does not
	}{
		{name: "the trusted key signed the digest", spec: byKeys, keys: keyPEM,
			bundles: [][]byte{bundle(trusted.Sign(repo, digest))}, signer: "key signers/cosign.pub"},
		{name: "a message signature names no image", spec: byKeys, keys: keyPEM,
			bundles: [][]byte{bundle(trusted.SignMessage([]byte(manifest)))}, why: "it is a message signature"},
		{name: "the trusted key signed the digest as another repository", spec: byKeys, keys: keyPEM,
			bundles: [][]byte{bundle(trusted.Sign("registry.test/debug-shell", digest))}, why: "a signature for another repository"},
		{name: "another key signed it", spec: byKeys, keys: keyPEM,
			bundles: [][]byte{bundle(other.Sign(repo, digest))}, why: "no trusted signer signed it"},
		{name: "no signature at all", spec: byKeys, keys: keyPEM, why: "it has no signature"},
		{name: "the trusted key signed another digest", spec: byKeys, keys: keyPEM,
			bundles: [][]byte{bundle(trusted.Sign(repo, other1))}, why: "bundle 1"},
		{name: "an attestation by the trusted key is no signature", spec: byKeys, keys: keyPEM,
			bundles: [][]byte{bundle(trusted.Attest(repo, digest, "https://slsa.dev/provenance/v1"))}, why: "it is an attestation"},
		{name: "one good bundle among bad ones", spec: byKeys, keys: keyPEM,
			bundles: [][]byte{[]byte("not json"), bundle(other.Sign(repo, digest)), bundle(trusted.Sign(repo, digest))},
			signer:  "key signers/cosign.pub"},
		{name: "the keyless identity signed it", spec: byIdentity, root: rootJSON,
			bundles: [][]byte{bundle(keyless.Sign(repo, digest))}, signer: "identity " + issuer + " " + subject},
		{name: "the identity matched by expression", spec: byRegExp, root: rootJSON,
			bundles: [][]byte{bundle(keyless.Sign(repo, digest))}, signer: "identity " + issuer + " " + subject},
		{name: "the expression matches whole subjects only", spec: byUnanchored, root: rootJSON,
			bundles: [][]byte{bundle(lookalike.Sign(repo, digest))}, why: "no trusted signer signed it"},
		{name: "the identity's certificate expired", spec: byIdentity, root: rootJSON,
			bundles: [][]byte{bundle(expired.Sign(repo, digest))}, why: "leaf certificate verification failed"},
		{name: "another identity of the same CA", spec: byIdentity, root: rootJSON,
			bundles: [][]byte{bundle(stranger.Sign(repo, digest))}, why: "no trusted signer signed it"},
		{name: "the identity certified by a CA the root does not list", spec: byIdentity, root: rootJSON,
			bundles: [][]byte{bundle(forged.Sign(repo, digest))}, why: "no trusted signer signed it"},
		{name: "a keyless signature is no key signature", spec: byKeys, keys: keyPEM,
			bundles: [][]byte{bundle(keyless.Sign(repo, digest))}, why: "no trusted signer signed it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			trust, err := images.NewTrust(tc.spec, tc.keys, tc.root)
			must(t, err)
			signer, err := trust.Verify(repo+":1.0", digest, tc.bundles)
			switch {
			case tc.signer != "" && (err != nil || signer != tc.signer):
				t.Errorf("Verify = %q, %v; want signed by %q", signer, err, tc.signer)
			case tc.signer == "" && (err == nil || !strings.Contains(err.Error(), tc.why)):
				t.Errorf("Verify = %q, %v; want an error saying %q", signer, err, tc.why)
			}
		})
	}
}

// TestNewTrustNamesTheField: keys and roots that cannot be used are refused naming the field
// and the ConfigMap.
func TestNewTrustNamesTheField(t *testing.T) {
	spec := &appsv1alpha1.ImageVerification{Keys: []appsv1alpha1.ConfigMapKeyRef{{Name: "signers", Key: "cosign.pub"}}}
	if _, err := images.NewTrust(spec, [][]byte{[]byte("not a key")}, nil); err == nil ||
		!strings.Contains(err.Error(), "spec.imagePolicy.verify.keys[0] (ConfigMap signers, key cosign.pub)") {
		t.Errorf("NewTrust with a bad key: %v; want it named", err)
	}
	spec = &appsv1alpha1.ImageVerification{Identities: []appsv1alpha1.SignerIdentity{{Issuer: issuer, Subject: subject}},
		TrustedRoot: &appsv1alpha1.ConfigMapKeyRef{Name: "sigstore", Key: "trusted_root.json"}}
	if _, err := images.NewTrust(spec, nil, []byte(`{"mediaType":"nonsense"}`)); err == nil ||
		!strings.Contains(err.Error(), "spec.imagePolicy.verify.trustedRoot (ConfigMap sigstore, key trusted_root.json)") {
		t.Errorf("NewTrust with a bad root: %v; want it named", err)
	}
	spec.Identities[0] = appsv1alpha1.SignerIdentity{Issuer: issuer, SubjectRegExp: "("}
	ca, err := sigstoretest.NewCA()
	must(t, err)
	rootJSON, err := ca.TrustedRoot()
	must(t, err)
	if _, err := images.NewTrust(spec, nil, rootJSON); err == nil || !strings.Contains(err.Error(), "spec.imagePolicy.verify.identities[0]") {
		t.Errorf("NewTrust with a bad expression: %v; want it named", err)
	}
}

// TestBundles: the bundles attached to a digest are read back from a registry with the
// referrers API and from one with only its tag scheme; another digest's are not.
func TestBundles(t *testing.T) {
	for _, referrers := range []bool{true, false} {
		var opts []registry.Option
		opts = append(opts, registry.Logger(log.New(io.Discard, "", 0)))
		if referrers {
			opts = append(opts, registry.WithReferrersSupport(true))
		}
		srv := httptest.NewServer(registry.New(opts...))
		host := strings.TrimPrefix(srv.URL, "http://")
		push := func(tag string) name.Digest {
			img, err := random.Image(128, 1)
			must(t, err)
			ref, err := name.ParseReference(host+"/agent:"+tag, name.Insecure)
			must(t, err)
			must(t, remote.Write(ref, img))
			d, err := img.Digest()
			must(t, err)
			return ref.Context().Digest(d.String())
		}
		signed, unsigned := push("1.0"), push("2.0")
		signer, err := sigstoretest.NewKeySigner()
		must(t, err)
		b, err := signer.Sign(signed.Context().Name(), signed.DigestStr())
		must(t, err)
		must(t, sigstoretest.Attach(signed, b))
		r := &images.Resolver{}
		got, problems, err := r.Bundles(context.Background(), host+"/agent:1.0", signed.DigestStr(), authn.NewMultiKeychain())
		if err != nil || len(problems) > 0 || len(got) != 1 || string(got[0]) != string(b) {
			t.Errorf("referrers API %v: Bundles of the signed image = %d bundles, %v, %v; want the one attached", referrers, len(got), problems, err)
		}
		got, _, err = r.Bundles(context.Background(), host+"/agent:2.0", unsigned.DigestStr(), authn.NewMultiKeychain())
		if err != nil || len(got) != 0 {
			t.Errorf("referrers API %v: Bundles of the unsigned image = %d bundles, %v; want none", referrers, len(got), err)
		}
		// An artifact whose bundle cannot be read (its blob is missing), which anyone who may push
		// can attach, is skipped and named; the signature is still found.
		broken := brokenBundle(t, signed)
		got, problems, err = r.Bundles(context.Background(), host+"/agent:1.0", signed.DigestStr(), authn.NewMultiKeychain())
		if err != nil || len(got) != 1 || string(got[0]) != string(b) || len(problems) != 1 || !strings.Contains(problems[0], broken) {
			t.Errorf("referrers API %v: with an unreadable artifact attached, Bundles = %d bundles, problems %q, %v; want the signature, and %s named",
				referrers, len(got), problems, err, broken)
		}
		srv.Close()
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// brokenBundle attaches to subject a bundle artifact whose layer blob was never uploaded, and
// returns the artifact's digest.
func brokenBundle(t *testing.T, subject name.Digest) string {
	t.Helper()
	desc, err := remote.Head(subject)
	must(t, err)
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": string(types.OCIManifestSchema1), "artifactType": sigstoretest.BundleMediaType,
		"config": map[string]any{"mediaType": "application/vnd.oci.empty.v1+json",
			"digest": "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a", "size": 2},
		"layers":  []any{map[string]any{"mediaType": sigstoretest.BundleMediaType, "digest": digestOf("never uploaded"), "size": 14}},
		"subject": map[string]any{"mediaType": string(desc.MediaType), "digest": desc.Digest.String(), "size": desc.Size},
	})
	must(t, err)
	d := digestOf(string(manifest))
	must(t, remote.Put(subject.Context().Digest(d), rawManifest{raw: manifest, mediaType: types.OCIManifestSchema1}))
	return d
}

type rawManifest struct {
	raw       []byte
	mediaType types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.raw, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mediaType, nil }
