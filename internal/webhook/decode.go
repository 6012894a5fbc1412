package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	sigsjson "sigs.k8s.io/json"
)

// Every JSON decoding of an admission lives here. The API server's decoder (sigs.k8s.io/json:
// encoding/json with field names matched case-sensitively) is the reference: a pod is read as
// the API server itself read it. The JSON v2 library, with v1 semantics, decodes the same
// bytes into the same values in one pass where the reference validates the whole input first
// and then walks it again, at a third of the allocations (BenchmarkDecodeHead). It decodes
// what every admission reads: the review, the pod's head, its containers' volume mounts.
// Input it refuses goes to the reference (or, for a review, to controller-runtime), so errors
// are the reference's words (FuzzDecodeReview, FuzzDecodeHead, FuzzDecodeMounts).

var (
	// asAPIServer makes the v2 library decode as the API server's decoder: v1 semantics
	// (repeated names merged, the last winning; invalid UTF-8 replaced by U+FFFD), with field
	// names matched case-sensitively.
	asAPIServer = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(), jsonv2.MatchCaseInsensitiveNames(false), jsonv1.ReportErrorsWithLegacySemantics(false))
	// asStrict also refuses what decodeStrict reports: field names the Go type lacks.
	asStrict = jsonv2.JoinOptions(asAPIServer, jsonv2.RejectUnknownMembers(true))
)

// unmarshal decodes raw into into with the API server's decoder.
func unmarshal(raw []byte, into any) error {
	return sigsjson.UnmarshalCaseSensitivePreserveInts(raw, into)
}

// decodeStrict decodes raw into into with the API server's decoder, and reports whether raw
// had fields into's type lacks.
func decodeStrict[T any](raw json.RawMessage, into *[]T) (unknown bool, err error) {
	strict, err := sigsjson.UnmarshalStrict(raw, into, sigsjson.DisallowUnknownFields)
	return len(strict) > 0, err
}

// decodeHead decodes a pod's head as unmarshal does, with the v2 library; input it refuses is
// decoded by unmarshal, whose error is returned.
func decodeHead(raw []byte, v *headView) error {
	if jsonv2.Unmarshal(raw, v, asAPIServer) == nil {
		return nil
	}
	*v = headView{} // what was decoded would be merged into
	return unmarshal(raw, v)
}

// decodeMounts decodes a container's volume mounts as decodeStrict does, with the v2 library;
// a list with an unknown field, or that it refuses, is decoded by decodeStrict.
func decodeMounts(raw json.RawMessage, into *[]corev1.VolumeMount) (unknown bool, err error) {
	if jsonv2.Unmarshal(raw, into, asStrict) == nil {
		return false, nil
	}
	*into = nil // what was decoded would be merged into
	return decodeStrict(raw, into)
}

// review is an AdmissionReview, v1 or v1beta1 (they share their fields).
type review struct {
	APIVersion string      `json:"apiVersion"`
	Kind       string      `json:"kind"`
	Request    requestSlot `json:"request"`
	// Other holds the members that are not the three above; a review with any is left to
	// controller-runtime, which reads the review's kind and version case-insensitively (a
	// "Kind" counts for it).
	Other jsontext.Value `json:",embed"`
}

// requestSlot holds a review's request as a pointer to it would, given the body for podObject.
// A null request is noted: controller-runtime decodes into a request it holds before it
// decodes, and a null there leaves what follows to another one, so the handler sees an empty
// request; such a review is left to it (decodeReview).
type requestSlot struct {
	body []byte
	req  *reviewRequest
	null bool
}

func (s *requestSlot) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	if dec.PeekKind() == 'n' {
		s.req, s.null = nil, true
		_, err := dec.ReadToken()
		return err
	}
	if s.req == nil {
		s.req = &reviewRequest{Object: podObject{body: s.body}}
	}
	return jsonv2.UnmarshalDecode(dec, s.req)
}

// reviewRequest is an AdmissionRequest whose object podObject reads.
type reviewRequest struct {
	admissionv1.AdmissionRequest
	Object podObject `json:"object"`
}

