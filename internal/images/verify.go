package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// BundleArtifactType is the artifact type of a Sigstore bundle attached to an image (cosign's
// bundle specification; the version suffix varies).
const BundleArtifactType = "application/vnd.dev.sigstore.bundle"

// CosignSignPredicate is the predicate type of the in-toto statement cosign signs for an image:
// a DSSE bundle with any other predicate is an attestation about the image, not its signature.
const CosignSignPredicate = "https://sigstore.dev/cosign/sign/v1"

// maxBundles is the most bundles read for one digest: the first ones that verify suffice, and an
// image with hundreds of attestations attached must not hold a worker.
const maxBundles = 32

// emptyConfig is the config media type of a bundle artifact: a registry that lists referrers by
// their config's media type, ignoring the manifest's artifactType, lists bundles as it.
const emptyConfig = "application/vnd.oci.empty.v1+json"

// Bundles reads the Sigstore bundles attached to image's digest (its repository @ digest): the
// referrers of the digest whose artifact type is a Sigstore bundle, by the OCI referrers API or,
// for a registry without it, the referrers tag scheme. problems say which artifacts could not be
// read, and why; err, why none could be listed.
func (r *Resolver) Bundles(ctx context.Context, image, digest string, keychain authn.Keychain) (bundles [][]byte, problems []string, err error) {
	ref, err := name.ParseReference(image)
	if err != nil {
		return nil, nil, fmt.Errorf("%q is not an image reference: %w", image, err)
	}
	var opts []name.Option
	if slices.Contains(r.Insecure, ref.Context().RegistryStr()) {
		opts = append(opts, name.Insecure)
	}
	d, err := name.NewDigest(ref.Context().Name()+"@"+digest, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("%q is not a digest of %s: %w", digest, ref.Context().Name(), err)
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout())
	defer cancel()
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(keychain),
		remote.WithTransport(guarded{next: remote.DefaultTransport, insecure: r.Insecure})}
	idx, err := remote.Referrers(d, ropts...)
	if err != nil {
		return nil, nil, fmt.Errorf("listing the signatures of %s: %w", d.Name(), err)
	}
	manifest, err := idx.IndexManifest()
	if err != nil {
		return nil, nil, fmt.Errorf("listing the signatures of %s: %w", d.Name(), err)
	}
	// Signatures first: cosign annotates each bundle with its statement's predicate; then other
	// bundles; then what a registry lists by an empty config. Every fetch counts toward
	// maxBundles, so a repository crowded with artifacts costs a bounded number of requests.
	rank := func(m v1.Descriptor) int {
		switch {
		case m.Annotations["dev.sigstore.bundle.predicateType"] == CosignSignPredicate:
			return 0
		case strings.HasPrefix(m.ArtifactType, BundleArtifactType):
			return 1
		case m.ArtifactType == emptyConfig:
			return 2
		}
		return 3 // another kind of artifact (an SBOM, a legacy signature)
	}
	candidates := slices.DeleteFunc(slices.Clone(manifest.Manifests), func(m v1.Descriptor) bool { return rank(m) == 3 })
	slices.SortStableFunc(candidates, func(a, b v1.Descriptor) int { return rank(a) - rank(b) })
	if len(candidates) > maxBundles {
		candidates = candidates[:maxBundles]
	}
	var out [][]byte
	for _, m := range candidates {
		data, err := readBundle(d.Context().Digest(m.Digest.String()), ropts)
		if err != nil {
			// One unreadable artifact, which anyone who may push to the repository can attach,
			// must not hide the others.
			problems = append(problems, fmt.Sprintf("artifact %s: %v", m.Digest, err))
			continue
		}
		if data != nil {
			out = append(out, data)
		}
	}
	return out, problems, nil
}

