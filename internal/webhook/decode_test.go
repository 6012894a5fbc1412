package webhook

import (
	"encoding/json"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	admissionv1beta1 "k8s.io/api/admission/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/diff"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// headCases are pods in the shapes the API server sends and in shapes it would refuse, with
// what tells decoders apart: case, repeated names, escapes, invalid UTF-8, nulls, depth.
func headCases(t testing.TB) map[string]string {
	realistic, err := json.Marshal(realisticPod())
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"realistic pod":        string(realistic),
		"empty":                `{}`,
		"nulls":                `{"metadata":null,"spec":{"containers":null,"initContainers":[null],"volumes":null,"hostNetwork":null}}`,
		"empty lists and maps": `{"metadata":{"labels":{},"annotations":{}},"spec":{"containers":[],"volumes":[],"imagePullSecrets":[]}}`,
		"raw env and mounts": `{"spec":{"containers":[{"name":"a","env":[{"name":"X","value":"1"}],"volumeMounts":null,` +
			`"ports":[{"containerPort":80,"x":-1.5e+3}],"y":[true,false,null,"\u00e9\n"]}],"hostNetwork":true}}`,
		"unknown members everywhere": `{"kind":"Pod","status":{"phase":"Pending","n":0},"metadata":{"uid":"u","ownerReferences":[{}]},` +
			`"spec":{"nodeName":"n","volumes":[{"name":"v","emptyDir":{}}],"imagePullSecrets":[{"name":"s","x":{}}]}}`,
		"whitespace": " {\n\t\"metadata\" : { \"name\" : \"p\" } , \"spec\" : { \"containers\" : [ { \"name\" : \"a\" } ] } }\n",
		// Names: matched case-sensitively; spelled with escapes; repeated (the last wins,
		// objects merge); beyond ASCII or invalid UTF-8.
		"other case":              `{"Metadata":{"name":"p"},"metadata":{"Name":"q","labels":{"A":"1","a":"2"}}}`,
		"managedFields":           `{"metadata":{"name":"p","managedFields":[{"fieldsV1":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{}}}}}}]}}`,
		"escaped member name":     `{"metad\u0061ta":{"name":"p"},"spec":{"containers":[{"na\u006de":"a"}]}}`,
		"escaped label key":       `{"metadata":{"labels":{"a\/b":"x","\u00e9":"y"}}}`,
		"repeated member":         `{"metadata":{"name":"a","labels":{"x":"1"}},"metadata":{"namespace":"b","labels":{"y":"2"}}}`,
		"repeated name":           `{"spec":{"containers":[{"name":"a","name":"b"}]}}`,
		"escaped repeat":          `{"metadata":{"name":"a","na\u006de":"b"}}`,
		"repeated ignored member": `{"status":{},"status":1,"metadata":{"labels":{"a":"1","a":"2"}}}`,
		"non-ASCII key skipped":   `{"métadonnées":1,"metadata":{"name":"p","labels":{"é":"x"}}}`,
		"invalid UTF-8 key":       "{\"metadata\":{\"labels\":{\"a\xff\":\"x\"}},\"spec\xfe\":{}}",
		"lone surrogate key":      `{"\ud800":1,"metadata":{"labels":{"\udc00":"x"}}}`,
		// Values with escapes or beyond ASCII: annotations holding JSON or text.
		"escaped value":       `{"metadata":{"name":"p","labels":{"a":"b\u0041"}}}`,
		"non-ASCII value":     `{"metadata":{"annotations":{"a":"é"}}}`,
		"JSON annotation":     `{"metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"apiVersion\":\"v1\",\"kind\":\"Pod\"}\n"}}}`,
		"invalid UTF-8 value": "{\"metadata\":{\"annotations\":{\"a\":\"\xff\xfe\",\"b\":\"\xe2\x82\"}}}",
		"lone surrogate":      `{"metadata":{"annotations":{"a":"\ud800x","b":"\udc00\ud800"}}}`,
		"null label value":    `{"metadata":{"labels":{"a":null}}}`,
		"deep":                `{"x":` + strings.Repeat("[", 9000) + strings.Repeat("]", 9000) + `}`,

		"wrong type":         `{"metadata":{"name":5}}`,
		"wrong type later":   `{"metadata":{"name":5,"namespace":"n","labels":{"a":"b"}}}`,
		"containers object":  `{"spec":{"containers":{}}}`,
		"hostNetwork string": `{"spec":{"hostNetwork":"true"}}`,
		"null pod":           `null`,
		"bad number":         `{"x":01}`,
		"bad literal":        `{"x":tru}`,
		"bad escape":         `{"x":"\q"}`,
		"control character":  "{\"x\":\"a\tb\"}",
		"control in key":     "{\"x\ty\":1}",
		"trailing data":      `{} {}`,
		"truncated":          `{"metadata":{"name":"p"`,
		"too deep":           `{"x":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`,
	}
}

