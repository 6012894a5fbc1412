package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/eventcatalog"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/opmetrics"
	"github.com/sidecarset/sidecarset-operator/internal/snapshot"
)

// PodInjectorPath is where the pod injector is served; config/webhook registers it.
const PodInjectorPath = "/mutate-v1-pod"

// reinvocationPolicy Never: the API server calls the injector once per pod. After a webhook
// changes a pod, the API server re-runs its in-tree admission plugins anyway (ServiceAccount,
// LimitRanger, AlwaysPullImages give the sidecars what every container gets), so a second call
// could only undo or repeat that work. The one thing it would catch, a webhook ordered after
// ours adding labels that make the pod match, is documented in the README.
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=limitranges,verbs=get;list;watch
// +kubebuilder:webhook:path=/mutate-v1-pod,mutating=true,failurePolicy=fail,sideEffects=None,groups="",resources=pods,verbs=create,versions=v1,name=inject.sidecarset.io,admissionReviewVersions=v1,timeoutSeconds=5,reinvocationPolicy=Never

// NamespaceLabelsFunc returns the labels of a namespace.
type NamespaceLabelsFunc func(ctx context.Context, name string) (map[string]string, error)

// LimitRangesFunc returns the LimitRanges of a namespace.
type LimitRangesFunc func(ctx context.Context, namespace string) ([]corev1.LimitRange, error)

// PodInjector mutates opted-in Pods at creation. The API server only calls it for Pods with the
// opt-in label (the webhook's objectSelector), outside excluded namespaces; it asks the engine's
// gate (inject.Gate) all the same, since its registration's selectors can be replaced (OLM).
type PodInjector struct {
	// Sets is the compiled view of every SidecarSet.
	Sets *snapshot.Store
	// NamespaceLabels looks a namespace's labels up: in the manager's cache, and in the API
	// server when the cache does not have it yet (NamespaceLabelsFrom).
	NamespaceLabels NamespaceLabelsFunc
	// LimitRanges looks a namespace's LimitRanges up (in the manager's cache), so that a sidecar
	// that breaks one is refused naming its SidecarSet rather than by the API server's
	// LimitRanger, whose message names neither. Nil checks none.
	LimitRanges LimitRangesFunc
	// Scope names the namespaces never injected by name, whatever the webhook configuration
	// says: the operator's own and --excluded-namespaces (kube-system always).
	Scope inject.Scope
	// AllowedAnnotations are the annotation keys SidecarSets may patch onto pods
	// (--patch-pod-metadata-allowed-keys); nil allows none.
	AllowedAnnotations *inject.KeyAllowList
	// PodSecurity, when set, names the SidecarSets whose injection makes a pod break its
	// namespace's enforced Pod Security Standard (a warning, and an event on each set).
	PodSecurity *PodSecurity
	// Recorder records events on SidecarSets; required with PodSecurity.
	Recorder events.EventRecorder
	// Metrics are the operator's metrics (opmetrics.New); required.
	Metrics *opmetrics.Metrics
	// Refusals hears of every pod refused because of a SidecarSet (never of a dry run), so
	// that the set's status and events say so; nil tells no one.
	Refusals RefusalRecorder

	// jsonHead decodes the pod with the API server's decoder alone (unmarshal and
	// decodeStrict, not decodeHead and decodeMounts): what BenchmarkServeHTTP compares with.
	jsonHead bool
}

var _ admission.Handler = &PodInjector{}

// RefusalRecorder hears of the pods the webhook refuses because of a SidecarSet (see
// internal/refusals).
type RefusalRecorder interface {
	// Refused: the pod of namespace, whose controller is workload (namespace/Kind/name, "" for
	// none), was refused because of set, for reason, with message.
	Refused(set *appsv1alpha1.SidecarSet, reason inject.Reason, message, namespace, workload string)
}

// Handle implements admission.Handler.
func (h *PodInjector) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create || req.Resource.Resource != "pods" || req.Resource.Group != "" || req.SubResource != "" {
		return h.skip(reasonNotPodCreate, "not a pod creation")
	}
	var view headView
	decode := decodeHead
	if h.jsonHead {
		decode = func(raw []byte, v *headView) error { return unmarshal(raw, v) }
	}
	if decoded, ok := headOf(ctx, req.Object.Raw); ok {
		view = *decoded
	} else if err := decode(req.Object.Raw, &view); err != nil {
		return h.decodeError(err)
	}
	return unroute(&view.Metadata, h.handle(ctx, req, &view))
}

