package webhook

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/inject/injecttest"
	"github.com/sidecarset/sidecarset-operator/internal/opmetrics"
	"github.com/sidecarset/sidecarset-operator/internal/snapshot"
	"github.com/sidecarset/sidecarset-operator/test/builders"
)

// TestPodInjectorGolden runs every engine golden case through the real handler: the case's
// Pod goes in as an admission request, the answer's JSON patch is applied to the raw request,
// and the result must be the engine's golden Pod (or the golden refusal, as a denial). The
// handler decodes Pods lazily, so this is what proves its partial view of the Pod loses
// nothing the engine needs. Every injected Pod is then admitted again, as the API server's
// reinvocation would, and must come back unchanged.
func TestPodInjectorGolden(t *testing.T) {
	for _, c := range injecttest.LoadCases(t, engineTestdata) {
		t.Run(c.Name, func(t *testing.T) {
			want := readGolden(t, c.Name)
			h := goldenInjector(t, c)
			req := rawRequest(t, mustMarshal(t, c.Pod), c.Pod.Namespace)
			resp := handle(t, h, req)
			if only, stopped := injectingCase(c, h); stopped {
				// The engine refuses a pod two conflicting sets would inject; the snapshot
				// stops the newer set of such a pair first, so the handler injects the older.
				if want.Error == "" {
					t.Fatalf("the store stopped a set of %s, whose golden is not a refusal", c.Name)
				}
				wantPod, err := enginePod(t, only)
				if err != nil || !resp.Allowed {
					t.Fatalf("with the newer set stopped: engine error %v, handler allowed %v (%+v)", err, resp.Allowed, resp.Result)
				}
				assertPod(t, decodePod(t, applyPatch(t, req, resp)), wantPod)
				return
			}
			if want.Error != "" {
				assertDenied(t, resp, want.Error)
				return
			}
			if !resp.Allowed {
				t.Fatalf("want allowed, got %+v", resp.Result)
			}
			if got := len(resp.Patches) > 0; want.Changed == nil || got != *want.Changed {
				t.Errorf("patched = %v, golden changed = %v; patch: %s", got, derefBool(want.Changed), resp.Patch)
			}
			if !slices.Equal(resp.Warnings, want.Warnings) {
				t.Errorf("warnings = %q, want %q", resp.Warnings, want.Warnings)
			}
			patched := applyPatch(t, req, resp)
			assertPod(t, decodePod(t, patched), want.pod(t))

			// Reinvocation: the handler's own output needs nothing more.
			again := handle(t, h, rawRequest(t, patched, c.Pod.Namespace))
			if !again.Allowed || len(again.Patches) > 0 {
				t.Errorf("second admission of the injected pod: allowed %v, patch %s (%+v)", again.Allowed, again.Patch, again.Result)
			}
		})
	}
}

// golden is the part of a <case>.injected.yaml file the handler can be held to.
type golden struct {
	Error    string          `json:"error"`
	Changed  *bool           `json:"changed"`
	Warnings []string        `json:"warnings"`
	Pod      json.RawMessage `json:"pod"`
}

func readGolden(t *testing.T, name string) golden {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(engineTestdata, name+injecttest.GoldenSuffix))
	if err != nil {
		t.Fatalf("reading golden file: %v", err)
	}
	var g golden
	if err := yaml.Unmarshal(raw, &g); err != nil {
		t.Fatalf("decoding golden file: %v", err)
	}
	if g.Error == "" && len(g.Pod) == 0 {
		t.Fatalf("golden file of %s has neither an error nor a pod", name)
	}
	return g
}

func (g golden) pod(t *testing.T) *corev1.Pod { t.Helper(); return decodePod(t, g.Pod) }

// goldenInjector serves the case's SidecarSets, and its Namespace's labels.
// engineTestdata holds the engine's golden cases: <case>.yaml in, <case>.injected.yaml out.
const engineTestdata = "../inject/testdata"

func goldenInjector(t *testing.T, c injecttest.Case) *PodInjector {
	t.Helper()
	store := snapshot.NewStore()
	store.SetSynced(func() bool { return true })
	for _, s := range c.Sets {
		store.Upsert(s)
	}
	if inv := store.Load().Invalid; len(inv) > 0 {
		t.Fatalf("invalid SidecarSets in case %s: %v", c.Name, inv)
	}
	return &PodInjector{Sets: store, AllowedAnnotations: injecttest.AllowList(t), Metrics: opmetrics.Unregistered(),
		NamespaceLabels: func(_ context.Context, name string) (map[string]string, error) {
			if c.Namespace == nil {
				return nil, nil
			}
			if name != c.Namespace.Name {
				return nil, fmt.Errorf("namespace %q looked up, the case defines %q", name, c.Namespace.Name)
			}
			return c.Namespace.Labels, nil
		}}
}