// readBundle reads the bundle the artifact at ref holds; nil when it is no bundle.
func readBundle(ref name.Digest, ropts []remote.Option) ([]byte, error) {
	img, err := remote.Image(ref, ropts...)
	if err != nil {
		return nil, err
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	if len(layers) != 1 {
		return nil, nil // cosign's bundle artifact has one layer
	}
	if mt, err := layers[0].MediaType(); err != nil || !strings.HasPrefix(string(mt), BundleArtifactType) {
		return nil, nil // an artifact with an empty config that is no bundle
	}
	rc, err := layers[0].Compressed()
	if err != nil {
		return nil, err
	}
	defer func() { _ = rc.Close() }()
	return io.ReadAll(io.LimitReader(rc, maxBody))
}

func (r *Resolver) timeout() time.Duration {
	if r.Timeout == 0 {
		return 30 * time.Second
	}
	return r.Timeout
}

// Trust is whose signatures a set's images must carry: spec.imagePolicy.verify with the keys and
// the trusted root read from their ConfigMaps.
type Trust struct {
	keys       []trustedKey
	identities []identity
	root       *root.TrustedRoot
}

type trustedKey struct {
	name     string
	verifier *verify.Verifier
}

type identity struct {
	name     string
	identity verify.CertificateIdentity
}

// NewTrust compiles spec (spec.imagePolicy.verify). keys holds the PEM of each of spec.Keys, in
// order; rootJSON the trusted root's JSON, nil when spec names none. Each error names the field
// at fault.
func NewTrust(spec *appsv1alpha1.ImageVerification, keys [][]byte, rootJSON []byte) (*Trust, error) {
	t := &Trust{}
	for i, ref := range spec.Keys {
		pub, err := cryptoutils.UnmarshalPEMToPublicKey(keys[i])
		if err != nil {
			return nil, fmt.Errorf("spec.imagePolicy.verify.keys[%d] (ConfigMap %s, key %s) holds no PEM public key: %w", i, ref.Name, ref.Key, err)
		}
		sv, err := signature.LoadDefaultVerifier(pub)
		if err != nil {
			return nil, fmt.Errorf("spec.imagePolicy.verify.keys[%d] (ConfigMap %s, key %s): %w", i, ref.Name, ref.Key, err)
		}
		key := root.NewExpiringKey(sv, time.Time{}, time.Time{})
		material := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) { return key, nil })
		v, err := verify.NewVerifier(material, verify.WithNoObserverTimestamps())
		if err != nil {
			return nil, err
		}
		t.keys = append(t.keys, trustedKey{name: "key " + ref.Name + "/" + ref.Key, verifier: v})
	}
	if rootJSON != nil {
		tr, err := root.NewTrustedRootFromJSON(rootJSON)
		if err != nil {
			return nil, fmt.Errorf("spec.imagePolicy.verify.trustedRoot (ConfigMap %s, key %s) is no Sigstore trusted root: %w",
				spec.TrustedRoot.Name, spec.TrustedRoot.Key, err)
		}
		if len(tr.FulcioCertificateAuthorities()) == 0 {
			return nil, fmt.Errorf("spec.imagePolicy.verify.trustedRoot (ConfigMap %s, key %s) lists no certificate authority: keyless signatures cannot verify against it",
				spec.TrustedRoot.Name, spec.TrustedRoot.Key)
		}
		t.root = tr
	}
	for i, id := range spec.Identities {
		re := id.SubjectRegExp
		if re != "" {
			re = "^(?:" + re + ")$" // the whole subject: a match inside it would let any branch name pass
		}
		ci, err := verify.NewShortCertificateIdentity(id.Issuer, "", id.Subject, re)
		if err != nil {
			return nil, fmt.Errorf("spec.imagePolicy.verify.identities[%d]: %w", i, err)
		}
		who := id.Subject
		if who == "" {
			who = "~" + id.SubjectRegExp
		}
		t.identities = append(t.identities, identity{name: "identity " + id.Issuer + " " + who, identity: ci})
	}
	return t, nil
}

// keylessVerifier verifies certificates against the trusted root, asking of each signature what
// the root says its instance provides: a transparency-log entry when it lists logs, a signed
// timestamp when it lists timestamp authorities only, and the certificate valid now when neither
// (a private authority issuing long-lived certificates).
func (t *Trust) keylessVerifier() (*verify.Verifier, error) {
	var opts []verify.VerifierOption
	switch {
	case len(t.root.RekorLogs()) > 0:
		opts = append(opts, verify.WithTransparencyLog(1), verify.WithObserverTimestamps(1))
	case len(t.root.TimestampingAuthorities()) > 0:
		opts = append(opts, verify.WithSignedTimestamps(1))
	default:
		opts = append(opts, verify.WithCurrentTime())
	}
	if len(t.root.CTLogs()) > 0 {
		opts = append(opts, verify.WithSignedCertificateTimestamps(1))
	}
	return verify.NewVerifier(t.root, opts...)
}