// unroute removes, from a pod let through unchanged (the engine handles every pod it changes),
// the policy mode's routing marks, so that no pod this webhook admits is stored with them, and
// a record of pinned sidecar images the pod's author wrote (sidecarset.io/images), which only
// the engine writes: the pinned-images admission policy would hold the pod to it. The route
// label goes from opted-in pods only, the only ones a policy marks: a label may be in a
// controller's selector, and one the author wrote on another pod is left as written.
func unroute(meta *podMeta, resp admission.Response) admission.Response {
	if !resp.Allowed || len(resp.Patches) > 0 {
		return resp
	}
	var ops []jsonpatch.Operation
	remove := func(field, key string) {
		ops = append(ops, jsonpatch.Operation{Operation: "remove", Path: "/metadata/" + field + "/" + strings.ReplaceAll(key, "/", "~1")})
	}
	if _, ok := meta.Labels[appsv1alpha1.WebhookRouteLabel]; ok && inject.OptedIn(meta.Labels) {
		remove("labels", appsv1alpha1.WebhookRouteLabel)
	}
	for _, key := range []string{appsv1alpha1.WebhookRouteAnnotation, appsv1alpha1.ImagesAnnotation} {
		if _, ok := meta.Annotations[key]; ok {
			remove("annotations", key)
		}
	}
	if len(ops) == 0 {
		return resp
	}
	out := admission.Patched(resp.Result.Message, ops...)
	out.Warnings = resp.Warnings
	return out
}

func (h *PodInjector) handle(ctx context.Context, req admission.Request, view *headView) admission.Response {
	meta := &view.Metadata
	if meta.Namespace == "" {
		meta.Namespace = req.Namespace
	}
	// The gate first without the namespace's labels: a pod it turns away for its own labels,
	// annotations or namespace name, or that no set selects, costs no namespace read and
	// cannot fail on one.
	gated := metav1.ObjectMeta{Namespace: meta.Namespace, Labels: meta.Labels, Annotations: meta.Annotations}
	if ok, reason, msg := inject.Gate(&gated, nil, h.Scope); !ok {
		return h.skip(string(reason), msg)
	}
	if !h.Sets.Ready() {
		h.Metrics.Admissions.WithLabelValues(resultError, reasonNotReady).Inc()
		return admission.Errored(http.StatusServiceUnavailable, errors.New("the SidecarSet cache has not synced yet; retry shortly"))
	}
	snap := h.Sets.Load()
	if meta.Annotations[appsv1alpha1.StatusAnnotation] == "" && len(inject.Candidates(snap.Sets, meta.Labels)) == 0 {
		return h.skip(reasonNoMatch, "no SidecarSet selects this pod")
	}
	// Then with them, for the opt-out label: read on every admission that may inject, as under
	// OLM the webhook's own namespaceSelector is replaced.
	namespaceLabels, err := h.NamespaceLabels(ctx, meta.Namespace)
	if err != nil {
		h.Metrics.Admissions.WithLabelValues(resultError, reasonNamespaceLookup).Inc()
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("reading namespace %s: %w", meta.Namespace, err))
	}
	if ok, reason, msg := inject.Gate(&gated, namespaceLabels, h.Scope); !ok {
		return h.skip(string(reason), msg)
	}
	return h.admit(ctx, req, view, snap, namespaceLabels).WithWarnings(invalidWarnings(snap)...).WithWarnings(stoppedWarnings(snap, meta.Labels)...).WithWarnings(pinWarnings(snap, meta.Labels)...)
}

// pinWarnings tell the user which SidecarSets that select the pod pin a revision that is not
// stored, and so inject their current spec instead.
func pinWarnings(snap *snapshot.Snapshot, podLabels map[string]string) []string {
	if len(snap.PinMissing) == 0 {
		return nil
	}
	var out []string
	for _, c := range inject.Candidates(snap.Sets, podLabels) {
		if pin, ok := snap.PinMissing[c.Name()]; ok {
			out = append(out, fmt.Sprintf("SidecarSet %q pins %s (spec.injectionStrategy.revision); it injects its current spec instead", c.Name(), pin))
		}
	}
	return out
}

// stoppedWarnings tell the user which SidecarSets select the pod's labels but inject nothing
// because they conflict with an older set (see snapshot.Conflict), so a missing sidecar is
// explained where the pod is created, not only in the SidecarSet's status.
func stoppedWarnings(snap *snapshot.Snapshot, podLabels map[string]string) []string {
	if len(snap.Valid) == len(snap.Sets) {
		return nil // the common case: no set is stopped
	}
	var out []string
	for _, c := range inject.Candidates(snap.Valid, podLabels) {
		for _, conflict := range snap.Conflicts[c.Name()] {
			if conflict.Stopped {
				out = append(out, fmt.Sprintf("SidecarSet %q selects this pod but injects nothing while it conflicts with the older SidecarSet %q (%s); see its Conflict condition",
					c.Name(), conflict.With, strings.Join(conflict.Fields, "; ")))
			}
		}
	}
	return out
}