// TestPodInjectorGuards covers every early answer of the handler, and the admission counter
// each one moves.
func TestPodInjectorGuards(t *testing.T) {
	podJSON := string(mustMarshal(t, optedInPod("web", nil)))
	tests := []struct {
		name string
		// edit changes the default request: a CREATE of podJSON in namespace "web".
		edit func(r *admission.Request)
		// injector changes the default injector (synced store with log-agent, no namespace
		// lookup expected).
		injector   func(h *PodInjector)
		allowed    bool
		code       int32
		msg        string // a substring of Result.Message
		wantMetric [2]string
	}{{
		name:    "update is not a creation",
		edit:    func(r *admission.Request) { r.Operation = admissionv1.Update },
		allowed: true, code: http.StatusOK, msg: "not a pod creation",
		wantMetric: [2]string{resultSkipped, reasonNotPodCreate},
	}, {
		name:    "delete is not a creation",
		edit:    func(r *admission.Request) { r.Operation = admissionv1.Delete; r.Object.Raw = nil },
		allowed: true, code: http.StatusOK, msg: "not a pod creation",
		wantMetric: [2]string{resultSkipped, reasonNotPodCreate},
	}, {
		name: "another resource",
		edit: func(r *admission.Request) {
			r.Resource = metav1.GroupVersionResource{Version: "v1", Resource: "services"}
		},
		allowed: true, code: http.StatusOK, msg: "not a pod creation",
		wantMetric: [2]string{resultSkipped, reasonNotPodCreate},
	}, {
		name: "pods of another API group",
		edit: func(r *admission.Request) {
			r.Resource = metav1.GroupVersionResource{Group: "metrics.k8s.io", Version: "v1beta1", Resource: "pods"}
		},
		allowed: true, code: http.StatusOK, msg: "not a pod creation",
		wantMetric: [2]string{resultSkipped, reasonNotPodCreate},
	}, {
		// pods/binding and pods/eviction are CREATEs whose body is not a Pod.
		name:    "subresource",
		edit:    func(r *admission.Request) { r.SubResource = "binding"; r.Object.Raw = []byte(`{"kind":"Binding"}`) },
		allowed: true, code: http.StatusOK, msg: "not a pod creation",
		wantMetric: [2]string{resultSkipped, reasonNotPodCreate},
	}, {
		name: "excluded namespace",
		edit: func(r *admission.Request) {
			r.Namespace, r.Object.Raw = "kube-system", mustMarshal(t, optedInPod("kube-system", nil))
		},
		allowed: true, code: http.StatusOK, msg: "kube-system is never injected",
		wantMetric: [2]string{resultSkipped, string(inject.GateExcludedNamespace)},
	}, {
		// At creation the Pod's metadata.namespace is often empty: the request's counts.
		name: "excluded namespace from the request",
		edit: func(r *admission.Request) {
			r.Namespace, r.Object.Raw = "kube-system", mustMarshal(t, optedInPod("", nil))
		},
		allowed: true, code: http.StatusOK, msg: "kube-system is never injected",
		wantMetric: [2]string{resultSkipped, string(inject.GateExcludedNamespace)},
	}, {
		// OLM replaces the webhook's namespaceSelector, so the injector checks the opt-out too.
		name: "namespace labelled injection disabled",
		injector: func(h *PodInjector) {
			h.NamespaceLabels = namespaceLabels(map[string]string{appsv1alpha1.NamespaceInjectionLabel: appsv1alpha1.NamespaceInjectionDisabled}, nil)
		},
		allowed: true, code: http.StatusOK, msg: "sidecarset.io/injection=disabled",
		wantMetric: [2]string{resultSkipped, string(inject.GateNamespaceOptedOut)},
	}, {
		name: "not opted in",
		edit: func(r *admission.Request) {
			pod := optedInPod("web", nil)
			delete(pod.Labels, appsv1alpha1.InjectLabel)
			r.Object.Raw = mustMarshal(t, pod)
		},
		allowed: true, code: http.StatusOK, msg: "does not carry the label sidecarset.io/inject=true",
		wantMetric: [2]string{resultSkipped, string(inject.GateNotOptedIn)},
	}, {
		name: "opt-in label with another value",
		edit: func(r *admission.Request) {
			r.Object.Raw = mustMarshal(t, optedInPod("web", map[string]string{appsv1alpha1.InjectLabel: "false"}))
		},
		allowed: true, code: http.StatusOK, msg: "does not carry the label sidecarset.io/inject=true",
		wantMetric: [2]string{resultSkipped, string(inject.GateNotOptedIn)},
	}, {
		// The kubelet runs a static pod from its manifest; its mirror pod is never injected.
		name: "mirror pod",
		edit: func(r *admission.Request) {
			pod := optedInPod("web", nil)
			pod.Annotations[corev1.MirrorPodAnnotationKey] = "3c9a1f2e"
			r.Object.Raw = mustMarshal(t, pod)
		},
		allowed: true, code: http.StatusOK, msg: "mirror pods are never injected",
		wantMetric: [2]string{resultSkipped, string(inject.GateMirrorPod)},
	}, {
		name:     "store not synced",
		injector: func(h *PodInjector) { h.Sets.SetSynced(func() bool { return false }) },
		allowed:  false, code: http.StatusServiceUnavailable, msg: "has not synced",
		wantMetric: [2]string{resultError, reasonNotReady},
	}, {
		name:     "store without a sync function",
		injector: func(h *PodInjector) { h.Sets = storeOf(t, nil, logAgentSet("log-agent", nil)) },
		allowed:  false, code: http.StatusServiceUnavailable, msg: "has not synced",
		wantMetric: [2]string{resultError, reasonNotReady},
	}, {
		name:    "malformed JSON",
		edit:    func(r *admission.Request) { r.Object.Raw = []byte(`{"metadata": {`) },
		allowed: false, code: http.StatusBadRequest, msg: "decoding pod",
		wantMetric: [2]string{resultError, reasonDecode},
	}, {
		name:    "labels of the wrong type",
		edit:    func(r *admission.Request) { r.Object.Raw = []byte(`{"metadata": {"labels": "app=demo"}}`) },
		allowed: false, code: http.StatusBadRequest, msg: "decoding pod",
		wantMetric: [2]string{resultError, reasonDecode},
	}, {
		// The second, full decoding fails on a container field the head decoding skips.
		name: "malformed container seen only by the full decoding",
		edit: func(r *admission.Request) {
			r.Object.Raw = []byte(strings.Replace(podJSON, `"containers":[{"name":"app",`,
				`"containers":[{"name":"log-agent","image":7},{"name":"app",`, 1))
		},
		allowed: false, code: http.StatusBadRequest, msg: "decoding pod",
		wantMetric: [2]string{resultError, reasonDecode},
	}, {
		name: "no SidecarSet selects the pod",
		edit: func(r *admission.Request) {
			r.Object.Raw = mustMarshal(t, optedInPod("web", map[string]string{"app": "other"}))
		},
		allowed: true, code: http.StatusOK, msg: "no SidecarSet selects this pod",
		wantMetric: [2]string{resultSkipped, reasonNoMatch},
	}, {
		name: "namespace selector does not match",
		injector: func(h *PodInjector) {
			h.Sets = storeOf(t, ptrTo(func() bool { return true }), logAgentSet("log-agent", map[string]string{"team": "shop"}))
			h.NamespaceLabels = namespaceLabels(map[string]string{"team": "other"}, nil)
		},
		allowed: true, code: http.StatusOK, msg: "no SidecarSet injects into this pod",
		wantMetric: [2]string{resultSkipped, reasonNoMatch},
	}, {
		name: "namespace lookup fails",
		injector: func(h *PodInjector) {
			h.Sets = storeOf(t, ptrTo(func() bool { return true }), logAgentSet("log-agent", map[string]string{"team": "shop"}))
			h.NamespaceLabels = namespaceLabels(nil, errors.New("namespace web not in cache"))
		},
		allowed: false, code: http.StatusInternalServerError, msg: "reading namespace web: namespace web not in cache",
		wantMetric: [2]string{resultError, reasonNamespaceLookup},
	}, {
		name: "paused SidecarSet",
		injector: func(h *PodInjector) {
			set := logAgentSet("log-agent", nil)
			set.Spec.InjectionStrategy.Paused = true
			h.Sets = storeOf(t, ptrTo(func() bool { return true }), set)
		},
		allowed: true, code: http.StatusOK, msg: "no SidecarSet injects into this pod",
		wantMetric: [2]string{resultSkipped, reasonNoMatch},
	}, {
		name: "conflict with an app container",
		edit: func(r *admission.Request) {
			r.Object.Raw = []byte(strings.Replace(podJSON, `"containers":[{"name":"app",`,
				`"containers":[{"name":"log-agent","image":"mine:1","resources":{}},{"name":"app",`, 1))
		},
		allowed: false, code: http.StatusForbidden, msg: `SidecarSet "log-agent" spec.containers[0].name: the pod already has a container named "log-agent"`,
		wantMetric: [2]string{resultDenied, string(inject.ReasonContainerClash)},
	}, {
		name:    "injected",
		allowed: true, code: http.StatusOK,
		wantMetric: [2]string{resultInjected, reasonInjected},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := testInjector(t)
			if tt.injector != nil {
				tt.injector(h)
			}
			req := rawRequest(t, []byte(podJSON), "web")
			if tt.edit != nil {
				tt.edit(&req)
			}
			counter := h.Metrics.Admissions.WithLabelValues(tt.wantMetric[0], tt.wantMetric[1])
			before := value(t, counter)

			resp := handle(t, h, req)

			if resp.Allowed != tt.allowed || resp.Result.Code != tt.code || !strings.Contains(resp.Result.Message, tt.msg) {
				t.Errorf("got allowed %v, code %d, message %q; want %v, %d, a message containing %q",
					resp.Allowed, resp.Result.Code, resp.Result.Message, tt.allowed, tt.code, tt.msg)
			}
			if wantPatch := tt.wantMetric[0] == resultInjected; (len(resp.Patches) > 0) != wantPatch {
				t.Errorf("patch %s, want one: %v", resp.Patch, wantPatch)
			}
			if got := value(t, counter) - before; got != 1 {
				t.Errorf("admissions{result=%q,reason=%q} moved by %v, want 1", tt.wantMetric[0], tt.wantMetric[1], got)
			}
		})
	}
}

