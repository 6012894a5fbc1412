package inject_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/test/builders"
)

func TestParseRecords(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        inject.Records
		wantErr     bool
	}{
		{name: "no annotations", annotations: nil, want: nil},
		{name: "no status annotation", annotations: map[string]string{"team": "shop"}, want: nil},
		{name: "empty value", annotations: map[string]string{appsv1alpha1.StatusAnnotation: ""}, want: nil},
		{name: "empty object", annotations: map[string]string{appsv1alpha1.StatusAnnotation: "{}"}, want: inject.Records{}},
		{
			name: "as the operator writes it",
			annotations: map[string]string{appsv1alpha1.StatusAnnotation: `{"log-agent":{"hash":"80537cf62621b3ac","containers":["log-agent"],"volumes":["fluent-bit-config"]},` +
				`"mesh-proxy":{"hash":"8888f328aec669ba","initContainers":["mesh-proxy"],"imagePullSecrets":["ghcr-example"]}}`},
			want: inject.Records{
				"log-agent":  {Hash: "80537cf62621b3ac", Containers: []string{"log-agent"}, Volumes: []string{"fluent-bit-config"}},
				"mesh-proxy": {Hash: "8888f328aec669ba", InitContainers: []string{"mesh-proxy"}, ImagePullSecrets: []string{"ghcr-example"}},
			},
		},
		{name: "truncated", annotations: map[string]string{appsv1alpha1.StatusAnnotation: `{"log-agent":{"hash":"x"`}, wantErr: true},
		{name: "a list", annotations: map[string]string{appsv1alpha1.StatusAnnotation: `["log-agent"]`}, wantErr: true},
		{name: "record is a string", annotations: map[string]string{appsv1alpha1.StatusAnnotation: `{"log-agent":"80537cf62621b3ac"}`}, wantErr: true},
		{name: "containers is a string", annotations: map[string]string{appsv1alpha1.StatusAnnotation: `{"log-agent":{"hash":"x","containers":"log-agent"}}`}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := inject.ParseRecords(tt.annotations)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ParseRecords() = %v, want an error", got)
				}
				// The message is shown to users whose pod is refused: it must name the annotation
				// and say what to do.
				if msg := err.Error(); !strings.Contains(msg, appsv1alpha1.StatusAnnotation) || !strings.Contains(msg, "remove it") {
					t.Errorf("ParseRecords() error = %q, want it to name %s and the fix", msg, appsv1alpha1.StatusAnnotation)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseRecords() error = %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseRecords() = %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestRecordsEncodeRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		records inject.Records
		want    string
	}{
		{name: "empty", records: inject.Records{}, want: `{}`},
		{name: "hash only", records: inject.Records{"log-agent": {Hash: "80537cf62621b3ac"}}, want: `{"log-agent":{"hash":"80537cf62621b3ac"}}`},
		{
			name: "every field, keys sorted",
			records: inject.Records{
				"mesh-proxy": {Hash: "2", InitContainers: []string{"mesh-proxy"}, Volumes: []string{"mesh-certs", "mesh-token"}, ImagePullSecrets: []string{"ghcr"}},
				"log-agent":  {Hash: "1", Containers: []string{"log-agent", "log-rotate"}},
			},
			want: `{"log-agent":{"hash":"1","containers":["log-agent","log-rotate"]},` +
				`"mesh-proxy":{"hash":"2","initContainers":["mesh-proxy"],"volumes":["mesh-certs","mesh-token"],"imagePullSecrets":["ghcr"]}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			encoded := tt.records.Encode()
			if encoded != tt.want {
				t.Errorf("Encode() = %s, want %s", encoded, tt.want)
			}
			parsed, err := inject.ParseRecords(map[string]string{appsv1alpha1.StatusAnnotation: encoded})
			if err != nil {
				t.Fatalf("ParseRecords(Encode()) error = %v", err)
			}
			if !reflect.DeepEqual(parsed, tt.records) {
				t.Errorf("ParseRecords(Encode()) = %#v, want %#v", parsed, tt.records)
			}
			if again := parsed.Encode(); again != encoded {
				t.Errorf("Encode() is not stable: %s, then %s", encoded, again)
			}
		})
	}
}

func TestRecordsNames(t *testing.T) {
	r := inject.Records{"mesh-proxy": {}, "auth-proxy": {}, "log-agent": {}}
	if got, want := r.Names(), []string{"auth-proxy", "log-agent", "mesh-proxy"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
	if got := (inject.Records{}).Names(); len(got) != 0 {
		t.Errorf("Names() of no records = %v, want none", got)
	}
}

func TestInjectedHash(t *testing.T) {
	annotations := map[string]string{appsv1alpha1.StatusAnnotation: `{"log-agent":{"hash":"80537cf62621b3ac","containers":["log-agent"]}}`}
	tests := []struct {
		name        string
		annotations map[string]string
		set         string
		wantHash    string
		wantOK      bool
	}{
		{name: "recorded", annotations: annotations, set: "log-agent", wantHash: "80537cf62621b3ac", wantOK: true},
		{name: "other set", annotations: annotations, set: "mesh-proxy"},
		{name: "no annotation", annotations: nil, set: "log-agent"},
		{name: "malformed annotation names no set", annotations: map[string]string{appsv1alpha1.StatusAnnotation: `{"log-agent":`}, set: "log-agent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hash, ok := inject.InjectedHash(tt.annotations, tt.set)
			if hash != tt.wantHash || ok != tt.wantOK {
				t.Errorf("InjectedHash() = %q, %v, want %q, %v", hash, ok, tt.wantHash, tt.wantOK)
			}
		})
	}
}

func TestRefusedErrorMessage(t *testing.T) {
	tests := []struct {
		name string
		err  inject.RefusedError
		want string
	}{
		{
			name: "clash with a SidecarSet",
			err:  inject.RefusedError{SidecarSet: "log-agent", Field: "spec.containers[0].name", Detail: "clash"},
			want: `SidecarSet "log-agent" spec.containers[0].name: clash`,
		},
		{
			name: "the pod itself is at fault",
			err:  inject.RefusedError{Field: "metadata.annotations[sidecarset.io/status]", Detail: "unreadable"},
			want: `pod metadata.annotations[sidecarset.io/status]: unreadable`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}

// recordAnnotations are status annotations as the operator writes them and as a pod's author
// may write them by hand, each a way the fast reader could part from ParseRecords: a set's key
// nested in another set's record (which ParseRecords ignores as an unknown field), repeated
// keys (the decoder keeps the last), keys in other cases or spelled with escapes, a record of
// the wrong type elsewhere (ParseRecords fails, and names no set), whitespace, null.
func recordAnnotations() []string {
	return []string{
		inject.Records{"a": {Hash: "0123abcd"}, "b": {Hash: "ffff", Containers: []string{"x"}}, "ab": {Hash: "1"}}.Encode(),
		inject.Records{"a": {Hash: "0123abcd", Containers: []string{"c"}, InitContainers: []string{"i"}, Volumes: []string{"v"},
			ImagePullSecrets: []string{"p"}, NotShared: []string{`data (/data): "Bidirectional" <propagation> \ é`}}}.Encode(),
		`{"b":{"containers":["a"],"hash":"beef"},"a":{"hash":"cafe"}}`,
		`{ "a" : { "hash" : "cafe" } }`,
		`{"xa":{"hash":"dead"},"a":{"hash":"NOT-HEX"}}`,
		`{"a":{"hash":"cafe"`,
		`{"a":{"hash":"cafe"},"a":{"hash":"beef"}}`,
		`{"b":{"hash":"1","a":{"hash":"cafe"}}}`,
		`{"b":{"hash":"1","x":{"a":{"hash":"cafe"}}}}`,
		`{"b":{"hash":"1","containers":["x"],"a":{"hash":"cafe"}},"c":{"hash":"2"}}`,
		`{"b":{"hash":"1"},"a":{"hash":"cafe","hash":"beef"}}`,
		`{"a":{"hash":"cafe","Hash":"beef"}}`,
		`{"a":{"hash":"cafe"},"\u0061":{"hash":"beef"}}`,
		`{"\u0061":{"hash":"beef"},"a":{"hash":"cafe"}}`,
		`{"a":{"hash":"ca\u0066e"}}`,
		`{"a":{"hash":"cafe"},"b":"x"}`,
		inject.Records{"a": {Hash: "cafe", Containers: []string{"a"}, Padded: &corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}.Encode(),
		`{"a":{"hash":"cafe","padded":{"requests":{"cpu":"1"},"limits":{"cpu":"1"}}}}`,
		`{"a":{"hash":"cafe","padded":{"claims":[{"name":"x"}]}}}`,
		inject.Records{"a": {Hash: "cafe", Containers: []string{"c", "a"}, Annotations: map[string]string{"k": "v", "l": `{"x":1}`},
			Overrides: map[string]string{"o": "500m"}}, "b": {Hash: "1", Overrides: map[string]string{"o": "1"}}}.Encode(),
		`{"a":{"hash":"cafe","containers":["c"],"annotations":{"k":1}}}`,
		`{"a":{"hash":"cafe","annotations":{"k":"v","k":"w"}}}`,
		`{"a":{"hash":"cafe","overrides":{}}}`,
		`{"a":{"hash":"cafe","annotations":null}}`,
		`{"a":{"hash":"cafe","overrides":{"o":"1"},"annotations":{"k":"v"}}}`,
		`{"a":{"hash":"cafe","containers":["c","\u0061"]}}`,
		`{"a":{"hash":"cafe","containers":"x"}}`,
		`{"a":{"hash":"cafe","containers":null}}`,
		`{"a":{"hash":"cafe","other":1}}`,
		`{"a":null}`,
		`{"a":{"hash":"cafe"}} `,
		`{"a":{"hash":"cafe"}}x`,
		`{"a":{"hash":"cafe","containers":["\x"]}}`,
		`{"a":{"hash":"cafe","containers":["\u00e9\uD83D\uDE00"]}}`,
		`null`,
		`not json`,
		`{}`,
		``,
	}
}

// agreesWithParseRecords fails the test when InjectedHash and ParseRecords disagree on raw.
func agreesWithParseRecords(t *testing.T, raw, set string) {
	t.Helper()
	ann := map[string]string{appsv1alpha1.StatusAnnotation: raw}
	got, gotOK := inject.InjectedHash(ann, set)
	recs, err := inject.ParseRecords(ann)
	rec, wantOK := recs[set]
	if err != nil {
		rec, wantOK = inject.Record{}, false
	}
	if got != rec.Hash || gotOK != wantOK {
		t.Errorf("InjectedHash(%q, %q) = %q, %v; ParseRecords says %q, %v", raw, set, got, gotOK, rec.Hash, wantOK)
	}
	// UnlistedSidecars reads the same fast path for the lists.
	declared := builders.SidecarSet(set, builders.Selecting("web"), builders.WithContainers(
		corev1.Container{Name: "c", Image: "c"}, corev1.Container{Name: "x", Image: "x"}, corev1.Container{Name: "a", Image: "a"}))
	declared.Spec.InitContainers = []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "i", Image: "i"}}}
	c, err := inject.Compile(declared)
	if err != nil {
		t.Skipf("set name %q: %v", set, err)
	}
	var want []string
	if wantOK {
		for _, l := range []struct {
			declared []string
			listed   []string
		}{{[]string{"i"}, rec.InitContainers}, {[]string{"c", "x", "a"}, rec.Containers}} {
			for _, d := range l.declared {
				if !slices.Contains(l.listed, d) {
					want = append(want, d)
				}
			}
		}
	}
	if unlisted := inject.UnlistedSidecars(ann, c); !slices.Equal(unlisted, want) {
		t.Errorf("UnlistedSidecars(%q, %q) = %q; ParseRecords says %q", raw, set, unlisted, want)
	}
	// InjectionOf reads both in one pass, the lists only for the set's current hash.
	wantOwn := want
	if rec.Hash != c.Hash {
		wantOwn = nil
	}
	if hash, found, own := inject.InjectionOf(ann, c); hash != rec.Hash || found != wantOK || !slices.Equal(own, wantOwn) {
		t.Errorf("InjectionOf(%q, %q) = %q, %v, %q; ParseRecords says %q, %v, %q", raw, set, hash, found, own, rec.Hash, wantOK, wantOwn)
	}
}

// TestInjectedHashAgreesWithParseRecords: the fast path of InjectedHash must give exactly what
// parsing the annotation gives, for the form Encode writes and for hand-written variants.
func TestInjectedHashAgreesWithParseRecords(t *testing.T) {
	for _, raw := range recordAnnotations() {
		for _, set := range []string{"a", "b", "ab", "xa", "missing"} {
			agreesWithParseRecords(t, raw, set)
		}
	}
}

// FuzzInjectedHash: InjectedHash and ParseRecords agree on every annotation and set name.
func FuzzInjectedHash(f *testing.F) {
	for _, raw := range recordAnnotations() {
		f.Add(raw, "a")
	}
	f.Fuzz(agreesWithParseRecords)
}

func BenchmarkInjectedHash(b *testing.B) {
	ann := map[string]string{appsv1alpha1.StatusAnnotation: inject.Records{
		"log-agent": {Hash: "0123456789abcdef", Containers: []string{"log-agent"}, Volumes: []string{"log-agent-config"}},
		"proxy":     {Hash: "fedcba9876543210", InitContainers: []string{"proxy"}, ImagePullSecrets: []string{"registry"}},
	}.Encode()}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := inject.InjectedHash(ann, "proxy"); !ok {
			b.Fatal("not found")
		}
	}
}
