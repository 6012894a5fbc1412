package webhook

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// maxReviewSize is the largest AdmissionReview accepted, as controller-runtime's.
const maxReviewSize = 7 * 1024 * 1024

// Review serves AdmissionReviews for a controller-runtime admission.Webhook, decoding them
// faster than the Webhook's own ServeHTTP: the review is decoded in one pass (decodeReview),
// the request's object kept as it came for the handler to decode what it reads of it.
// controller-runtime's universal deserializer decodes the whole review twice over, and that
// was two thirds of an admission's time (BenchmarkServeHTTP). The Webhook still handles the
// request (panic recovery, logging, Response.Complete); a body decodeReview does not take is
// served by the Webhook itself, so its answer to malformed input is controller-runtime's.
type Review struct {
	Webhook *admission.Webhook
}

var _ http.Handler = &Review{}

func (rv *Review) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody || r.Header.Get("Content-Type") != "application/json" ||
		r.ContentLength < 0 || r.ContentLength > maxReviewSize {
		rv.Webhook.ServeHTTP(w, r)
		return
	}
	body, err := readBody(r.Body, int(r.ContentLength))
	_ = r.Body.Close()
	if err != nil {
		// As controller-runtime answers a body it cannot read.
		writeReview(w, admissionv1.SchemeGroupVersion.WithKind("AdmissionReview"),
			admission.Errored(http.StatusBadRequest, fmt.Errorf("reading the request body: %w", err)))
		return
	}
	req, gvk, head, err := decodeReview(body)
	if err != nil {
		rv.Webhook.ServeHTTP(w, withBody(r, body))
		return
	}
	writeReview(w, gvk, rv.Webhook.Handle(withHead(r.Context(), req.Object.Raw, head), req))
}

// writeReview answers with the review of resp.
func writeReview(w http.ResponseWriter, gvk schema.GroupVersionKind, resp admission.Response) {
	encoded, ok := appendReview(make([]byte, 0, 256+len(resp.Patch)*4/3), gvk, &resp.AdmissionResponse)
	if !ok {
		out := admissionv1.AdmissionReview{Response: &resp.AdmissionResponse}
		out.SetGroupVersionKind(gvk)
		var err error
		if encoded, err = json.Marshal(out); err != nil {
			// The response is plain data: this cannot happen.
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(encoded)
}

// firstRead is the buffer a body is first read into: a pod's AdmissionReview (a few KiB, tens
// with managedFields) fits, so a typical admission reads its body with one allocation.
const firstRead = 64 << 10

// readBody reads a body that declares length bytes into a buffer that grows, by doubling and
// never beyond length, only as the bytes arrive. The declared length is the client's word: a
// buffer of that size allocated up front lets every connection that sends headers alone hold
// maxReviewSize of the manager's memory (32 such connections, 224 MiB). A body shorter than it
// declared is io.ErrUnexpectedEOF.
func readBody(r io.Reader, length int) ([]byte, error) {
	buf := make([]byte, 0, min(length, firstRead))
	for len(buf) < length {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(2*cap(buf), length))
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case errors.Is(err, io.EOF) && len(buf) < length:
			return nil, io.ErrUnexpectedEOF
		case errors.Is(err, io.EOF):
			return buf, nil
		case err != nil:
			return nil, err
		}
	}
	return buf, nil
}

