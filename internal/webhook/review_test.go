package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// recorder is an admission.Handler that keeps the request it was given.
type recorder struct {
	got  *admission.Request
	next admission.Handler
}

func (r *recorder) Handle(ctx context.Context, req admission.Request) admission.Response {
	r.got = &req
	if r.next != nil {
		return r.next.Handle(ctx, req)
	}
	return admission.Allowed("")
}

// throughBoth serves body through controller-runtime's Webhook and through Review, each
// around a recorder in front of next, and returns both responses and requests seen.
func throughBoth(body []byte, next admission.Handler) (crResp, ourResp *httptest.ResponseRecorder, crReq, ourReq *admission.Request) {
	post := func(h http.Handler) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, PodInjectorPath, bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	cr, ours := &recorder{next: next}, &recorder{next: next}
	crResp = post(&admission.Webhook{Handler: cr})
	ourResp = post(NewReview(ours))
	return crResp, ourResp, cr.got, ours.got
}

// reviewVariants are AdmissionReviews as API servers of several versions and encoders could
// send them: v1 and v1beta1, indented, keys in another order, an old object, a null object,
// escapes in the object's strings.
func reviewVariants(t testing.TB) map[string][]byte {
	t.Helper()
	body := reviewBody(t)
	var indented bytes.Buffer
	if err := json.Indent(&indented, body, "", "  "); err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := json.Unmarshal(body, &generic); err != nil {
		t.Fatal(err)
	}
	request := generic["request"].(map[string]any)
	withOld := clone(t, generic)
	withOld["request"].(map[string]any)["oldObject"] = request["object"]
	withOld["request"].(map[string]any)["operation"] = "UPDATE"
	nullObject := clone(t, generic)
	nullObject["request"].(map[string]any)["object"] = nil
	escapes := clone(t, generic)
	escapes["request"].(map[string]any)["object"].(map[string]any)["metadata"].(map[string]any)["annotations"] =
		map[string]any{"note": "a \"quoted\" {brace} [bracket] \\ and \u00e9 \u2028", "other": "}"}
	// What a service account's token carries, and members the API server may leave null.
	extra := clone(t, generic)
	extra["request"].(map[string]any)["userInfo"].(map[string]any)["extra"] = map[string]any{
		"authentication.kubernetes.io/credential-id": []any{"JTI=5e1c7c4e-8b1b-4b8e-9a59-6c0f7e0e2f3a"},
		"authentication.kubernetes.io/node-name":     []any{"node-1"}, "empty": []any{}, "none": nil}
	extra["request"].(map[string]any)["dryRun"] = true
	extra["request"].(map[string]any)["unknownMember"] = map[string]any{"a": []any{1.5, "x", nil}}
	nulls := clone(t, generic)
	for _, k := range []string{"requestKind", "requestResource", "dryRun", "options", "name", "kind"} {
		nulls["request"].(map[string]any)[k] = nil
	}
	nulls["request"].(map[string]any)["userInfo"].(map[string]any)["groups"] = nil
	reordered := []byte(`{"request":` + string(mustJSON(t, request)) + `,"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1"}`)
	return map[string][]byte{
		"v1":          body,
		"v1beta1":     bytes.Replace(body, []byte(`"apiVersion":"admission.k8s.io/v1"`), []byte(`"apiVersion":"admission.k8s.io/v1beta1"`), 1),
		"indented":    indented.Bytes(),
		"reordered":   reordered,
		"old object":  mustJSON(t, withOld),
		"null object": mustJSON(t, nullObject),
		"escapes":     mustJSON(t, escapes),
		"extra":       mustJSON(t, extra),
		"nulls":       mustJSON(t, nulls),
	}
}

