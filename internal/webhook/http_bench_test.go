package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// reviewBody is the AdmissionReview the API server sends for the creation of realisticPod,
// with what it fills in: request and resource kinds, the user, dryRun and the create options.
func reviewBody(tb testing.TB) []byte {
	tb.Helper()
	pod := realisticPod()
	raw, err := json.Marshal(pod)
	if err != nil {
		tb.Fatal(err)
	}
	podKind := metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	pods := metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: "705ab4f5-6393-11e8-b7cc-42010a800002", Kind: podKind, Resource: pods,
			RequestKind: &podKind, RequestResource: &pods, Namespace: pod.Namespace, Operation: admissionv1.Create,
			UserInfo: authenticationv1.UserInfo{Username: "system:serviceaccount:kube-system:replicaset-controller",
				UID: "6f3d1f0e-2b7a-4f65-9d51-0b1a0e4c7d21", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}},
			Object:  runtime.RawExtension{Raw: raw},
			DryRun:  ptr.To(false),
			Options: runtime.RawExtension{Raw: []byte(`{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1"}`)},
		},
	}
	body, err := json.Marshal(review)
	if err != nil {
		tb.Fatal(err)
	}
	return body
}

// serveReview posts body to h as the API server does and returns the response's body.
func serveReview(tb testing.TB, h http.Handler, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, PodInjectorPath, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		tb.Fatalf("status %d: %s", w.Code, w.Body.String())
	}
	return w
}

// BenchmarkServeHTTP measures one admission on the full HTTP path, AdmissionReview bytes in
// and response bytes out, at 1, 10 and 100 SidecarSets: as controller-runtime serves it (its
// admission.Webhook, which decodes the whole review with the API machinery's universal
// deserializer, and a handler decoding the pod with the API server's decoder) and as the
// operator serves it (Review: decodeReview, decodeHead, decodeMounts).
func BenchmarkServeHTTP(b *testing.B) {
	body := reviewBody(b)
	for _, n := range []int{1, 10, 100} {
		injector := benchInjector(n, "")
		before := benchInjector(n, "")
		before.jsonHead = true
		for _, s := range []struct {
			name string
			h    http.Handler
		}{
			{"controller-runtime", &admission.Webhook{Handler: before}},
			{"ours", NewReview(injector)},
		} {
			b.Run(fmt.Sprintf("sets=%d/%s", n, s.name), func(b *testing.B) {
				if w := serveReview(b, s.h, body); !bytes.Contains(w.Body.Bytes(), []byte(`"patch":`)) {
					b.Fatalf("no patch in %s", w.Body.String())
				}
				b.ReportAllocs()
				for b.Loop() {
					serveReview(b, s.h, body)
				}
			})
		}
	}
}
