package integration

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/test/builders"
)

// TestPinnedImagesPolicyRefusesASwappedSidecar: the shipped pinned-images
// ValidatingAdmissionPolicy (installed by the suite from config/default) refuses a pod whose
// pinned sidecar a mutating webhook called after ours swapped for another image, naming the
// container and the image it was injected with, and admits the same pods without that webhook;
// a webhook that only rewrites the repository (a registry mirror) keeps the digest and
// passes; every other pod of the suite, pinned or not, passes it.
func TestPinnedImagesPolicyRefusesASwappedSidecar(t *testing.T) {
	pinned := "registry.test/agent:1.0@sha256:" + strings.Repeat("a", 64)
	set := builders.SidecarSet("it-final-state", builders.Selecting("final-state"),
		builders.WithContainers(corev1.Container{Name: "agent", Image: pinned}))
	createSet(t, set)
	waitForSet(t, set)
	ns := newNamespace(t, nil)

	// A webhook that swaps the agent's image, called after ours (configurations are called in
	// name order) on pods labelled swap-sidecar.
	swapped := "registry.test/agent:1.0-debug"
	mirrored := "mirror.test/agent@sha256:" + strings.Repeat("a", 64) // the same digest from a mirror
	cert, err := tls.LoadX509KeyPair(filepath.Join(hooks.LocalServingCertDir, "tls.crt"), filepath.Join(hooks.LocalServingCertDir, "tls.key"))
	must(t, err)
	ln, err := tls.Listen("tcp", net.JoinHostPort(hooks.LocalServingHost, "0"), &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	must(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var pod corev1.Pod
		resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		if err := json.Unmarshal(review.Request.Object.Raw, &pod); err == nil {
			to := swapped
			if pod.Labels["swap-sidecar"] == "mirror" {
				to = mirrored
			}
			for i, c := range pod.Spec.Containers {
				if c.Name == "agent" {
					patch := fmt.Sprintf(`[{"op":"replace","path":"/spec/containers/%d/image","value":%q}]`, i, to)
					resp.Patch, resp.PatchType = []byte(patch), ptr.To(admissionv1.PatchTypeJSONPatch)
				}
			}
		}
		review.Response, review.Request = resp, nil
		_ = json.NewEncoder(w).Encode(review)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	swapper := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "zz-it-swap-sidecar-image"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "swap.it.sidecarset.io",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				URL: ptr.To("https://" + ln.Addr().String() + "/swap"), CABundle: hooks.LocalServingCAData},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "swap-sidecar", Operator: metav1.LabelSelectorOpExists}}},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
		}},
	}
	must(t, k8s.Create(ctx, swapper))
	t.Cleanup(func() { deleteIgnoreNotFound(t, swapper) })

	pod := func(name, swap string) *corev1.Pod {
		p := appPod(ns, name, "final-state", true)
		if swap != "" {
			p.Labels["swap-sidecar"] = swap
		}
		return p
	}
	// Both webhook configuration and policy take effect asynchronously: wait for the refusal.
	var lastErr error
	eventually(t, "the policy to refuse a pod whose pinned sidecar was swapped", func() (bool, string) {
		p := pod("final-state-swapped", "true")
		p.GenerateName, p.Name = p.Name+"-", ""
		lastErr = k8s.Create(ctx, p)
		if lastErr == nil {
			return false, fmt.Sprintf("admitted with agent image %q", imageOf(p, "agent"))
		}
		return strings.Contains(lastErr.Error(), "sidecarset-pinned-images"), lastErr.Error()
	})
	for _, part := range []string{"agent=" + pinned, appsv1alpha1.ImagesAnnotation, "mutating webhook called after"} {
		if !strings.Contains(lastErr.Error(), part) {
			t.Errorf("refusal %q does not name %q", lastErr, part)
		}
	}
	// Without the swap, the pod is admitted, its sidecar pinned and recorded.
	ok := pod("final-state-kept", "")
	must(t, k8s.Create(ctx, ok))
	if got := imageOf(ok, "agent"); got != pinned {
		t.Errorf("pod without the swapping webhook has agent image %q; want %s", got, pinned)
	}
	if got := ok.Annotations[appsv1alpha1.ImagesAnnotation]; got != "agent="+pinned {
		t.Errorf("%s = %q; want agent=%s", appsv1alpha1.ImagesAnnotation, got, pinned)
	}
	// A registry mirror rewriting the repository keeps the digest: admitted.
	mirror := pod("final-state-mirrored", "mirror")
	must(t, k8s.Create(ctx, mirror))
	if got := imageOf(mirror, "agent"); got != mirrored {
		t.Errorf("pod through the mirroring webhook has agent image %q; want %s", got, mirrored)
	}
}
