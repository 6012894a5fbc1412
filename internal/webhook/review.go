package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// maxReviewSize is the largest AdmissionReview accepted, as controller-runtime's.
const maxReviewSize = 7 * 1024 * 1024

// Review serves AdmissionReviews for a controller-runtime admission.Webhook, decoding them
// faster than the Webhook's own ServeHTTP: the request's object is located in the body and
// handed to the handler as it came (the handler decodes what it reads of it, once), and only
// the rest of the envelope goes through the JSON decoder. controller-runtime's universal
// deserializer decodes the whole review twice over, and that was two thirds of an admission's
// time (BenchmarkServeHTTP). The Webhook still handles the request (panic recovery, logging,
// Response.Complete); a body this fast path does not recognise is served by the Webhook
// itself, so its answer to malformed input is controller-runtime's.
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
	body := make([]byte, r.ContentLength)
	_, err := io.ReadFull(r.Body, body)
	_ = r.Body.Close()
	if err != nil {
		rv.Webhook.ServeHTTP(w, withBody(r, nil))
		return
	}
	req, gvk, err := decodeReview(body)
	if err != nil {
		rv.Webhook.ServeHTTP(w, withBody(r, body))
		return
	}
	resp := rv.Webhook.Handle(r.Context(), req)
	out := admissionv1.AdmissionReview{Response: &resp.AdmissionResponse}
	out.SetGroupVersionKind(gvk)
	encoded, err := json.Marshal(out)
	if err != nil {
		// The response is plain data: this cannot happen.
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(encoded)
}

// withBody gives r a body to be read again (the fast path read it).
func withBody(r *http.Request, body []byte) *http.Request {
	r2 := r.Clone(r.Context())
	r2.Body = io.NopCloser(bytes.NewReader(body))
	return r2
}

// errNotFast is a body the fast path leaves to controller-runtime's decoder.
var errNotFast = errors.New("not a plain AdmissionReview")

var reviewKinds = map[string]schema.GroupVersionKind{
	"admission.k8s.io/v1":      admissionv1.SchemeGroupVersion.WithKind("AdmissionReview"),
	"admission.k8s.io/v1beta1": {Group: "admission.k8s.io", Version: "v1beta1", Kind: "AdmissionReview"},
}

// decodeReview decodes an AdmissionReview (v1 or v1beta1, which share their fields) into an
// admission request whose object and old object are slices of body, and returns the review's
// kind for the response.
func decodeReview(body []byte) (admission.Request, schema.GroupVersionKind, error) {
	spans, err := findObjects(body)
	if err != nil {
		return admission.Request{}, schema.GroupVersionKind{}, err
	}
	// The envelope without the objects: a copy with null in their place.
	envelope := make([]byte, 0, len(body)-spans.size()+8)
	last := 0
	for _, s := range spans.list() {
		envelope = append(append(envelope, body[last:s.start]...), "null"...)
		last = s.end
	}
	envelope = append(envelope, body[last:]...)

	var review struct {
		APIVersion string                        `json:"apiVersion"`
		Kind       string                        `json:"kind"`
		Request    *admissionv1.AdmissionRequest `json:"request"`
	}
	if err := unmarshal(envelope, &review); err != nil {
		return admission.Request{}, schema.GroupVersionKind{}, err
	}
	gvk, ok := reviewKinds[review.APIVersion]
	if !ok || review.Kind != "AdmissionReview" || review.Request == nil {
		return admission.Request{}, schema.GroupVersionKind{}, errNotFast
	}
	req := admission.Request{AdmissionRequest: *review.Request}
	if spans.object.end > 0 {
		req.Object.Raw = body[spans.object.start:spans.object.end]
	}
	if spans.oldObject.end > 0 {
		req.OldObject.Raw = body[spans.oldObject.start:spans.oldObject.end]
	}
	return req, gvk, nil
}

// span is [start, end) of a JSON value in the body; end 0 when absent or null.
type span struct{ start, end int }

