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
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
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
	body, err := readBody(r.Body, int(r.ContentLength))
	_ = r.Body.Close()
	if err != nil {
		// As controller-runtime answers a body it cannot read.
		writeReview(w, admissionv1.SchemeGroupVersion.WithKind("AdmissionReview"),
			admission.Errored(http.StatusBadRequest, fmt.Errorf("reading the request body: %w", err)))
		return
	}
	req, gvk, err := decodeReview(body)
	if err != nil {
		rv.Webhook.ServeHTTP(w, withBody(r, body))
		return
	}
	writeReview(w, gvk, rv.Webhook.Handle(r.Context(), req))
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

// errNotFast is a body the fast path leaves to controller-runtime's decoder.
var errNotFast = errors.New("not a plain AdmissionReview")

var reviewKinds = map[string]schema.GroupVersionKind{
	"admission.k8s.io/v1":      admissionv1.SchemeGroupVersion.WithKind("AdmissionReview"),
	"admission.k8s.io/v1beta1": {Group: "admission.k8s.io", Version: "v1beta1", Kind: "AdmissionReview"},
}

// decodeReview decodes an AdmissionReview (v1 or v1beta1, which share their fields) in one
// pass over body, as the JSON decoder would: the envelope's members are read, the request's
// object and old object are kept as slices of body for the handler to decode (only where they
// end is found here), everything else is checked and stepped over. It returns the review's
// kind for the response. What it does not take on (escaped or repeated keys, strings that need
// unescaping, a value of the wrong type, malformed input) is errNotFast, and controller-runtime
// decodes that body itself (FuzzDecodeReview). The request's strings share body's bytes (see
// share): body must not be written afterwards.
func decodeReview(body []byte) (admission.Request, schema.GroupVersionKind, error) {
	var (
		apiVersion, kind string
		req              *admission.Request
	)
	s := scanner{b: body}
	names := [...]string{"apiVersion", "kind", "request"}
	var seen [len(names)]bool
	err := s.object(func(key []byte) error {
		for i, name := range names {
			switch {
			case string(key) == name:
				if seen[i] {
					return errNotFast
				}
				seen[i] = true
				switch i {
				case 0:
					return s.text(&apiVersion)
				case 1:
					return s.text(&kind)
				}
				if s.literal("null") {
					req = nil
					return nil
				}
				req = &admission.Request{}
				return s.request(&req.AdmissionRequest)
			case bytes.EqualFold(key, []byte(name)):
				// controller-runtime reads the review's kind case-insensitively.
				return errNotFast
			}
		}
		return s.value(1)
	})
	if err != nil {
		return admission.Request{}, schema.GroupVersionKind{}, err
	}
	if s.space(); s.i != len(body) {
		return admission.Request{}, schema.GroupVersionKind{}, errNotFast
	}
	gvk, ok := reviewKinds[apiVersion]
	if !ok || kind != "AdmissionReview" || req == nil {
		return admission.Request{}, schema.GroupVersionKind{}, errNotFast
	}
	return *req, gvk, nil
}

var requestFields = []string{"uid", "kind", "resource", "subResource", "requestKind", "requestResource",
	"requestSubResource", "name", "namespace", "operation", "userInfo", "object", "oldObject", "dryRun", "options"}

func (s *scanner) request(r *admissionv1.AdmissionRequest) error {
	return s.fields(1, requestFields, func(field int) error {
		switch requestFields[field] {
		case "uid":
			uid := string(r.UID)
			err := s.text(&uid)
			r.UID = types.UID(uid)
			return err
		case "kind":
			return s.nullOr(func() error { return s.kind(&r.Kind) })
		case "resource":
			return s.nullOr(func() error { return s.resource(&r.Resource) })
		case "subResource":
			return s.text(&r.SubResource)
		case "requestKind":
			return nullOrNew(s, &r.RequestKind, s.kind)
		case "requestResource":
			return nullOrNew(s, &r.RequestResource, s.resource)
		case "requestSubResource":
			return s.text(&r.RequestSubResource)
		case "name":
			return s.text(&r.Name)
		case "namespace":
			return s.text(&r.Namespace)
		case "operation":
			op := string(r.Operation)
			err := s.text(&op)
			r.Operation = admissionv1.Operation(op)
			return err
		case "userInfo":
			return s.nullOr(func() error { return s.userInfo(&r.UserInfo) })
		case "object":
			return s.span(&r.Object.Raw, s.skip)
		case "oldObject":
			return s.span(&r.OldObject.Raw, s.skip)
		case "dryRun":
			if s.literal("null") {
				r.DryRun = nil
				return nil
			}
			var dry bool
			err := s.boolean(&dry)
			r.DryRun = &dry
			return err
		}
		return s.span(&r.Options.Raw, func() error { return s.value(2) })
	})
}