// TestPodInjectorMetrics checks that each outcome moves its own counter and no other.
func TestPodInjectorMetrics(t *testing.T) {
	type outcome struct{ result, reason string }
	all := []outcome{{resultInjected, reasonInjected}, {resultSkipped, string(inject.GateNotOptedIn)}, {resultSkipped, reasonNoMatch},
		{resultSkipped, reasonUnchanged}, {resultDenied, string(inject.ReasonContainerClash)}, {resultError, reasonDecode}}
	injected := mustMarshal(t, optedInPod("web", nil))
	tests := []struct {
		name     string
		raw      func(h *PodInjector) []byte
		want     outcome
		decision outcome // the sidecarset_pod_decisions_total{sidecarset="log-agent"} series that moves by one, if any
	}{
		{name: "injected", raw: func(*PodInjector) []byte { return injected }, want: all[0], decision: outcome{resultInjected, reasonInjected}},
		{name: "skipped", raw: func(*PodInjector) []byte {
			return mustMarshal(t, optedInPod("web", map[string]string{appsv1alpha1.InjectLabel: "no"}))
		}, want: all[1]},
		{name: "skipped, no match", raw: func(*PodInjector) []byte {
			return mustMarshal(t, optedInPod("web", map[string]string{"app": "other"}))
		}, want: all[2]},
		{name: "skipped, already injected", raw: func(h *PodInjector) []byte {
			return applyPatch(t, rawRequest(t, injected, "web"), handle(t, h, rawRequest(t, injected, "web")))
		}, want: all[3], decision: outcome{resultSkipped, reasonUnchanged}},
		{name: "denied", raw: func(*PodInjector) []byte {
			return mustMarshal(t, optedInPod("web", map[string]string{}, corev1.Container{Name: "log-agent", Image: "other:1"}))
		}, want: all[4], decision: outcome{resultDenied, string(inject.ReasonContainerClash)}},
		{name: "error", raw: func(*PodInjector) []byte { return []byte("[") }, want: all[5]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := testInjector(t)
			req := rawRequest(t, tt.raw(h), "web")
			before := map[outcome]float64{}
			for _, o := range all {
				before[o] = value(t, h.Metrics.Admissions.WithLabelValues(o.result, o.reason))
			}
			decisionsBefore := map[outcome]float64{}
			for _, o := range all {
				decisionsBefore[o] = value(t, h.Metrics.Decisions.WithLabelValues("log-agent", o.result, o.reason))
			}

			handle(t, h, req)

			for _, o := range all {
				want := 0.0
				if o == tt.want {
					want = 1
				}
				if got := value(t, h.Metrics.Admissions.WithLabelValues(o.result, o.reason)) - before[o]; got != want {
					t.Errorf("admissions{result=%q,reason=%q} moved by %v, want %v", o.result, o.reason, got, want)
				}
			}
			for _, o := range all {
				want := 0.0
				if o == tt.decision {
					want = 1
				}
				if got := value(t, h.Metrics.Decisions.WithLabelValues("log-agent", o.result, o.reason)) - decisionsBefore[o]; got != want {
					t.Errorf("decisions{sidecarset=log-agent,result=%q,reason=%q} moved by %v, want %v", o.result, o.reason, got, want)
				}
			}
		})
	}
}

