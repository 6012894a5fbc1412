package webhook

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// headCases are pods in the shapes the fast decoder takes and the ones it leaves to the JSON
// decoder; fast says which.
func headCases(t testing.TB) map[string]struct {
	raw  string
	fast bool
} {
	realistic, err := json.Marshal(realisticPod())
	if err != nil {
		t.Fatal(err)
	}
	return map[string]struct {
		raw  string
		fast bool
	}{
		"realistic pod": {string(realistic), true},
		"empty":         {`{}`, true},
		"nulls":         {`{"metadata":null,"spec":{"containers":null,"initContainers":[null],"volumes":null,"hostNetwork":null}}`, true},
		"empty lists and maps": {`{"metadata":{"labels":{},"annotations":{}},"spec":{"containers":[],"volumes":[],"imagePullSecrets":[]}}`,
			true},
		"raw env and mounts": {`{"spec":{"containers":[{"name":"a","env":[{"name":"X","value":"1"}],"volumeMounts":null,` +
			`"ports":[{"containerPort":80,"x":-1.5e+3}],"y":[true,false,null,"\u00e9\n"]}],"hostNetwork":true}}`, true},
		"unknown members everywhere": {`{"kind":"Pod","status":{"phase":"Pending","n":0},"metadata":{"uid":"u","ownerReferences":[{}]},` +
			`"spec":{"nodeName":"n","volumes":[{"name":"v","emptyDir":{}}],"imagePullSecrets":[{"name":"s","x":{}}]}}`, true},
		"non-ASCII key skipped":   {`{"métadonnées":1,"metadata":{"name":"p"}}`, true},
		"repeated ignored member": {`{"status":{},"status":1,"metadata":{"labels":{"a":"1","a":"2"}}}`, true},
		"whitespace":              {" {\n\t\"metadata\" : { \"name\" : \"p\" } , \"spec\" : { \"containers\" : [ { \"name\" : \"a\" } ] } }\n", true},
		// Escaped keys: in every pod's managedFields, and a name the scanner reads, spelled with escapes.
		"managedFields":       {`{"metadata":{"name":"p","managedFields":[{"fieldsV1":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{}}}}}}]}}`, true},
		"escaped member name": {`{"metad\u0061ta":{"name":"p"},"spec":{"containers":[{"na\u006de":"a"}]}}`, true},
		"escaped label key":   {`{"metadata":{"labels":{"a\/b":"x"}}}`, true},
		"lone surrogate key":  {`{"\ud800":1,"metadata":{"name":"p"}}`, true},
		// Values with escapes or beyond ASCII: annotations holding JSON or text.
		"escaped value":       {`{"metadata":{"name":"p","labels":{"a":"b\u0041"}}}`, true},
		"non-ASCII value":     {`{"metadata":{"annotations":{"a":"é"}}}`, true},
		"JSON annotation":     {`{"metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"apiVersion\":\"v1\",\"kind\":\"Pod\"}\n"}}}`, true},
		"invalid UTF-8 value": {"{\"metadata\":{\"annotations\":{\"a\":\"\xff\xfe\"}}}", true},

		"non-ASCII label key":         {`{"metadata":{"labels":{"é":"x"}}}`, false},
		"null label value":            {`{"metadata":{"labels":{"a":null}}}`, false},
		"repeated member":             {`{"metadata":{"name":"a"},"metadata":{"namespace":"b"}}`, false},
		"repeated name":               {`{"spec":{"containers":[{"name":"a","name":"b"}]}}`, false},
		"wrong type":                  {`{"metadata":{"name":5}}`, false},
		"containers object":           {`{"spec":{"containers":{}}}`, false},
		"hostNetwork string":          {`{"spec":{"hostNetwork":"true"}}`, false},
		"null pod":                    {`null`, false},
		"bad number":                  {`{"x":01}`, false},
		"bad literal":                 {`{"x":tru}`, false},
		"bad escape":                  {`{"x":"\q"}`, false},
		"control character":           {"{\"x\":\"a\tb\"}", false},
		"control in key":              {"{\"x\ty\":1}", false},
		"bad escape in key":           {`{"x\q":1}`, false},
		"bad escape in a value":       {`{"metadata":{"annotations":{"a":"\x"}}}`, false},
		"control in a value":          {"{\"metadata\":{\"annotations\":{\"a\":\"\t\"}}}", false},
		"bad escape in a skipped key": {`{"status":{"x\q":1}}`, false},
		"control in a skipped key":    {"{\"status\":{\"x\ty\":1}}", false},
		"escaped repeat":              {`{"metadata":{"name":"a","na\u006de":"b"}}`, false},
		"escaped non-ASCII label key": {`{"metadata":{"labels":{"\u00e9":"x"}}}`, false},
		"trailing data":               {`{} {}`, false},
		"truncated":                   {`{"metadata":{"name":"p"`, false},
		"deep":                        {`{"x":` + string(bytes.Repeat([]byte("["), maxHeadDepth+5)) + string(bytes.Repeat([]byte("]"), maxHeadDepth+5)) + `}`, false},
	}
}

