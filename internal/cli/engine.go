package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/explain"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/opmetrics"
	"github.com/sidecarset/sidecarset-operator/internal/revision"
	"github.com/sidecarset/sidecarset-operator/internal/snapshot"
	"github.com/sidecarset/sidecarset-operator/internal/webhook"
)

// Engine runs the pod webhook's own admission handler, fed with SidecarSets read from the
// cluster or from files: what the plugin prints is what the webhook makes of the same pod.
type Engine struct {
	store     *snapshot.Store
	injector  *webhook.PodInjector
	revisions []*appsv1.ControllerRevision
}

// NewEngine compiles the SidecarSets (and the stored revisions that sets may pin) the way the
// operator does. scope names the namespaces never injected, as the operator's own namespace
// and --excluded-namespaces do. namespaceLabels and limitRanges look a namespace's labels and
// LimitRanges up, as the webhook's do in the manager's cache; a nil limitRanges checks none.
func NewEngine(sidecarSets []*appsv1alpha1.SidecarSet, revisions []*appsv1.ControllerRevision, scope inject.Scope,
	namespaceLabels webhook.NamespaceLabelsFunc, limitRanges webhook.LimitRangesFunc) (*Engine, error) {
	store := snapshot.NewStore()
	for _, r := range revisions {
		store.UpsertRevision(r)
	}
	for _, s := range sidecarSets {
		store.Upsert(s)
	}
	store.SetSynced(func() bool { return true })
	podSecurity, err := webhook.NewPodSecurity()
	if err != nil {
		return nil, err
	}
	injector := &webhook.PodInjector{
		Metrics: opmetrics.Unregistered(), // the plugin serves no metrics
		Sets:    store, NamespaceLabels: recording(namespaceLabels), Scope: scope, PodSecurity: podSecurity,
	}
	if limitRanges != nil {
		injector.LimitRanges = recording(limitRanges)
	}
	return &Engine{store: store, revisions: revisions, injector: injector}, nil
}

// lookupFailure is where, during one InjectPod, the engine's lookups keep their error: the
// handler answers it as an internal error, a message without the error's type, and InjectPod
// returns the error itself instead, so that a cluster that failed a read exits ExitCluster.
type lookupFailure struct{ err error }

type lookupFailureKey struct{}

// recording wraps a lookup so that its error is kept in the context's lookupFailure, if any.
func recording[T any](lookup func(context.Context, string) (T, error)) func(context.Context, string) (T, error) {
	return func(ctx context.Context, name string) (T, error) {
		v, err := lookup(ctx, name)
		if slot, ok := ctx.Value(lookupFailureKey{}).(*lookupFailure); ok && err != nil {
			slot.err = err
		}
		return v, err
	}
}

// Outcome is the webhook's answer for a pod that it admits.
type Outcome struct {
	// Changed is true when the webhook patched the pod.
	Changed bool
	// Message says why the pod was left alone, when it was.
	Message string
	// Warnings are the admission warnings the API server would show.
	Warnings []string
}

// DeniedError is the webhook refusing a pod: the message is the one the API server returns.
type DeniedError struct{ Message string }

func (e *DeniedError) Error() string { return e.Message }

// InjectPod admits a pod's JSON at creation in namespace and returns the pod as the webhook
// leaves it. A refusal is a *DeniedError.
func (e *Engine) InjectPod(ctx context.Context, raw []byte, namespace string) ([]byte, Outcome, error) {
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		// No UID: a set that pins a revision with policy Partial then draws the pod by its
		// namespace and name, so the same file always comes out the same.
		Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Operation: admissionv1.Create,
		Namespace: namespace,
		Object:    runtime.RawExtension{Raw: raw},
	}}
	failure := &lookupFailure{}
	resp := e.injector.Handle(context.WithValue(ctx, lookupFailureKey{}, failure), req)
	out := Outcome{Warnings: resp.Warnings}
	if !resp.Allowed {
		if failure.err != nil {
			return nil, out, failure.err
		}
		msg := "the webhook refused the pod"
		if resp.Result != nil {
			msg = resp.Result.Message
			if resp.Result.Code != http.StatusForbidden {
				return nil, out, fmt.Errorf("%s", msg)
			}
		}
		return nil, out, &DeniedError{Message: msg}
	}
	if len(resp.Patches) == 0 {
		if resp.Result != nil {
			out.Message = resp.Result.Message
		}
		return raw, out, nil
	}
	ops, err := json.Marshal(resp.Patches)
	if err != nil {
		return nil, out, err
	}
	patch, err := jsonpatch.DecodePatch(ops)
	if err != nil {
		return nil, out, err
	}
	patched, err := patch.Apply(raw)
	if err != nil {
		return nil, out, fmt.Errorf("applying the webhook's patch: %w", err)
	}
	out.Changed = true
	return patched, out, nil
}

// Explain says what every SidecarSet does to the pod, as explain.Explain, with the labels and
// the LimitRanges of its namespace looked up as the webhook looks them up.
func (e *Engine) Explain(ctx context.Context, pod *corev1.Pod, existing bool) ([]explain.Explanation, error) {
	snap := e.store.Load()
	p := explain.Pod{Pod: pod, Existing: existing}
	var err error
	if p.NamespaceLabels, err = e.NamespaceLabels(ctx, pod.Namespace); err != nil {
		return nil, err
	}
	// The webhook reads nothing more of a pod the engine's gate keeps out.
	if ok, _, _ := inject.Gate(&pod.ObjectMeta, p.NamespaceLabels, e.injector.Scope); ok {
		candidates := inject.Candidates(snap.Sets, pod.Labels)
		if p.LimitRanges, err = e.injector.NamespaceLimitRanges(ctx, pod.Namespace, candidates); err != nil {
			return nil, err
		}
	}
	return explain.Explain(snap, p, explain.Options{Scope: e.injector.Scope, Injected: e.injected,
		AllowedAnnotations: e.injector.AllowedAnnotations, Now: time.Now()}), nil
}

// injected is the set as it was at the hash, from its stored revision.
func (e *Engine) injected(c *inject.CompiledSet, hash string) *inject.CompiledSet {
	i := slices.IndexFunc(e.revisions, func(r *appsv1.ControllerRevision) bool { return r.Name == revision.Name(c.Name(), hash) })
	if i < 0 {
		return nil
	}
	old, err := revision.Content(c.Set, e.revisions[i])
	if err != nil {
		return nil
	}
	compiled, err := inject.Compile(old)
	if err != nil {
		return nil
	}
	return compiled
}

// NamespaceLabels looks the labels of a namespace up with the engine's function.
func (e *Engine) NamespaceLabels(ctx context.Context, ns string) (map[string]string, error) {
	return e.injector.NamespaceLabels(ctx, ns)
}