// TestPodInjectorReinvocation admits a Pod, then its injected form, as the API server does
// when an injected pod comes back (an exported pod created again, or a reinvocation if an
// administrator sets IfNeeded): the second answer must change nothing.
func TestPodInjectorReinvocation(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		// between admissions, as the API server's defaulting does to the injected pod
		between func(*corev1.Pod)
	}{
		{name: "fresh pod", pod: optedInPod("web", nil)},
		{name: "defaulted by the API server in between", pod: optedInPod("web", nil), between: apiServerDefaults},
		{name: "pod without annotations", pod: func() *corev1.Pod { p := optedInPod("web", nil); p.Annotations = nil; return p }()},
		{name: "pod with its own annotations", pod: func() *corev1.Pod {
			p := optedInPod("web", nil)
			p.Annotations = map[string]string{"a/b~c": "d"}
			return p
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := testInjector(t)
			req := rawRequest(t, mustMarshal(t, tt.pod), "web")
			first := handle(t, h, req)
			if len(first.Patches) == 0 {
				t.Fatalf("first admission: no patch (%+v)", first.Result)
			}
			patched := applyPatch(t, req, first)
			pod := decodePod(t, patched)
			if !slices.ContainsFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == "log-agent" }) {
				t.Fatalf("first admission did not inject log-agent: %s", patched)
			}
			if tt.between != nil {
				tt.between(pod)
				patched = mustMarshal(t, pod)
			}
			second := handle(t, h, rawRequest(t, patched, "web"))
			if !second.Allowed || len(second.Patches) > 0 {
				t.Errorf("second admission: allowed %v, patch %s", second.Allowed, second.Patch)
			}
			if second.Result.Message != "already injected" {
				t.Errorf("second admission message %q, want %q", second.Result.Message, "already injected")
			}
		})
	}
}

// apiServerDefaults applies the defaults the API server gives the containers and volumes of a
// Pod (a few of them: those our test sidecar is subject to).
func apiServerDefaults(pod *corev1.Pod) {
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		c.TerminationMessagePath = cmp.Or(c.TerminationMessagePath, corev1.TerminationMessagePathDefault)
		c.TerminationMessagePolicy = cmp.Or(c.TerminationMessagePolicy, corev1.TerminationMessageReadFile)
		if c.ImagePullPolicy == "" {
			c.ImagePullPolicy = corev1.PullIfNotPresent
			if tag := c.Image[strings.LastIndex(c.Image, "/")+1:]; !strings.Contains(tag, ":") || strings.HasSuffix(tag, ":latest") {
				c.ImagePullPolicy = corev1.PullAlways // untagged means latest
			}
		}
	}
	for i := range pod.Spec.Volumes {
		if cm := pod.Spec.Volumes[i].ConfigMap; cm != nil && cm.DefaultMode == nil {
			cm.DefaultMode = ptrTo[int32](corev1.ConfigMapVolumeSourceDefaultMode)
		}
	}
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	pod.Spec.DNSPolicy = corev1.DNSClusterFirst
	pod.Spec.EnableServiceLinks = ptrTo(true)
}

