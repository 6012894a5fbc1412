package images

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// testRegistry serves an in-memory registry on 127.0.0.1 over plain HTTP; with a user, every
// request needs that user's basic credentials. It returns the registry's host:port.
func testRegistry(t *testing.T, user, password string) string {
	t.Helper()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	handler := reg
	if user != "" {
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			reg.ServeHTTP(w, r)
		})
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// push writes a random image to ref and returns its digest.
func push(t *testing.T, ref string, opts ...remote.Option) v1.Hash {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img, opts...); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDigest: the digest a tag names, read again after the tag moved; an image that is not
// there and a registry that needs credentials fail, with the reference named.
func TestDigest(t *testing.T) {
	host := testRegistry(t, "", "")
	r := &Resolver{Insecure: []string{host}, Timeout: 10 * time.Second}
	ctx := context.Background()
	image := host + "/agent:1.0"
	first := push(t, image)
	got, err := r.Digest(ctx, image, authn.NewMultiKeychain())
	if err != nil || got != first.String() {
		t.Fatalf("Digest(%s) = %s, %v; want %s", image, got, err, first)
	}
	moved := push(t, image)
	if got, err = r.Digest(ctx, image, authn.NewMultiKeychain()); err != nil || got != moved.String() {
		t.Errorf("after the tag moved, Digest(%s) = %s, %v; want %s", image, got, err, moved)
	}
	if _, err := r.Digest(ctx, host+"/missing:1.0", authn.NewMultiKeychain()); err == nil || !strings.Contains(err.Error(), host+"/missing:1.0") {
		t.Errorf("an image that is not there: err = %v, want one naming it", err)
	}
	if _, err := r.Digest(ctx, "UPPER/case:1", authn.NewMultiKeychain()); err == nil || !strings.Contains(err.Error(), "not an image reference") {
		t.Errorf("a reference that does not parse: err = %v", err)
	}

	private := testRegistry(t, "puller", "s3cret")
	creds := authn.FromConfig(authn.AuthConfig{Username: "puller", Password: "s3cret"})
	want := push(t, private+"/agent:1.0", remote.WithAuth(creds))
	r = &Resolver{Insecure: []string{private}}
	if _, err := r.Digest(ctx, private+"/agent:1.0", authn.NewMultiKeychain()); err == nil {
		t.Error("a registry that needs credentials answered without them")
	}
	got, err = r.Digest(ctx, private+"/agent:1.0", keychainFor(private, creds))
	if err != nil || got != want.String() {
		t.Errorf("with credentials: Digest() = %s, %v; want %s", got, err, want)
	}
}

// oneRegistry is a keychain with credentials for one registry.
type oneRegistry struct {
	host string
	auth authn.Authenticator
}

func (k oneRegistry) Resolve(r authn.Resource) (authn.Authenticator, error) {
	if r.RegistryStr() == k.host {
		return k.auth, nil
	}
	return authn.Anonymous, nil
}

// keychainFor gives auth for host only.
func keychainFor(host string, auth authn.Authenticator) authn.Keychain {
	return oneRegistry{host, auth}
}