// invalidWarnings tell the user which SidecarSets cannot be used (possible only when they were
// written while the validating webhook was down): they inject nothing, whatever they meant to
// select, and the user should know why a sidecar may be missing.
func invalidWarnings(snap *snapshot.Snapshot) []string {
	var out []string
	for _, name := range sets.List(sets.KeySet(snap.Invalid)) {
		out = append(out, fmt.Sprintf("SidecarSet %q is invalid and injects nothing: %v", name, snap.Invalid[name]))
	}
	return out
}

func (h *PodInjector) admit(ctx context.Context, req admission.Request, view *headView, snap *snapshot.Snapshot, namespaceLabels map[string]string) admission.Response {
	meta := &view.Metadata
	candidates := inject.Candidates(snap.Sets, meta.Labels)
	if len(candidates) == 0 && meta.Annotations[appsv1alpha1.StatusAnnotation] == "" {
		return h.skip(reasonNoMatch, "no SidecarSet selects this pod")
	}
	pod := headPod(view)
	mounts := decodeMounts
	if h.jsonHead {
		mounts = decodeStrict[corev1.VolumeMount]
	}
	limitRanges, err := h.NamespaceLimitRanges(ctx, meta.Namespace, candidates)
	if err != nil {
		h.Metrics.Admissions.WithLabelValues(resultError, reasonNamespaceLookup).Inc()
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("reading the LimitRanges of namespace %s: %w", meta.Namespace, err))
	}
	// The engine says what it reads of the pod; the rest is never decoded.
	reads := inject.ReadsOf(candidates, limitRanges, meta.Annotations)
	admitted, err := decodeAppLists(view, pod, reads, mounts)
	if err != nil {
		return h.decodeError(err)
	}
	if reads.ContainerResources {
		if err := decodeAppResources(view, pod); err != nil {
			return h.decodeError(err)
		}
	}
	if reads.Ports || reads.PodResources && hasPodResources(view.Spec.Resources) || needsFull(view, reads.Compared) {
		var full fullView
		if err := unmarshal(req.Object.Raw, &full); err != nil {
			return h.decodeError(err)
		}
		full.Metadata.Namespace = meta.Namespace
		if pod, err = fullPod(&full); err != nil {
			return h.decodeError(err)
		}
	}
	return h.inject(ctx, req, admitted, pod, candidates, snap.Get, namespaceLabels, limitRanges)
}

func (h *PodInjector) decodeError(err error) admission.Response {
	h.Metrics.Admissions.WithLabelValues(resultError, reasonDecode).Inc()
	return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding pod: %w", err))
}

func (h *PodInjector) inject(ctx context.Context, req admission.Request, entries inject.Admitted, pod *corev1.Pod, candidates []*inject.CompiledSet,
	setByName func(string) (*inject.CompiledSet, bool), namespaceLabels map[string]string, limitRanges []corev1.LimitRange) admission.Response {
	in := inject.Input{Pod: pod, Sets: candidates, NamespaceLabels: namespaceLabels, SetByName: setByName, AllowedAnnotations: h.AllowedAnnotations,
		Key: string(req.UID), LimitRanges: limitRanges}
	res, err := inject.Apply(in)
	// A dry run has no side effects (the webhook says sideEffects: None): no event, and no
	// refusal recorded on the set.
	dryRun := req.DryRun != nil && *req.DryRun
	if refused := (*inject.RefusedError)(nil); errors.As(err, &refused) {
		h.Metrics.Admissions.WithLabelValues(resultDenied, string(refused.Reason)).Inc()
		if refused.SidecarSet != "" {
			h.Metrics.Decisions.WithLabelValues(refused.SidecarSet, resultDenied, string(refused.Reason)).Inc()
			if c, ok := setByName(refused.SidecarSet); ok && !dryRun && h.Refusals != nil {
				h.Refusals.Refused(c.Set, refused.Reason, refused.Error(), pod.Namespace, controllerOf(req.Object.Raw, pod.Namespace))
			}
		}
		return admission.Denied(refused.Error())
	} else if err != nil {
		h.Metrics.Admissions.WithLabelValues(resultError, reasonInjectionError).Inc()
		return admission.Errored(http.StatusInternalServerError, err)
	}
	for _, s := range res.Skipped {
		h.Metrics.Decisions.WithLabelValues(s.SidecarSet, resultSkipped, string(s.Reason)).Inc()
	}
	if !res.Changed() {
		if len(res.Injected) == 0 {
			return h.skip(reasonNoMatch, "no SidecarSet injects into this pod").WithWarnings(res.Warnings...)
		}
		for _, name := range res.Injected {
			h.Metrics.Decisions.WithLabelValues(name, resultSkipped, reasonUnchanged).Inc()
		}
		return h.skip(reasonUnchanged, "already injected").WithWarnings(res.Warnings...)
	}
	if len(res.Injected) == 0 {
		// Only an earlier injection by SidecarSets that no longer apply is removed.
		h.Metrics.Admissions.WithLabelValues(resultInjected, reasonStripped).Inc()
		return admission.Patched("", res.Patch()...).WithWarnings(res.Warnings...)
	}
	ops, err := res.PatchFrom(entries)
	if err != nil {
		h.Metrics.Admissions.WithLabelValues(resultError, reasonInjectionError).Inc()
		return admission.Errored(http.StatusInternalServerError, err)
	}
	for _, name := range res.Injected {
		h.Metrics.Decisions.WithLabelValues(name, resultInjected, reasonInjected).Inc()
	}
	res.Warnings = append(res.Warnings, h.podSecurityWarnings(req.Object.Raw, in, res, eventcatalog.Recorder{To: h.Recorder, DryRun: dryRun})...)
	h.Metrics.Admissions.WithLabelValues(resultInjected, reasonInjected).Inc()
	ctrl.LoggerFrom(ctx).V(1).Info("Injecting pod", "pod", klog.KRef(pod.Namespace, podName(pod)), "sidecarSets", res.Injected)
	return admission.Patched("", ops...).WithWarnings(res.Warnings...)
}