// Verify reports who signed image's digest (sha256:...) among bundles (Bundles' answer): the
// first trusted key or identity whose signature verifies. A bundle counts as the image's
// signature when it is a DSSE in-toto statement of predicate CosignSignPredicate with a subject
// naming the image's repository and the digest, as cosign signs images. The error, when none
// verifies, says why each bundle did not.
func (t *Trust) Verify(image, digest string, bundles [][]byte) (signer string, err error) {
	ref, err := name.ParseReference(image)
	if err != nil {
		return "", fmt.Errorf("%q is not an image reference: %w", image, err)
	}
	repository := ref.Context().Name()
	hexDigest, ok := strings.CutPrefix(digest, "sha256:")
	raw, herr := hex.DecodeString(hexDigest)
	if !ok || herr != nil || len(raw) != sha256.Size {
		return "", fmt.Errorf("%q is not a sha256 digest", digest)
	}
	if len(bundles) == 0 {
		return "", errors.New("it has no signature: the registry lists no Sigstore bundle referring to it (sign it with cosign sign --new-bundle-format, the default from cosign 3)")
	}
	var keyless *verify.Verifier
	if t.root != nil && len(t.identities) > 0 {
		if keyless, err = t.keylessVerifier(); err != nil {
			return "", fmt.Errorf("the trusted root cannot verify: %w", err)
		}
	}
	var why []string
	for i, data := range bundles {
		var b bundle.Bundle
		if err := b.UnmarshalJSON(data); err != nil {
			why = append(why, fmt.Sprintf("bundle %d is not a Sigstore bundle: %v", i+1, err))
			continue
		}
		artifact := verify.WithArtifactDigest("sha256", raw)
		var tried []string
		for _, k := range t.keys {
			res, err := k.verifier.Verify(&b, verify.NewPolicy(artifact, verify.WithKey()))
			if err == nil {
				err = signs(res, repository, hexDigest)
			}
			if err == nil {
				return k.name, nil
			}
			tried = append(tried, fmt.Sprintf("%s: %v", k.name, err))
		}
		if keyless != nil {
			for _, id := range t.identities {
				res, err := keyless.Verify(&b, verify.NewPolicy(artifact, verify.WithCertificateIdentity(id.identity)))
				if err == nil {
					err = signs(res, repository, hexDigest)
				}
				if err == nil {
					return signerOf(id.name, res), nil
				}
				tried = append(tried, fmt.Sprintf("%s: %v", id.name, err))
			}
		}
		why = append(why, fmt.Sprintf("bundle %d: %s", i+1, strings.Join(tried, "; ")))
	}
	return "", fmt.Errorf("no trusted signer signed it: %s", strings.Join(why, "; "))
}

// signs checks that a verified bundle is the signature of repository@hexDigest: an in-toto
// statement of predicate CosignSignPredicate with a subject naming both. An attestation about
// the image is no signature; nor is a message signature, which names no repository (another
// image with the same signer, or a manifest signed as a blob, would pass for this one).
func signs(res *verify.VerificationResult, repository, hexDigest string) error {
	st := res.Statement
	if st == nil {
		return errors.New("it is a message signature, which names no image: sign the image with cosign sign (an in-toto statement naming it)")
	}
	if st.GetPredicateType() != CosignSignPredicate {
		return fmt.Errorf("it is an attestation (predicate %s), not a signature (predicate %s)", st.GetPredicateType(), CosignSignPredicate)
	}
	var named []string
	for _, s := range st.GetSubject() {
		if s.GetDigest()["sha256"] != hexDigest {
			continue
		}
		if repo, err := name.NewRepository(s.GetName()); err == nil && repo.Name() == repository {
			return nil
		}
		named = append(named, s.GetName())
	}
	return fmt.Errorf("it signs the digest as %q, not as %s: a signature for another repository", named, repository)
}

// signerOf names a keyless signer by the subject its certificate gives, for an identity matched
// by a regular expression.
func signerOf(name string, res *verify.VerificationResult) string {
	if res.VerifiedIdentity == nil || res.Signature == nil || res.Signature.Certificate == nil {
		return name
	}
	cert := res.Signature.Certificate
	return "identity " + cert.Issuer + " " + cert.SubjectAlternativeName
}