// TestDecodeHead: every pod decodes as the API server's decoder decodes it, and every pod that
// decoder takes is decoded by the v2 library in one pass, not by the reference.
func TestDecodeHead(t *testing.T) {
	for name, raw := range headCases(t) {
		t.Run(name, func(t *testing.T) {
			sameAsJSON(t, []byte(raw))
			var ref, v2 headView
			if unmarshal([]byte(raw), &ref) == nil {
				if err := jsonv2.Unmarshal([]byte(raw), &v2, asAPIServer); err != nil {
					t.Errorf("left to the reference: %v", err)
				}
			}
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
	for _, raw := range headCases(f) {
		f.Add([]byte(raw))
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

// mountCases are volume mount lists as containers have them, and ones decodeStrict reports
// (unknown or repeated fields) or refuses.
var mountCases = map[string]string{
	"usual": `[{"name":"logs","mountPath":"/var/log/app"},{"name":"config","mountPath":"/etc/app","readOnly":true,"subPath":"a"}]`,
	"every field": `[{"name":"d","readOnly":true,"recursiveReadOnly":"Enabled","mountPath":"/d","subPath":"","mountPropagation":"HostToContainer",` +
		`"subPathExpr":"$(POD_NAME)"}]`,
	"nulls":       `[null,{"name":null,"readOnly":null,"recursiveReadOnly":null,"mountPropagation":null}]`,
	"empty":       `[]`,
	"null list":   `null`,
	"whitespace":  " [ { \"name\" : \"a\" , \"mountPath\" : \"/a\" } ] ",
	"escaped":     `[{"name":"a","mountPath":"/\u0061"}]`,
	"unknown":     `[{"name":"a","mountPath":"/a","future":{"x":1}}]`,
	"other case":  `[{"Name":"a"}]`,
	"repeated":    `[{"name":"a","name":"b","mountPath":"/a","readOnly":true,"readOnly":null}]`,
	"wrong type":  `[{"name":"a","readOnly":"yes"}]`,
	"not a list":  `{"name":"a"}`,
	"truncated":   `[{"name":"a"`,
	"trailing":    `[] []`,
	"bad literal": `[{"readOnly":tru}]`,
}

// TestDecodeMounts: every list decodes as decodeStrict decodes it, and every list it takes
// without a report is decoded by the v2 library in one pass.
func TestDecodeMounts(t *testing.T) {
	for name, raw := range mountCases {
		t.Run(name, func(t *testing.T) {
			mountsSameAsStrict(t, []byte(raw))
			var ref, v2 []corev1.VolumeMount
			if unknown, err := decodeStrict([]byte(raw), &ref); err == nil && !unknown {
				if err := jsonv2.Unmarshal([]byte(raw), &v2, asStrict); err != nil {
					t.Errorf("left to decodeStrict: %v", err)
				}
			}
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
	for _, raw := range mountCases {
		f.Add([]byte(raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { mountsSameAsStrict(t, raw) })
}

// FuzzDecodeReview: whenever decodeReview takes a body, controller-runtime's decoder takes it
// too, and finds the same request and the same kind of review.
func FuzzDecodeReview(f *testing.F) {
	for _, body := range reviewVariants(f) {
		f.Add(body)
	}
	f.Add([]byte(`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"1","object":{"a":[1,{"b":"}"}]}}}`))
	f.Add([]byte(`{"kind":"AdmissionReview","KIND":"x","apiVersion":"admission.k8s.io/v1","request":{"uid":"1","UID":"2","uid":"3"}}`))
	f.Add([]byte(`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":null,"request":{"uid":"1","operation":"CREATE","object":{"metadata":{"name":"p"},"spec":{"containers":[{"name":"a"}]}}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		ours, gvk, head, err := decodeReview(body)
		if err != nil {
			return
		}
		if head != nil {
			// The head decoded with the review is the one the handler would decode from the object.
			var want headView
			if err := unmarshal(ours.Object.Raw, &want); err != nil {
				t.Fatalf("decodeReview decoded a head from an object the reference refuses (%v): %q", err, body)
			}
			if !equality.Semantic.DeepEqual(&want, head) {
				t.Fatalf("heads differ for %q:\n%s", body, diff.Diff(&want, head))
			}
		}
		cr, crGVK, crErr := crDecode(body)
		if crErr != nil {
			t.Fatalf("decodeReview took a review controller-runtime refuses (%v): %q", crErr, body)
		}
		if !equality.Semantic.DeepEqual(cr, ours) {
			t.Fatalf("requests differ for %q:\n%s", body, diff.Diff(cr, ours))
		}
		if gvk != crGVK {
			t.Fatalf("kinds differ for %q: %v, controller-runtime %v", body, gvk, crGVK)
		}
	})
}

var crCodecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	utilruntime.Must(admissionv1.AddToScheme(s))
	utilruntime.Must(admissionv1beta1.AddToScheme(s))
	return serializer.NewCodecFactory(s)
}()

// unregisteredReview is not in the scheme, so v1beta1 reviews are decoded into it too, as
// controller-runtime does.
type unregisteredReview struct{ admissionv1.AdmissionReview }

// crDecode decodes a review exactly as controller-runtime's Webhook.ServeHTTP does.
func crDecode(body []byte) (admission.Request, schema.GroupVersionKind, error) {
	req := admission.Request{}
	ar := unregisteredReview{}
	ar.Request = &req.AdmissionRequest
	ar.SetGroupVersionKind(admissionv1.SchemeGroupVersion.WithKind("AdmissionReview"))
	_, gvk, err := crCodecs.UniversalDeserializer().Decode(body, nil, &ar)
	if err != nil {
		return admission.Request{}, schema.GroupVersionKind{}, err
	}
	return req, *gvk, nil
}
