// Package sigstoretest signs images in tests as cosign does, without any Sigstore service: a
// key pair, or a certificate authority of the test's own that certifies keyless identities and
// writes the trusted root that verifies them; and it attaches the signatures to images in a
// registry the way cosign does (a Sigstore bundle referring to the image's digest).
package sigstoretest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/json"
	"fmt"
	"math/big"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sidecarset/sidecarset-operator/internal/images"
)

// BundleMediaType is the media type of the bundles Signer writes, and of the artifacts Attach
// pushes.
const BundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json"

// Signer signs image digests with one key, certified by a CA or not.
type Signer struct {
	keypair *sign.EphemeralKeypair
	cert    sign.CertificateProvider
}

// NewKeySigner is a signer with a fresh key and no certificate (`cosign sign --key`).
func NewKeySigner() (*Signer, error) {
	kp, err := sign.NewEphemeralKeypair(nil)
	if err != nil {
		return nil, err
	}
	return &Signer{keypair: kp}, nil
}

// PublicKeyPEM is the signer's public key, as cosign.pub holds it.
func (s *Signer) PublicKeyPEM() string {
	pem, err := s.keypair.GetPublicKeyPem()
	if err != nil {
		panic(err) // an ECDSA key always encodes
	}
	return pem
}

// Sign is the bundle of the signature cosign makes for repository@digest: a DSSE in-toto
// statement of predicate images.CosignSignPredicate whose subject is the digest.
func (s *Signer) Sign(repository, digest string) ([]byte, error) {
	return s.Attest(repository, digest, images.CosignSignPredicate)
}

// Attest is a bundle of an in-toto statement about repository@digest with predicateType.
func (s *Signer) Attest(repository, digest, predicateType string) ([]byte, error) {
	hexDigest, ok := strings.CutPrefix(digest, "sha256:")
	if !ok {
		return nil, fmt.Errorf("%q is not a sha256 digest", digest)
	}
	statement, err := json.Marshal(map[string]any{
		"_type":         "https://in-toto.io/Statement/v1",
		"subject":       []any{map[string]any{"name": repository, "digest": map[string]string{"sha256": hexDigest}}},
		"predicateType": predicateType,
		"predicate":     map[string]any{},
	})
	if err != nil {
		return nil, err
	}
	return s.bundle(&sign.DSSEData{Data: statement, PayloadType: "application/vnd.in-toto+json"})
}

// SignMessage is the bundle of a message signature over data (an image's manifest: the
// message digest is then the image's digest).
func (s *Signer) SignMessage(data []byte) ([]byte, error) {
	return s.bundle(&sign.PlainData{Data: data})
}

func (s *Signer) bundle(content sign.Content) ([]byte, error) {
	b, err := sign.Bundle(content, s.keypair, sign.BundleOptions{CertificateProvider: s.cert, Context: context.Background()})
	if err != nil {
		return nil, err
	}
	return protojson.Marshal(b)
}

// CA is a certificate authority of the test's own, standing for a private Fulcio.
type CA struct {
	key  *ecdsa.PrivateKey
	cert *x509.Certificate
}

// NewCA makes a CA valid from an hour ago for a day.
func NewCA() (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sidecarset test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{key: key, cert: cert}, nil
}

// TrustedRoot is the JSON of a trusted root listing the CA only: no transparency log, no
// timestamp authority (certificates are checked at the time of verification).
func (ca *CA) TrustedRoot() ([]byte, error) {
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01,
		[]root.CertificateAuthority{&root.FulcioCertificateAuthority{Root: ca.cert, ValidityPeriodStart: ca.cert.NotBefore,
			URI: "https://fulcio.test"}}, nil, nil, nil)
	if err != nil {
		return nil, err
	}
	return tr.MarshalJSON()
}

// Signer is a keyless signer whose certificate names issuer and subject (a URI), valid from
// notBefore to notAfter.
func (ca *CA) Signer(issuer, subject string, notBefore, notAfter time.Time) (*Signer, error) {
	kp, err := sign.NewEphemeralKeypair(nil)
	if err != nil {
		return nil, err
	}
	return &Signer{keypair: kp, cert: certifier{ca: ca, issuer: issuer, subject: subject, notBefore: notBefore, notAfter: notAfter}}, nil
}

// certifier issues the signer's certificate as Fulcio would: the subject as a URI SAN, the
// issuer in Fulcio's OIDC issuer (v2) extension, for code signing.
type certifier struct {
	ca                  *CA
	issuer, subject     string
	notBefore, notAfter time.Time
}

var oidIssuerV2 = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 8}

func (c certifier) GetCertificate(_ context.Context, kp sign.Keypair, _ *sign.CertificateProviderOptions) ([]byte, error) {
	san, err := url.Parse(c.subject)
	if err != nil {
		return nil, err
	}
	issuer, err := asn1.MarshalWithParams(c.issuer, "utf8")
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, NotBefore: c.notBefore, NotAfter: c.notAfter,
		URIs: []*url.URL{san}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
		ExtraExtensions: []pkix.Extension{{Id: oidIssuerV2, Value: issuer}},
	}
	return x509.CreateCertificate(rand.Reader, tmpl, c.ca.cert, kp.GetPublicKey(), c.ca.key)
}

// Attach pushes bundle to the registry as cosign does: an OCI artifact of type
// BundleMediaType whose subject is image (repository@digest), found by the referrers API or
// its tag scheme.
func Attach(image name.Digest, bundle []byte, opts ...remote.Option) error {
	desc, err := remote.Head(image, opts...)
	if err != nil {
		return err
	}
	layer := static.NewLayer(bundle, BundleMediaType)
	art, err := mutate.Append(empty.Image, mutate.Addendum{Layer: layer, MediaType: BundleMediaType})
	if err != nil {
		return err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(art, types.OCIManifestSchema1), types.MediaType("application/vnd.oci.empty.v1+json"))
	img = mutate.Subject(img, v1.Descriptor{MediaType: desc.MediaType, Digest: desc.Digest, Size: desc.Size}).(v1.Image)
	img = artifactType{Image: img, artifactType: BundleMediaType}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	return remote.Write(image.Context().Digest(d.String()), img, opts...)
}

// artifactType sets the manifest's artifactType, which go-containerregistry's mutate does not.
type artifactType struct {
	v1.Image
	artifactType string
}

func (a artifactType) Manifest() (*v1.Manifest, error) {
	m, err := a.Image.Manifest()
	if err != nil {
		return nil, err
	}
	m = m.DeepCopy()
	m.ArtifactType = a.artifactType
	return m, nil
}

func (a artifactType) RawManifest() ([]byte, error) {
	m, err := a.Manifest()
	if err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

func (a artifactType) Digest() (v1.Hash, error) {
	raw, err := a.RawManifest()
	if err != nil {
		return v1.Hash{}, err
	}
	h, _, err := v1.SHA256(strings.NewReader(string(raw)))
	return h, err
}