// TestPodInjectorKeepsUnknownFields admits Pods written against a newer API than the one this
// binary vendors: the patch must not drop the fields it does not know.
func TestPodInjectorKeepsUnknownFields(t *testing.T) {
	// The sidecar also copies the app's env var, volume mount and volume device: the copies
	// keep the fields this build does not know.
	set := logAgentSet("log-agent", nil)
	set.Spec.Containers[0].TransferEnv = []appsv1alpha1.TransferEnvVar{{SourceContainerName: "app", EnvName: "E"}}
	set.Spec.Containers[0].ShareVolumePolicy.Type = appsv1alpha1.ShareVolumePolicyEnabled
	set.Spec.Containers[0].ShareVolumeDevicePolicy = &appsv1alpha1.ShareVolumePolicy{Type: appsv1alpha1.ShareVolumePolicyEnabled}
	compiled, err := inject.Compile(set)
	if err != nil {
		t.Fatalf("compiling: %v", err)
	}
	oldRecord := fmt.Sprintf(`{\"log-agent\":{\"hash\":\"%s\",\"containers\":[\"log-agent\"]}}`, "0000000000000000")
	tests := []struct {
		name string
		raw  string
		// wantContainers are the container names after injection, in order.
		wantContainers []string
	}{{
		name: "head decoding",
		raw: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"web","futureMeta":"m",
			"labels":{"app":"demo","sidecarset.io/inject":"true"}},
			"spec":{"futureField":{"x":1},
			"containers":[{"name":"app","image":"a","futureContainerField":true,"env":[{"name":"E","value":"v","futureEnvField":2}],
				"volumeMounts":[{"name":"data","mountPath":"/data","futureMountField":"f"}],
				"volumeDevices":[{"name":"raw","devicePath":"/dev/raw","futureDeviceField":3}]}],
			"volumes":[{"name":"data","futureVolumeSource":{"y":2}},{"name":"raw","persistentVolumeClaim":{"claimName":"raw"}}]},
			"status":{"futureStatus":"s"}}`,
		wantContainers: []string{"app", "log-agent"},
	}, {
		// The status annotation lists a sidecar injected with another hash: the handler
		// decodes the containers in full and the engine replaces the old sidecar.
		name: "full decoding",
		raw: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"web","futureMeta":"m",
			"labels":{"app":"demo","sidecarset.io/inject":"true"},
			"annotations":{"sidecarset.io/status":"` + oldRecord + `"}},
			"spec":{"futureField":{"x":1},
			"containers":[{"name":"app","image":"a","futureContainerField":true,"env":[{"name":"E","value":"v","futureEnvField":2}],
				"volumeMounts":[{"name":"data","mountPath":"/data","futureMountField":"f"}],
				"volumeDevices":[{"name":"raw","devicePath":"/dev/raw","futureDeviceField":3}]},
				{"name":"log-agent","image":"old:1","futureContainerField":"old"}],
			"volumes":[{"name":"data","futureVolumeSource":{"y":2}},{"name":"raw","persistentVolumeClaim":{"claimName":"raw"}}]},
			"status":{"futureStatus":"s"}}`,
		wantContainers: []string{"app", "log-agent"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := testInjector(t)
			h.Sets = storeOf(t, ptrTo(func() bool { return true }), set)
			req := rawRequest(t, []byte(tt.raw), "web")
			resp := handle(t, h, req)
			if len(resp.Patches) == 0 {
				t.Fatalf("no patch: %+v", resp.Result)
			}
			var got map[string]any
			if err := json.Unmarshal(applyPatch(t, req, resp), &got); err != nil {
				t.Fatalf("decoding patched pod: %v", err)
			}
			for path, want := range map[string]any{
				"metadata.futureMeta":                                 "m",
				"spec.futureField.x":                                  1.0,
				"spec.containers.0.futureContainerField":              true,
				"spec.containers.0.env.0.futureEnvField":              2.0,
				"spec.volumes.0.futureVolumeSource.y":                 2.0,
				"status.futureStatus":                                 "s",
				"spec.containers.1.image":                             "registry.example/log-agent:3.2",
				"spec.containers.1.env.0.futureEnvField":              2.0,
				"spec.containers.1.volumeMounts.1.futureMountField":   "f",
				"spec.containers.1.volumeDevices.0.devicePath":        "/dev/raw",
				"spec.containers.1.volumeDevices.0.futureDeviceField": 3.0,
			} {
				if v := lookup(got, path); !equality.Semantic.DeepEqual(v, want) {
					t.Errorf("%s = %#v, want %#v", path, v, want)
				}
			}
			var names []string
			for _, c := range got["spec"].(map[string]any)["containers"].([]any) {
				names = append(names, c.(map[string]any)["name"].(string))
			}
			if !slices.Equal(names, tt.wantContainers) {
				t.Errorf("containers %v, want %v", names, tt.wantContainers)
			}
			if v := lookup(got, "spec.containers.1.futureContainerField"); v != nil {
				t.Errorf("the replaced sidecar kept its old field: %v", v)
			}
			annotations, _ := lookup(got, "metadata.annotations").(map[string]any)
			if hash, _ := inject.InjectedHash(toStrings(annotations), "log-agent"); hash != compiled.Hash {
				t.Errorf("status annotation hash %q, want %q (annotations %v)", hash, compiled.Hash, annotations)
			}
		})
	}
}

// lookup follows a dotted path through decoded JSON; numbers index arrays.
func lookup(v any, path string) any {
	for _, key := range strings.Split(path, ".") {
		switch node := v.(type) {
		case map[string]any:
			v = node[key]
		case []any:
			var i int
			if _, err := fmt.Sscan(key, &i); err != nil || i >= len(node) {
				return nil
			}
			v = node[i]
		default:
			return nil
		}
	}
	return v
}

func toStrings(m map[string]any) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k], _ = v.(string)
	}
	return out
}