func clone(t testing.TB, v map[string]any) map[string]any {
	var out map[string]any
	if err := json.Unmarshal(mustJSON(t, v), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReviewMatchesControllerRuntime: for every shape of review, Review hands the injector
// the same request controller-runtime's Webhook does and answers with the same bytes.
func TestReviewMatchesControllerRuntime(t *testing.T) {
	for name, body := range reviewVariants(t) {
		t.Run(name, func(t *testing.T) {
			req, _, head, err := decodeReview(body)
			switch {
			case err != nil:
				t.Errorf("the fast path left it to controller-runtime: %v", err)
			case (head == nil) != (name == "null object"):
				t.Errorf("the pod's head decoded with the review: %v, want it for every object", head != nil)
			case head != nil:
				var want headView
				if err := decodeHead(req.Object.Raw, &want); err != nil || !equality.Semantic.DeepEqual(&want, head) {
					t.Errorf("the head decoded with the review is not the object's (%v):\n%s", err, diff.Diff(&want, head))
				}
				if !bytes.Contains(body, req.Object.Raw) || cap(req.Object.Raw) != len(req.Object.Raw) {
					t.Errorf("the object is not the body's bytes, capped: %d of %d", len(req.Object.Raw), cap(req.Object.Raw))
				}
			}
			crResp, ourResp, crReq, ourReq := throughBoth(body, benchInjector(3, ""))
			if crReq == nil || ourReq == nil {
				t.Fatalf("handler not reached: controller-runtime %v (%s), ours %v (%s)", crReq != nil, crResp.Body, ourReq != nil, ourResp.Body)
			}
			if !equality.Semantic.DeepEqual(crReq, ourReq) {
				t.Errorf("requests differ (-controller-runtime +ours):\n%s", diff.Diff(crReq, ourReq))
			}
			if crResp.Code != ourResp.Code || !bytes.Equal(bytes.TrimSpace(crResp.Body.Bytes()), ourResp.Body.Bytes()) {
				t.Errorf("responses differ:\ncontroller-runtime %d %s\nours               %d %s", crResp.Code, crResp.Body, ourResp.Code, ourResp.Body)
			}
			if name == "v1" && !strings.Contains(ourResp.Body.String(), `"patch":`) {
				t.Errorf("no patch for the realistic pod: %s", ourResp.Body)
			}
		})
	}
}

// TestReviewBadInput: what the fast path does not take is answered as controller-runtime
// answers it; so are the odd inputs it takes (a key spelled with escapes, a repeated request,
// escapes in a string), which it decodes as controller-runtime's decoder does.
func TestReviewBadInput(t *testing.T) {
	body := reviewBody(t)
	fast := sets.New("escaped key", "two requests", "escaped user")
	for name, bad := range map[string][]byte{
		"empty":            {},
		"not JSON":         []byte("hello"),
		"truncated":        body[:len(body)/2],
		"trailing data":    append(append([]byte{}, body...), " {}"...),
		"wrong kind":       bytes.Replace(body, []byte(`"kind":"AdmissionReview"`), []byte(`"kind":"Pod"`), 1),
		"unknown version":  bytes.Replace(body, []byte(`admission.k8s.io/v1"`), []byte(`admission.k8s.io/v9"`), 1),
		"no request":       []byte(`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1"}`),
		"escaped key":      bytes.Replace(body, []byte(`"request":`), []byte(`"requ\u0065st":`), 1),
		"two requests":     bytes.Replace(body, []byte(`"request":`), []byte(`"request":{"uid":"x"},"request":`), 1),
		"kind in capitals": bytes.Replace(body, []byte(`"kind":"AdmissionReview"`), []byte(`"Kind":"AdmissionReview"`), 1),
		"kind twice":       bytes.Replace(body, []byte(`"kind":"AdmissionReview"`), []byte(`"kind":"AdmissionReview","KIND":"Pod"`), 1),
		"escaped user":     bytes.Replace(body, []byte(`"username":"`), []byte(`"username":"\u00e9`), 1),
		"wrong type":       bytes.Replace(body, []byte(`"dryRun":false`), []byte(`"dryRun":"no"`), 1),
		"bad object":       bytes.Replace(body, []byte(`"object":{`), []byte(`"object":{"x":tru,`), 1),
		// controller-runtime hands the handler the request it held before decoding, which a
		// null leaves empty: the pod that follows is never seen there.
		"null then a request":        bytes.Replace(body, []byte(`"request":`), []byte(`"request":null,"request":`), 1),
		"a request, null, a request": bytes.Replace(body, []byte(`"request":`), []byte(`"request":{"uid":"A"},"request":null,"request":`), 1),
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, _, err := decodeReview(bad); (err == nil) != fast.Has(name) {
				t.Errorf("the fast path took it: %v, want %v (%v)", err == nil, fast.Has(name), err)
			}
			crResp, ourResp, _, _ := throughBoth(bad, benchInjector(1, ""))
			if crResp.Code != ourResp.Code || allowed(t, crResp) != allowed(t, ourResp) {
				t.Errorf("controller-runtime %d %s\nours               %d %s", crResp.Code, crResp.Body, ourResp.Code, ourResp.Body)
			}
		})
	}
}