func TestNext(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	then := metav1.NewTime(now.Add(-time.Hour))
	const (
		a = "sha256:aaaa"
		b = "sha256:bbbb"
	)
	boom := errors.New("registry unreachable")
	tests := []struct {
		name          string
		wanted        []string
		results       []Result
		previous      []appsv1alpha1.ResolvedImage
		refresh       bool
		want          []appsv1alpha1.ResolvedImage
		wantRefreshed bool
	}{
		{name: "first resolution", wanted: []string{"x:1"}, results: []Result{{Digest: a}},
			want: []appsv1alpha1.ResolvedImage{{Image: "x:1", Digest: a, ResolvedAt: &now}}, wantRefreshed: true},
		{name: "the same digest again keeps when", wanted: []string{"x:1"}, results: []Result{{Digest: a}},
			previous: []appsv1alpha1.ResolvedImage{{Image: "x:1", Digest: a, ResolvedAt: &then}},
			want:     []appsv1alpha1.ResolvedImage{{Image: "x:1", Digest: a, ResolvedAt: &then}}, wantRefreshed: true},
		{name: "a moved tag keeps the pin and says where it moved", wanted: []string{"x:1"}, results: []Result{{Digest: b}},
			previous: []appsv1alpha1.ResolvedImage{{Image: "x:1", Digest: a, ResolvedAt: &then}},
			want:     []appsv1alpha1.ResolvedImage{{Image: "x:1", Digest: a, ResolvedAt: &then, Latest: b}}, wantRefreshed: true},
		{name: "moved back", wanted: []string{"x:1"}, results: []Result{{Digest: a}},
			previous: []appsv1alpha1.ResolvedImage{{Image: "x:1", Digest: a, ResolvedAt: &then, Latest: b}},
			want:     []appsv1alpha1.ResolvedImage{{Image: "x:1", Digest: a, ResolvedAt: &then}}, wantRefreshed: true},
		{name: "a refresh takes the moved tag", wanted: []string{"x:1"}, results: []Result{{Digest: b}}, refresh: true,
			previous: []appsv1alpha1.ResolvedImage{{Image: "x:1", Digest: a, ResolvedAt: &then, Latest: b}},
			want:     []appsv1alpha1.ResolvedImage{{Image: "x:1", Digest: b, ResolvedAt: &now}}, wantRefreshed: true},
		{name: "a failure keeps the pin and says why", wanted: []string{"x:1", "y:1"}, results: []Result{{Err: boom}, {Digest: b}}, refresh: true,
			previous: []appsv1alpha1.ResolvedImage{{Image: "x:1", Digest: a, ResolvedAt: &then}},
			want: []appsv1alpha1.ResolvedImage{{Image: "x:1", Digest: a, ResolvedAt: &then, Error: boom.Error()},
				{Image: "y:1", Digest: b, ResolvedAt: &now}}, wantRefreshed: false},
		{name: "a refresh with a failure moves no digest", wanted: []string{"x:1", "y:1"}, results: []Result{{Digest: b}, {Err: boom}}, refresh: true,
			previous: []appsv1alpha1.ResolvedImage{{Image: "x:1", Digest: a, ResolvedAt: &then}, {Image: "y:1", Digest: a, ResolvedAt: &then}},
			want: []appsv1alpha1.ResolvedImage{{Image: "x:1", Digest: a, ResolvedAt: &then, Latest: b},
				{Image: "y:1", Digest: a, ResolvedAt: &then, Error: boom.Error()}}, wantRefreshed: false},
		{name: "a registry's whole page is cut", wanted: []string{"x:1"}, results: []Result{{Err: errors.New(strings.Repeat("<html>", 1000))}},
			want: []appsv1alpha1.ResolvedImage{{Image: "x:1", Error: strings.Repeat("<html>", 1000)[:MaxError-3] + "..."}}, wantRefreshed: false},
		{name: "a failure before any digest", wanted: []string{"x:1"}, results: []Result{{Err: boom}},
			want: []appsv1alpha1.ResolvedImage{{Image: "x:1", Error: boom.Error()}}, wantRefreshed: false},
		{name: "an image no longer named goes", wanted: []string{"y:1"}, results: []Result{{Digest: b}},
			previous: []appsv1alpha1.ResolvedImage{{Image: "x:1", Digest: a, ResolvedAt: &then}},
			want:     []appsv1alpha1.ResolvedImage{{Image: "y:1", Digest: b, ResolvedAt: &now}}, wantRefreshed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prev := make([]appsv1alpha1.ResolvedImage, len(tt.previous))
			for i := range tt.previous {
				tt.previous[i].DeepCopyInto(&prev[i])
			}
			got, refreshed := Next(tt.wanted, tt.results, tt.previous, tt.refresh, now)
			if len(got) != len(tt.want) {
				t.Fatalf("Next() = %+v, want %+v", got, tt.want)
			}
			for i := range got {
				g, w := got[i], tt.want[i]
				if g.Image != w.Image || g.Digest != w.Digest || g.Latest != w.Latest || g.Error != w.Error ||
					(g.ResolvedAt == nil) != (w.ResolvedAt == nil) || (g.ResolvedAt != nil && !g.ResolvedAt.Equal(w.ResolvedAt)) {
					t.Errorf("entry %d = %+v, want %+v", i, g, w)
				}
			}
			if refreshed != tt.wantRefreshed {
				t.Errorf("refreshed = %v, want %v", refreshed, tt.wantRefreshed)
			}
			for i := range prev {
				if prev[i] != tt.previous[i] && (prev[i].ResolvedAt == nil || !prev[i].ResolvedAt.Equal(tt.previous[i].ResolvedAt) ||
					prev[i].Digest != tt.previous[i].Digest || prev[i].Latest != tt.previous[i].Latest || prev[i].Error != tt.previous[i].Error) {
					t.Errorf("Next modified previous[%d]", i)
				}
			}
		})
	}
}

// TestGuardedTransport: plain HTTP only to a listed or loopback registry; answers read up to
// maxBody bytes.
func TestGuardedTransport(t *testing.T) {
	var sent []string
	next := roundTripper(func(req *http.Request) (*http.Response, error) {
		sent = append(sent, req.URL.String())
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader(strings.Repeat("x", maxBody+100)))}, nil
	})
	g := guarded{next: next, insecure: []string{"registry.lab:5000"}}
	for url, allowed := range map[string]bool{
		"https://10.0.0.7:5000/v2/":    true,
		"http://10.0.0.7:5000/v2/":     false,
		"http://registry.local/v2/":    false,
		"http://registry.lab:5000/v2/": true,
		"http://127.0.0.1:5000/v2/":    true,
		"http://localhost:5000/v2/":    true,
		"http://[::1]:5000/v2/":        true,
		"http://registry.lab:5001/v2/": false,
	} {
		req, err := http.NewRequest(http.MethodHead, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		sent = nil
		resp, err := g.RoundTrip(req)
		if allowed != (err == nil) || allowed != (len(sent) == 1) {
			t.Errorf("%s: err %v, sent %v; want allowed %v", url, err, sent, allowed)
			continue
		}
		if err != nil {
			if !strings.Contains(err.Error(), "--insecure-registries") {
				t.Errorf("%s: refusal %q does not say how to allow it", url, err)
			}
			continue
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || len(body) != maxBody {
			t.Errorf("%s: read %d bytes (%v), want %d", url, len(body), err, maxBody)
		}
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