type objectSpans struct{ object, oldObject span }

func (o objectSpans) list() []span {
	var out []span
	for _, s := range []span{o.object, o.oldObject} {
		if s.end > 0 {
			out = append(out, s)
		}
	}
	if len(out) == 2 && out[1].start < out[0].start {
		out[0], out[1] = out[1], out[0]
	}
	return out
}

func (o objectSpans) size() int {
	n := 0
	for _, s := range o.list() {
		n += s.end - s.start
	}
	return n
}

// findObjects locates request.object and request.oldObject in an AdmissionReview body. It
// only finds where values end (strings, nesting); the values are checked by the decoders that
// read them. Anything unusual (escaped or repeated keys, a non-object where one is expected)
// is errNotFast.
func findObjects(b []byte) (objectSpans, error) {
	var out objectSpans
	s := scanner{b: b}
	seen := map[string]bool{}
	err := s.object(func(key []byte) error {
		if string(key) != "request" {
			return s.skip()
		}
		if seen["request"] {
			return errNotFast
		}
		seen["request"] = true
		return s.object(func(k []byte) error {
			key := string(k)
			var into *span
			switch key {
			case "object":
				into = &out.object
			case "oldObject":
				into = &out.oldObject
			default:
				return s.skip()
			}
			if seen[key] {
				return errNotFast
			}
			seen[key] = true
			start := s.i
			if err := s.skip(); err != nil {
				return err
			}
			if !bytes.Equal(b[start:s.i], []byte("null")) {
				*into = span{start, s.i}
			}
			return nil
		})
	})
	if err != nil {
		return objectSpans{}, err
	}
	if s.space(); s.i != len(b) {
		return objectSpans{}, errNotFast
	}
	return out, nil
}

// scanner walks JSON far enough to find where values end.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// object walks an object, calling member with each key with the scanner at its value; member
// must consume the value.
func (s *scanner) object(member func(key []byte) error) error {
	return s.elements('{', '}', func() error {
		start := s.i
		if err := s.str(); err != nil {
			return err
		}
		key := s.b[start+1 : s.i-1]
		if !plainKey(key) {
			return errNotFast
		}
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return errNotFast
		}
		s.i++
		s.space()
		return member(key)
	})
}

// elements walks the members of an object or the elements of an array, between the brackets
// open and close, calling each with the scanner at one; each must consume it.
func (s *scanner) elements(open, close byte, each func() error) error {
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != open {
		return errNotFast
	}
	s.i++
	s.space()
	if s.i < len(s.b) && s.b[s.i] == close {
		s.i++
		return nil
	}
	for {
		s.space()
		if err := each(); err != nil {
			return err
		}
		s.space()
		if s.i >= len(s.b) {
			return errNotFast
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case close:
			s.i++
			return nil
		default:
			return errNotFast
		}
	}
}

// str consumes a string.
func (s *scanner) str() error {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return errNotFast
	}
	for j := s.i + 1; j < len(s.b); j++ {
		switch s.b[j] {
		case '\\':
			j++
		case '"':
			s.i = j + 1
			return nil
		}
	}
	return errNotFast
}

// skip consumes one value.
func (s *scanner) skip() error {
	s.space()
	if s.i >= len(s.b) {
		return errNotFast
	}
	switch s.b[s.i] {
	case '"':
		return s.str()
	case '{', '[':
		depth := 0
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '"':
				if err := s.str(); err != nil {
					return err
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.i++
					return nil
				}
			}
			s.i++
		}
		return errNotFast
	default:
		start := s.i
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				if s.i == start {
					return errNotFast
				}
				return nil
			}
			s.i++
		}
		return fmt.Errorf("%w: the body ends in a value", errNotFast)
	}
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

// plainKey reports whether an object key is one the scanner takes as it is: no escapes, no
// control characters (which JSON does not allow unescaped).
func plainKey(key []byte) bool {
	for _, c := range key {
		if c < 0x20 || c == '\\' {
			return false
		}
	}
	return true
}