func allowed(t *testing.T, w *httptest.ResponseRecorder) bool {
	var out struct {
		Response struct {
			Allowed bool `json:"allowed"`
		} `json:"response"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatalf("response is not JSON: %s", w.Body)
	}
	return out.Response.Allowed
}

// TestAppendReview: the responses written without encoding/json are its bytes exactly, and
// what appendReview does not write is left to it.
func TestAppendReview(t *testing.T) {
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "705ab4f5-6393-11e8-b7cc-42010a800002"}}
	complete := func(r admission.Response) admission.Response {
		if err := r.Complete(req); err != nil {
			t.Fatal(err)
		}
		return r
	}
	patched := complete(admission.Allowed(""))
	patched.Patch, patched.PatchType = []byte(`[{"op":"add","path":"/x","value":"<&>"}]`), ptr.To(admissionv1.PatchTypeJSONPatch)
	warned := complete(admission.Allowed("fine").WithWarnings("first", "second: \"quoted\" <b>\u00e9\n"))
	v1beta1 := schema.GroupVersionKind{Group: "admission.k8s.io", Version: "v1beta1", Kind: "AdmissionReview"}
	details := complete(admission.Denied("no"))
	details.Result.Details = &metav1.StatusDetails{Name: "x"}
	audited := complete(admission.Allowed(""))
	audited.AuditAnnotations = map[string]string{"a": "b"}
	for name, c := range map[string]struct {
		resp  admission.Response
		gvk   schema.GroupVersionKind
		wrote bool
	}{
		"allowed":         {complete(admission.Allowed("")), reviewKinds["admission.k8s.io/v1"], true},
		"patched":         {patched, reviewKinds["admission.k8s.io/v1"], true},
		"patched v1beta1": {patched, v1beta1, true},
		"denied":          {complete(admission.Denied(`sidecar "log-agent" clashes with <container> & more`)), reviewKinds["admission.k8s.io/v1"], true},
		"errored":         {complete(admission.Errored(http.StatusBadRequest, errors.New("spec.containers[0]: bad"))), reviewKinds["admission.k8s.io/v1"], true},
		"warnings":        {warned, reviewKinds["admission.k8s.io/v1"], true},
		"no status":       {admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{UID: "1", Allowed: true}}, reviewKinds["admission.k8s.io/v1"], true},
		"details":         {details, reviewKinds["admission.k8s.io/v1"], false},
		"audit":           {audited, reviewKinds["admission.k8s.io/v1"], false},
	} {
		t.Run(name, func(t *testing.T) {
			got, wrote := appendReview(nil, c.gvk, &c.resp.AdmissionResponse)
			if wrote != c.wrote || !wrote && len(got) > 0 {
				t.Fatalf("wrote %v (%q), want %v", wrote, got, c.wrote)
			}
			if !wrote {
				return
			}
			review := admissionv1.AdmissionReview{Response: &c.resp.AdmissionResponse}
			review.SetGroupVersionKind(c.gvk)
			want := mustJSON(t, review)
			if !bytes.Equal(got, want) {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
	}
}