// appendReview appends the review answering with r, written as json.Marshal writes it
// (TestAppendReview): the handler's answers, whose status carries at most a status, message,
// reason and code. It reports false, having appended nothing, for any other answer.
func appendReview(out []byte, gvk schema.GroupVersionKind, r *admissionv1.AdmissionResponse) ([]byte, bool) {
	if len(r.AuditAnnotations) > 0 || r.Result != nil &&
		(r.Result.TypeMeta != metav1.TypeMeta{} || r.Result.ListMeta != metav1.ListMeta{} || r.Result.Details != nil) {
		return out, false
	}
	out = append(out, `{"kind":`...)
	out = appendString(out, gvk.Kind)
	out = append(out, `,"apiVersion":`...)
	out = appendString(out, gvk.GroupVersion().String())
	out = append(out, `,"response":{"uid":`...)
	out = appendString(out, string(r.UID))
	out = append(out, `,"allowed":`...)
	out = strconv.AppendBool(out, r.Allowed)
	if st := r.Result; st != nil {
		out = append(out, `,"status":{"metadata":{}`...)
		for _, m := range []struct{ name, value string }{{"status", st.Status}, {"message", st.Message}, {"reason", string(st.Reason)}} {
			if m.value != "" {
				out = appendString(append(append(append(out, `,"`...), m.name...), `":`...), m.value)
			}
		}
		if st.Code != 0 {
			out = strconv.AppendInt(append(out, `,"code":`...), int64(st.Code), 10)
		}
		out = append(out, '}')
	}
	if len(r.Patch) > 0 {
		out = append(out, `,"patch":"`...)
		out = append(base64.StdEncoding.AppendEncode(out, r.Patch), '"')
	}
	if r.PatchType != nil {
		out = appendString(append(out, `,"patchType":`...), string(*r.PatchType))
	}
	if len(r.Warnings) > 0 {
		out = append(out, `,"warnings":[`...)
		for i, w := range r.Warnings {
			if i > 0 {
				out = append(out, ',')
			}
			out = appendString(out, w)
		}
		out = append(out, ']')
	}
	return append(out, "}}"...), true
}

// withBody gives r a body to be read again (the fast path read it).
func withBody(r *http.Request, body []byte) *http.Request {
	r2 := r.Clone(r.Context())
	r2.Body = io.NopCloser(bytes.NewReader(body))
	return r2
}

// NewReview serves handler's AdmissionReviews: decoded by Review, handled by a
// controller-runtime Webhook (which recovers panics), its JSON patch rendered directly.
func NewReview(handler admission.Handler) *Review {
	return &Review{Webhook: &admission.Webhook{Handler: patchRenderer{handler}, RecoverPanic: ptr.To(true)}}
}

// patchRenderer renders a response's patch operations into the patch bytes itself:
// Response.Complete marshals them through each operation's MarshalJSON and compacts the
// result again, a tenth of an admission's time. The bytes are the same.
type patchRenderer struct{ admission.Handler }

func (p patchRenderer) Handle(ctx context.Context, req admission.Request) admission.Response {
	resp := p.Handler.Handle(ctx, req)
	if len(resp.Patches) == 0 {
		return resp
	}
	patch, err := renderPatch(resp.Patches)
	if err != nil {
		return resp // Complete reports it
	}
	resp.Patch, resp.Patches = patch, nil
	resp.PatchType = ptr.To(admissionv1.PatchTypeJSONPatch)
	return resp
}

// renderPatch writes operations as jsonpatch.Operation's MarshalJSON does: value omitted
// when nil, except for add and replace, which say null.
func renderPatch(ops []jsonpatch.Operation) ([]byte, error) {
	out := make([]byte, 0, 256*len(ops))
	out = append(out, '[')
	for i := range ops {
		op := &ops[i]
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"op":`...)
		out = appendString(out, op.Operation)
		out = append(out, `,"path":`...)
		out = appendString(out, op.Path)
		switch {
		case op.Value != nil:
			value, err := json.Marshal(op.Value)
			if err != nil {
				return nil, err
			}
			out = append(append(out, `,"value":`...), value...)
		case op.Operation == "add" || op.Operation == "replace":
			out = append(out, `,"value":null`...)
		}
		out = append(out, '}')
	}
	return append(out, ']'), nil
}

// appendString appends s as encoding/json writes it: plain when nothing in it needs escaping
// (the case for operations and paths), through encoding/json otherwise.
func appendString(out []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			quoted, _ := json.Marshal(s)
			return append(out, quoted...)
		}
	}
	return append(append(append(out, '"'), s...), '"')
}