// logAgentSet selects app=demo pods, in namespaces with nsLabels when given, and injects a
// log agent with its config volume.
func logAgentSet(name string, nsLabels map[string]string) *appsv1alpha1.SidecarSet {
	set := builders.SidecarSet(name, builders.ResourceVersion("1"), builders.Generation(1), builders.Selecting("demo"),
		builders.WithContainers(corev1.Container{Name: name, Image: "registry.example/log-agent:3.2",
			VolumeMounts: []corev1.VolumeMount{{Name: name + "-config", MountPath: "/etc/agent"}}}),
		builders.WithVolumes(corev1.Volume{Name: name + "-config", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "agent"}}}}))
	if nsLabels != nil {
		set.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: nsLabels}
	}
	return set
}

// optedInPod is an opted-in app=demo Pod with one app container; labels are merged over the
// defaults, and extra containers come first.
func optedInPod(namespace string, labels map[string]string, extra ...corev1.Container) *corev1.Pod {
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{GenerateName: "demo-", Namespace: namespace,
			Labels:      map[string]string{"app": "demo", appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue},
			Annotations: map[string]string{"owner": "team-a"}},
		Spec: corev1.PodSpec{Containers: append(extra, corev1.Container{Name: "app", Image: "registry.example/demo:1.0"})},
	}
	for k, v := range labels {
		pod.Labels[k] = v
	}
	return pod
}

func storeOf(t *testing.T, synced *func() bool, sets ...*appsv1alpha1.SidecarSet) *snapshot.Store {
	t.Helper()
	store := snapshot.NewStore()
	if synced != nil {
		store.SetSynced(*synced)
	}
	for _, s := range sets {
		store.Upsert(s)
	}
	if inv := store.Load().Invalid; len(inv) > 0 {
		t.Fatalf("invalid test SidecarSets: %v", inv)
	}
	return store
}

func ptrTo[T any](v T) *T { return &v }

// testInjector serves log-agent from a synced store, in namespaces without labels.
func testInjector(t *testing.T) *PodInjector {
	t.Helper()
	return &PodInjector{
		Metrics:         opmetrics.Unregistered(),
		Sets:            storeOf(t, ptrTo(func() bool { return true }), logAgentSet("log-agent", nil)),
		Scope:           inject.Scope{OperatorNamespace: "sidecarset-system"},
		NamespaceLabels: namespaceLabels(nil, nil),
	}
}

func namespaceLabels(labels map[string]string, err error) NamespaceLabelsFunc {
	return func(context.Context, string) (map[string]string, error) { return labels, err }
}

func rawRequest(t *testing.T, raw []byte, namespace string) admission.Request {
	t.Helper()
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "uid-1", Operation: admissionv1.Create, Namespace: namespace,
		Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Object:   runtime.RawExtension{Raw: raw},
	}}
}

// handle calls the handler and completes the response as the webhook server does, rendering
// the patch.
func handle(t *testing.T, h *PodInjector, req admission.Request) admission.Response {
	t.Helper()
	resp := h.Handle(context.Background(), req)
	if err := resp.Complete(req); err != nil {
		t.Fatalf("completing the response: %v", err)
	}
	return resp
}

// applyPatch applies the response's JSON patch to the raw request; no patch leaves it as is.
func applyPatch(t *testing.T, req admission.Request, resp admission.Response) []byte {
	t.Helper()
	if len(resp.Patch) == 0 {
		return req.Object.Raw
	}
	if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("patch type %v, want JSONPatch", resp.PatchType)
	}
	patch, err := jsonpatch.DecodePatch(resp.Patch)
	if err != nil {
		t.Fatalf("decoding patch %s: %v", resp.Patch, err)
	}
	out, err := patch.Apply(req.Object.Raw)
	if err != nil {
		t.Fatalf("applying patch %s: %v", resp.Patch, err)
	}
	return out
}

func assertDenied(t *testing.T, resp admission.Response, msg string) {
	t.Helper()
	if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusForbidden || resp.Result.Message != msg {
		t.Errorf("want denied (403) with\n  %q\ngot allowed %v, result %+v", msg, resp.Allowed, resp.Result)
	}
	if len(resp.Patches) > 0 {
		t.Errorf("a denial carries a patch: %s", resp.Patch)
	}
}

func assertPod(t *testing.T, got, want *corev1.Pod) {
	t.Helper()
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("pod after the handler's patch differs from the golden pod (-golden +patched):\n%s", diff.Diff(want, got))
	}
}

func decodePod(t *testing.T, raw []byte) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{}
	if err := json.Unmarshal(raw, pod); err != nil {
		t.Fatalf("decoding pod: %v\n%s", err, raw)
	}
	return pod
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encoding %T: %v", v, err)
	}
	return raw
}

func derefBool(b *bool) any {
	if b == nil {
		return nil
	}
	return *b
}

// value reads a counter, as prometheus/testutil.ToFloat64 would; that package would add a
// module (kylelemons/godebug) to go.mod.
func value(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatalf("reading counter: %v", err)
	}
	return m.GetCounter().GetValue()
}