// span reads a value with step and keeps its bytes, as runtime.RawExtension does (null leaves
// it as it is).
func (s *scanner) span(into *[]byte, step func() error) error {
	start := s.i
	if err := step(); err != nil {
		return err
	}
	if v := s.b[start:s.i]; string(v) != "null" {
		*into = v
	}
	return nil
}

// nullOrNew sets *into to nil for null, or to a new value read by read.
func nullOrNew[T any](s *scanner, into **T, read func(*T) error) error {
	if s.literal("null") {
		*into = nil
		return nil
	}
	v := new(T)
	*into = v
	return read(v)
}

// plainOrNull reads an optional string-kinded value (a mount's propagation or read-only mode):
// nil for null, else a new value read by plain.
func plainOrNull[T ~string](s *scanner, into **T) error {
	return nullOrNew(s, into, func(v *T) error {
		var text string
		err := s.plain(&text)
		*v = T(text)
		return err
	})
}

func (s *scanner) kind(k *metav1.GroupVersionKind) error {
	return s.texts([]string{"group", "version", "kind"}, &k.Group, &k.Version, &k.Kind)
}

func (s *scanner) resource(r *metav1.GroupVersionResource) error {
	return s.texts([]string{"group", "version", "resource"}, &r.Group, &r.Version, &r.Resource)
}

// texts reads an object of string members: the one named names[i] into into[i].
func (s *scanner) texts(names []string, into ...*string) error {
	return s.fields(2, names, func(field int) error { return s.text(into[field]) })
}

func (s *scanner) userInfo(u *authenticationv1.UserInfo) error {
	return s.fields(2, []string{"username", "uid", "groups", "extra"}, func(field int) error {
		switch field {
		case 0:
			return s.text(&u.Username)
		case 1:
			return s.text(&u.UID)
		case 2:
			return s.strings(&u.Groups)
		}
		if s.literal("null") {
			u.Extra = nil
			return nil
		}
		u.Extra = map[string]authenticationv1.ExtraValue{}
		return s.object(func(key []byte) error {
			if !ascii(key) {
				return errNotFast // the JSON decoder replaces invalid UTF-8
			}
			var v []string
			err := s.strings(&v)
			u.Extra[share(key)] = v
			return err
		})
	})
}

// strings reads an array of strings into a new slice; null leaves it nil.
func (s *scanner) strings(into *[]string) error {
	return list(s, into, s.plain)
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
// must consume the value. A key with escapes is unescaped first, as the JSON decoder does (so
// "na\u006de" is the member name): the API server sends such keys in every pod's
// managedFields (`"k:{\"name\":\"app\"}"`), which the scanner steps over.
func (s *scanner) object(member func(key []byte) error) error {
	return s.elements('{', '}', func() error {
		start := s.i
		if err := s.str(); err != nil {
			return err
		}
		key := s.b[start+1 : s.i-1]
		if !plainKey(key) {
			var err error
			if key, err = unescapeKey(s.b[start:s.i]); err != nil {
				return errNotFast
			}
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

// unescapeKey decodes a quoted key that has escapes or control characters as the JSON decoder
// decodes strings; what it refuses (a bad escape, a control character) is left to the decoder.
func unescapeKey(quoted []byte) ([]byte, error) {
	var key string
	if err := unmarshal(quoted, &key); err != nil {
		return nil, err
	}
	return []byte(key), nil
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