// podObject reads a request's object in the review's own pass: its head (what every admission
// reads of a pod, as decodeHead decodes it) is decoded from the review's decoder, and its
// bytes are the review's own, not a copy. Any other value is kept as RawExtension keeps it.
type podObject struct {
	body  []byte // the review, which the object is part of
	raw   []byte
	head  *headView
	reads int
}

func (o *podObject) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	o.reads++
	o.raw, o.head = nil, nil
	if dec.PeekKind() != '{' {
		// As RawExtension.UnmarshalJSON reads it.
		val, err := dec.ReadValue()
		if err == nil && string(val) != "null" {
			o.raw = append([]byte(nil), val...)
		}
		return err
	}
	start := dec.InputOffset() // the end of the member's name
	var v headView
	if err := jsonv2.UnmarshalDecode(dec, &v); err != nil {
		return err
	}
	end := dec.InputOffset()
	// The colon and any white space, then the object.
	o.raw, o.head = bytes.TrimLeft(o.body[start:end:end], " \t\r\n:"), &v
	return nil
}

// errNotPlain is a review that decodeReview leaves to controller-runtime's decoder.
var errNotPlain = errors.New("not a plain AdmissionReview")

var reviewKinds = map[string]schema.GroupVersionKind{
	"admission.k8s.io/v1":      admissionv1.SchemeGroupVersion.WithKind("AdmissionReview"),
	"admission.k8s.io/v1beta1": {Group: "admission.k8s.io", Version: "v1beta1", Kind: "AdmissionReview"},
}

// decodeReview decodes an AdmissionReview's request as controller-runtime's Webhook decodes it
// (the API server's decoder, into the v1 types) and returns the review's kind for the
// response. A review with other members than apiVersion, kind and request, of another kind
// or version, without a request, or that the v2 library refuses, is an error: controller-runtime
// decodes such a body itself, and answers it as it does (FuzzDecodeReview).
//
// The request's object is read once, with the review (podObject), and its head returned. An
// object the head cannot be decoded from, or a review with two, is an error too:
// controller-runtime then decodes the review, and the handler the pod, whose error is the
// reference decoder's.
func decodeReview(body []byte) (admission.Request, schema.GroupVersionKind, *headView, error) {
	rv := review{Request: requestSlot{body: body}}
	if err := jsonv2.Unmarshal(body, &rv, asAPIServer); err != nil {
		return admission.Request{}, schema.GroupVersionKind{}, nil, fmt.Errorf("%w: %w", errNotPlain, err)
	}
	gvk, known := reviewKinds[rv.APIVersion]
	if !known || rv.Kind != "AdmissionReview" || rv.Request.req == nil || rv.Request.null || len(rv.Other) > 0 || rv.Request.req.Object.reads > 1 {
		return admission.Request{}, schema.GroupVersionKind{}, nil, errNotPlain
	}
	in := rv.Request.req
	req := admission.Request{AdmissionRequest: in.AdmissionRequest}
	req.Object.Raw = in.Object.raw
	return req, gvk, in.Object.head, nil
}

// decodedHead carries, in a request's context, the head decodeReview decoded from the
// request's object, for the handler not to decode it again.
type decodedHead struct {
	raw  []byte
	view *headView
}

type decodedHeadKey struct{}

func withHead(ctx context.Context, raw []byte, view *headView) context.Context {
	if view == nil {
		return ctx
	}
	return context.WithValue(ctx, decodedHeadKey{}, decodedHead{raw: raw, view: view})
}

// headOf returns the head decoded from raw as the review was decoded, if it was: the very
// bytes, not equal ones.
func headOf(ctx context.Context, raw []byte) (*headView, bool) {
	d, ok := ctx.Value(decodedHeadKey{}).(decodedHead)
	if !ok || len(raw) == 0 || len(d.raw) != len(raw) || &d.raw[0] != &raw[0] {
		return nil, false
	}
	return d.view, true
}