// TestDecodeHead: the fast decoder takes the shapes pods come in, leaves the rest to the JSON
// decoder, and the result is always the JSON decoder's.
func TestDecodeHead(t *testing.T) {
	for name, c := range headCases(t) {
		t.Run(name, func(t *testing.T) {
			var fast headView
			s := scanner{b: []byte(c.raw)}
			err := s.podHead(&fast)
			s.space()
			if took := err == nil && s.i == len(c.raw); took != c.fast {
				t.Errorf("fast path took it: %v, want %v (%v)", took, c.fast, err)
			}
			sameAsJSON(t, []byte(c.raw))
		})
	}
}

func sameAsJSON(t *testing.T, raw []byte) {
	t.Helper()
	var got, want headView
	gotErr, wantErr := decodeHead(raw, &got), unmarshal(raw, &want)
	if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
		t.Fatalf("errors differ for %q: %v, JSON decoder %v", raw, gotErr, wantErr)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("decoded differently for %q (-JSON decoder +ours):\n%s", raw, diff)
	}
}

func FuzzDecodeHead(f *testing.F) {
	for _, c := range headCases(f) {
		f.Add([]byte(c.raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { sameAsJSON(t, raw) })
}

// BenchmarkDecodeHead decodes realisticPod, and the same pod as `kubectl apply` creates it, with
// its last-applied-configuration (the pod as JSON, in an annotation).
func BenchmarkDecodeHead(b *testing.B) {
	applied := realisticPod()
	manifest, err := json.Marshal(applied)
	if err != nil {
		b.Fatal(err)
	}
	applied.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = string(manifest) + "\n"
	for pod, obj := range map[string]*corev1.Pod{"realistic": realisticPod(), "kubectl-applied": applied} {
		raw, err := json.Marshal(obj)
		if err != nil {
			b.Fatal(err)
		}
		for name, decode := range map[string]func([]byte, *headView) error{
			"json": func(raw []byte, v *headView) error { return unmarshal(raw, v) },
			"ours": decodeHead,
		} {
			b.Run(pod+"/"+name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					var v headView
					if err := decode(raw, &v); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// mountCases are volume mount lists the fast decoder takes (fast) and ones it leaves to
// decodeStrict.
var mountCases = map[string]struct {
	raw  string
	fast bool
}{
	"usual": {`[{"name":"logs","mountPath":"/var/log/app"},{"name":"config","mountPath":"/etc/app","readOnly":true,"subPath":"a"}]`, true},
	"every field": {`[{"name":"d","readOnly":true,"recursiveReadOnly":"Enabled","mountPath":"/d","subPath":"","mountPropagation":"HostToContainer",` +
		`"subPathExpr":"$(POD_NAME)"}]`, true},
	"nulls":       {`[null,{"name":null,"readOnly":null,"recursiveReadOnly":null,"mountPropagation":null}]`, true},
	"empty":       {`[]`, true},
	"null list":   {`null`, true},
	"whitespace":  {" [ { \"name\" : \"a\" , \"mountPath\" : \"/a\" } ] ", true},
	"unknown":     {`[{"name":"a","mountPath":"/a","future":{"x":1}}]`, false},
	"other case":  {`[{"Name":"a"}]`, false},
	"repeated":    {`[{"name":"a","name":"b"}]`, false},
	"escaped":     {`[{"name":"a","mountPath":"/\u0061"}]`, false},
	"wrong type":  {`[{"name":"a","readOnly":"yes"}]`, false},
	"not a list":  {`{"name":"a"}`, false},
	"truncated":   {`[{"name":"a"`, false},
	"trailing":    {`[] []`, false},
	"bad literal": {`[{"readOnly":tru}]`, false},
}

// TestDecodeMounts: the fast decoder takes the usual mounts, and the result is always
// decodeStrict's.
func TestDecodeMounts(t *testing.T) {
	for name, c := range mountCases {
		t.Run(name, func(t *testing.T) {
			var fast []corev1.VolumeMount
			s := scanner{b: []byte(c.raw)}
			err := list(&s, &fast, s.volumeMount)
			s.space()
			if took := err == nil && s.i == len(c.raw); took != c.fast {
				t.Errorf("fast path took it: %v, want %v (%v)", took, c.fast, err)
			}
			mountsSameAsStrict(t, []byte(c.raw))
		})
	}
}

func mountsSameAsStrict(t *testing.T, raw []byte) {
	t.Helper()
	var got, want []corev1.VolumeMount
	gotUnknown, gotErr := decodeMounts(raw, &got)
	wantUnknown, wantErr := decodeStrict(raw, &want)
	if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() || gotUnknown != wantUnknown {
		t.Fatalf("for %q: unknown %v, error %v; decodeStrict: %v, %v", raw, gotUnknown, gotErr, wantUnknown, wantErr)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("decoded differently for %q (-decodeStrict +ours):\n%s", raw, diff)
	}
}

func FuzzDecodeMounts(f *testing.F) {
	for _, c := range mountCases {
		f.Add([]byte(c.raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { mountsSameAsStrict(t, raw) })
}