// TestPodInjectorMatchesEngine runs variants of the golden cases through the handler and
// through the engine given the whole Pod: the handler's lazily decoded view must lead to the
// same Pod (or the same refusal) as the engine's full one.
func TestPodInjectorMatchesEngine(t *testing.T) {
	variants := map[string]func(*corev1.Pod){
		"host network":   func(p *corev1.Pod) { p.Spec.HostNetwork = true },
		"no annotations": func(p *corev1.Pod) { p.Annotations = nil },
		"namespace only in the request": func(p *corev1.Pod) {
			p.Namespace = ""
		},
		"defaulted by the API server": apiServerDefaults,
		"another app container first": func(p *corev1.Pod) {
			first := corev1.Container{Name: "first", Image: "first:1", Env: []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "debug"}},
				VolumeMounts: []corev1.VolumeMount{{Name: "first-data", MountPath: "/first"}}}
			p.Spec.Containers = append([]corev1.Container{first}, p.Spec.Containers...)
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "first-data"})
		},
	}
	for _, c := range injecttest.LoadCases(t, engineTestdata) {
		for name, variant := range variants {
			t.Run(c.Name+"/"+name, func(t *testing.T) {
				namespace := c.Pod.Namespace
				c := c // each variant edits its own copy of the Pod
				c.Pod = c.Pod.DeepCopy()
				variant(c.Pod)
				h := goldenInjector(t, c)
				only, _ := injectingCase(c, h)
				want, wantErr := enginePod(t, only)
				req := rawRequest(t, mustMarshal(t, c.Pod), namespace)
				resp := handle(t, h, req)
				if wantErr != nil {
					assertDenied(t, resp, wantErr.Error())
					return
				}
				if !resp.Allowed {
					t.Fatalf("want allowed, got %+v", resp.Result)
				}
				assertPod(t, decodePod(t, applyPatch(t, req, resp)), want)
			})
		}
	}
}

// enginePod is the engine's answer for the case, from the whole Pod and every SidecarSet.
// injectingCase returns the case with only the SidecarSets the handler's snapshot lets inject
// (of two that conflict, the newer is stopped), and whether any was left out.
func injectingCase(c injecttest.Case, h *PodInjector) (injecttest.Case, bool) {
	snap := h.Sets.Load()
	out := c
	out.Sets = slices.DeleteFunc(slices.Clone(c.Sets), func(s *appsv1alpha1.SidecarSet) bool {
		_, ok := snap.Get(s.Name)
		return !ok
	})
	return out, len(out.Sets) < len(c.Sets)
}

func enginePod(t *testing.T, c injecttest.Case) (*corev1.Pod, error) {
	t.Helper()
	in := inject.Input{Pod: c.Pod, AllowedAnnotations: injecttest.AllowList(t)}
	sorted := slices.Clone(c.Sets)
	slices.SortFunc(sorted, func(a, b *appsv1alpha1.SidecarSet) int { return strings.Compare(a.Name, b.Name) })
	for _, s := range sorted {
		compiled, err := inject.Compile(s)
		if err != nil {
			t.Fatalf("compiling %s: %v", s.Name, err)
		}
		in.Sets = append(in.Sets, compiled)
	}
	if c.Namespace != nil {
		in.NamespaceLabels = c.Namespace.Labels
	}
	res, err := inject.Apply(in)
	if err != nil {
		return nil, err
	}
	return res.Pod(), nil
}

// TestInvalidSidecarSetIsReported: a SidecarSet that cannot be compiled (written while the
// validating webhook was down) injects nothing; every opted-in pod's admission says so, and
// the valid sets still inject.
func TestInvalidSidecarSetIsReported(t *testing.T) {
	h := testInjector(t)
	broken := logAgentSet("broken", nil)
	broken.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}
	h.Sets.Upsert(broken)

	resp := handle(t, h, rawRequest(t, mustMarshal(t, optedInPod("web", nil)), "web"))
	if !resp.Allowed || len(resp.Patch) == 0 {
		t.Fatalf("the valid SidecarSet no longer injects: allowed %v, patch %s", resp.Allowed, resp.Patch)
	}
	if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], `SidecarSet "broken" is invalid and injects nothing`) ||
		!strings.Contains(resp.Warnings[0], "Near") {
		t.Errorf("warnings = %q, want one naming the invalid SidecarSet and why", resp.Warnings)
	}
}

// TestStoppedSidecarSetIsReported: of two SidecarSets that inject the same container (stored
// while validation could not see one from the other), the older injects and the admission warns
// that the newer selects the pod but is stopped, naming both and the field.
func TestStoppedSidecarSetIsReported(t *testing.T) {
	h := testInjector(t)
	older := logAgentSet("agent-a", nil)
	older.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	newer := logAgentSet("agent-b", nil)
	newer.CreationTimestamp = metav1.NewTime(older.CreationTimestamp.Add(time.Hour))
	newer.Spec.Containers[0].Name = "agent-a" // the same container as the older set's
	h.Sets = storeOf(t, ptrTo(func() bool { return true }), older, newer)

	resp := handle(t, h, rawRequest(t, mustMarshal(t, optedInPod("web", nil)), "web"))
	if !resp.Allowed || len(resp.Patch) == 0 {
		t.Fatalf("the older SidecarSet does not inject: allowed %v, result %+v", resp.Allowed, resp.Result)
	}
	if len(resp.Warnings) != 1 || !contains(resp.Warnings[0], `SidecarSet "agent-b" selects this pod but injects nothing`,
		`older SidecarSet "agent-a"`, "spec.containers[0].name") {
		t.Errorf("warnings = %q, want one naming the stopped set, the older one and the field", resp.Warnings)
	}

	// A pod the stopped set does not select gets no warning.
	other := optedInPod("web", map[string]string{"app": "other"})
	if resp := handle(t, h, rawRequest(t, mustMarshal(t, other), "web")); len(resp.Warnings) != 0 {
		t.Errorf("warnings for a pod no set selects: %q", resp.Warnings)
	}
}