func (h *PodInjector) skip(reason, message string) admission.Response {
	h.Metrics.Admissions.WithLabelValues(resultSkipped, reason).Inc()
	return admission.Allowed(message)
}

// podName names a Pod in logs; at creation it often has only a generateName.
func podName(pod *corev1.Pod) string {
	if pod.Name != "" {
		return pod.Name
	}
	return pod.GenerateName + "<generated>"
}

// podSecurityWarnings says which SidecarSets make the pod break its namespace's enforced Pod
// Security Standard (PodSecurity admission then refuses it), and records it on those sets
// with events (which records nothing for a dry run).
// The checks read the whole pod, so in such namespaces it is decoded whole and injected again.
func (h *PodInjector) podSecurityWarnings(raw []byte, in inject.Input, res *inject.Result, events eventcatalog.Recorder) []string {
	lv, ok := h.PodSecurity.Enforced(in.NamespaceLabels)
	if !ok {
		return nil
	}
	var whole corev1.Pod
	if err := unmarshal(raw, &whole); err != nil {
		return nil // decoded once already; cannot happen
	}
	whole.Namespace = in.Pod.Namespace
	in.Pod = &whole
	again, err := inject.Apply(in)
	if err != nil {
		return nil
	}
	violation := h.PodSecurity.Violation(lv, &whole, again.Pod())
	if violation == "" {
		return nil
	}
	const advice = "; PodSecurity admission will refuse the pod: change the sidecars' securityContext, or narrow the SidecarSet's selectors away from namespace "
	sets := strings.Join(res.Injected, ", ")
	msg := fmt.Sprintf("injecting SidecarSet(s) %s into pod %s/%s %s%s%s", sets, whole.Namespace, podName(&whole), violation, advice, whole.Namespace)
	// The event on the cluster-scoped set is read by anyone who may read SidecarSets: it names
	// the namespace, not the pod (the pod's author gets the warning, which names it).
	note := fmt.Sprintf("injecting SidecarSet(s) %s into a pod of namespace %s %s%s%s", sets, whole.Namespace, violation, advice, whole.Namespace)
	for _, c := range in.Sets {
		if slices.Contains(res.Injected, c.Name()) {
			events.Record(c.Set, eventcatalog.ViolatesPodSecurity, "Inject", "%s", note)
		}
	}
	return []string{msg}
}

// NamespaceLimitRanges returns the LimitRanges the engine judges a pod of namespace by, given
// the SidecarSets that select it (candidates): none when LimitRanges is nil or no candidate
// injects a container. Every sidecar gets the namespace's LimitRange defaults and is held to
// its bounds, whether it declares resources or not. The plugin's explain asks it too, so that
// it calls the engine as the webhook does.
func (h *PodInjector) NamespaceLimitRanges(ctx context.Context, namespace string, candidates []*inject.CompiledSet) ([]corev1.LimitRange, error) {
	if h.LimitRanges == nil || !slices.ContainsFunc(candidates, (*inject.CompiledSet).ReadsLimitRanges) {
		return nil, nil
	}
	return h.LimitRanges(ctx, namespace)
}

// controllerOf names the refused pod's controller as namespace/Kind/name, "" when it has none
// (or its metadata cannot be read). The admission path decodes no owner references; a refusal
// is rare enough to decode them again.
func controllerOf(raw []byte, namespace string) string {
	var pod struct {
		Metadata struct {
			OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
		} `json:"metadata"`
	}
	if unmarshal(raw, &pod) != nil {
		return ""
	}
	for _, o := range pod.Metadata.OwnerReferences {
		if o.Controller != nil && *o.Controller {
			return namespace + "/" + o.Kind + "/" + o.Name
		}
	}
	return ""
}