func contains(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// TestPodInjectorRemovesTheRouteMark: a pod that policy mode's admission policies sent here
// leaves without their marks (label and annotation; the label from opted-in pods alone), and without a record of pinned images its author wrote, also when
// the webhook lets it through unchanged (no set selects it any more, its namespace is never
// injected, it opted out); a denial stays a denial.
func TestPodInjectorRemovesTheRouteMark(t *testing.T) {
	marked := func(labels map[string]string, extra ...corev1.Container) *corev1.Pod {
		pod := optedInPod("shop", labels, extra...)
		pod.Annotations[appsv1alpha1.WebhookRouteAnnotation] = appsv1alpha1.WebhookRouteValue
		pod.Labels[appsv1alpha1.WebhookRouteLabel] = appsv1alpha1.WebhookRouteValue
		pod.Annotations[appsv1alpha1.ImagesAnnotation] = "agent=registry.example/agent@sha256:" + strings.Repeat("f", 64)
		return pod
	}
	notOptedIn := marked(nil)
	delete(notOptedIn.Labels, appsv1alpha1.InjectLabel)
	excluded := marked(nil)
	excluded.Namespace = "kube-system"
	for _, tc := range []struct {
		name      string
		pod       *corev1.Pod
		sidecars  int
		namespace string
	}{
		{name: "injected", pod: marked(nil), sidecars: 1},
		{name: "no set selects it", pod: marked(map[string]string{"app": "other"})},
		{name: "not opted in", pod: notOptedIn},
		{name: "excluded namespace", pod: excluded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := rawRequest(t, mustMarshal(t, tc.pod), tc.pod.Namespace)
			resp := handle(t, testInjector(t), req)
			if !resp.Allowed {
				t.Fatalf("refused: %+v", resp.Result)
			}
			got := decodePod(t, applyPatch(t, req, resp))
			if _, ok := got.Annotations[appsv1alpha1.WebhookRouteAnnotation]; ok {
				t.Errorf("the route mark stayed: annotations %v", got.Annotations)
			}
			// The route label goes from opted-in pods, which alone a policy marks; on another
			// pod it is the author's, and stays.
			_, labelled := got.Labels[appsv1alpha1.WebhookRouteLabel]
			if optedIn := inject.OptedIn(tc.pod.Labels); labelled == optedIn {
				t.Errorf("opted in %t, the route label kept %t: labels %v", optedIn, labelled, got.Labels)
			}
			for k, v := range tc.pod.Labels {
				if k != appsv1alpha1.WebhookRouteLabel && got.Labels[k] != v {
					t.Errorf("the pod's own label %s=%s was lost or changed: %v", k, v, got.Labels)
				}
			}
			if _, ok := got.Annotations[appsv1alpha1.ImagesAnnotation]; ok {
				t.Errorf("the author's record of pinned images stayed: annotations %v", got.Annotations)
			}
			if got.Annotations["owner"] != "team-a" {
				t.Errorf("the pod's own annotation was lost: %v", got.Annotations)
			}
			if n := len(got.Spec.Containers) - len(tc.pod.Spec.Containers); n != tc.sidecars {
				t.Errorf("%d sidecars injected, want %d", n, tc.sidecars)
			}
		})
	}
	clash := marked(nil, corev1.Container{Name: "log-agent", Image: "registry.example/mine:1"})
	resp := handle(t, testInjector(t), rawRequest(t, mustMarshal(t, clash), clash.Namespace))
	if resp.Allowed || len(resp.Patches) > 0 {
		t.Errorf("a clashing marked pod: allowed %v, patches %v; want the denial alone", resp.Allowed, resp.Patches)
	}
}

// TestDryRunRecordsNoEvent: the webhook is registered with sideEffects: None, so a dry-run
// admission (kubectl --dry-run=server, a GitOps diff) warns as any other but records no event;
// the same admission for real does.
func TestDryRunRecordsNoEvent(t *testing.T) {
	for _, tt := range []struct {
		name      string
		dryRun    *bool
		wantEvent bool
	}{
		{name: "dry run", dryRun: ptrTo(true), wantEvent: false},
		{name: "not a dry run", dryRun: ptrTo(false), wantEvent: true},
		{name: "dry run not said", dryRun: nil, wantEvent: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			set := logAgentSet("log-agent", nil)
			set.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptrTo(true)}
			podSecurity, err := NewPodSecurity()
			if err != nil {
				t.Fatal(err)
			}
			recorder := events.NewFakeRecorder(10)
			h := testInjector(t)
			h.Sets = storeOf(t, ptrTo(func() bool { return true }), set)
			h.PodSecurity, h.Recorder = podSecurity, recorder
			h.NamespaceLabels = namespaceLabels(map[string]string{"pod-security.kubernetes.io/enforce": "baseline"}, nil)
			req := rawRequest(t, mustMarshal(t, optedInPod("web", nil)), "web")
			req.DryRun = tt.dryRun

			resp := handle(t, h, req)

			if !resp.Allowed || len(resp.Patches) == 0 || !slices.ContainsFunc(resp.Warnings, func(w string) bool { return contains(w, "log-agent", "privileged") }) {
				t.Fatalf("want the pod injected with a warning naming the set: allowed %v, %d operations, warnings %q", resp.Allowed, len(resp.Patches), resp.Warnings)
			}
			var recorded []string
			for len(recorder.Events) > 0 {
				recorded = append(recorded, <-recorder.Events)
			}
			if got := slices.ContainsFunc(recorded, func(e string) bool { return contains(e, "ViolatesPodSecurity") }); got != tt.wantEvent {
				t.Errorf("ViolatesPodSecurity event recorded: %v, want %v (events %q)", got, tt.wantEvent, recorded)
			}
		})
	}
}
