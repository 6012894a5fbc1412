package integration

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/controllers"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/inject/injecttest"
	"github.com/sidecarset/sidecarset-operator/internal/operator"
	"github.com/sidecarset/sidecarset-operator/internal/policy"
	"github.com/sidecarset/sidecarset-operator/internal/policy/policytest"
	"github.com/sidecarset/sidecarset-operator/internal/revision"
	ourwebhook "github.com/sidecarset/sidecarset-operator/internal/webhook"
	"github.com/sidecarset/sidecarset-operator/test/testutil"
)

// noWebhookLabel keeps a pod from the pod webhook while TestPolicyModeStoresWhatTheWebhookStores
// runs (the test adds a matchCondition on it), to see what the policies alone do.
const noWebhookLabel = "policy-test.sidecarset.io/no-webhook"

// routedCases are the engine's golden cases that the policies send to the webhook, and why.
// Every other case is injected (or left alone) by the policies with no webhook call.
var routedCases = map[string]string{
	"app-container-identical":             "the pod has a container of an injected name",
	"conflict-app-container":              "the pod has a container of an injected name",
	"conflict-app-init-container":         "the pod has an init container of an injected name",
	"conflict-host-port":                  "a sidecar binds a host port and so does the pod's container",
	"conflict-two-sets-container":         "two sets select the pod",
	"conflict-two-sets-volume":            "two sets select the pod",
	"conflict-volume-definition":          "the pod has a volume of an added name",
	"malformed-annotation":                "the pod has a record",
	"paused-with-record":                  "the pod has a record",
	"pod-defines-identical-volume":        "the pod has a volume of an added name",
	"reinject-old-hash":                   "the pod has a record",
	"share-volumes-left-out":              "shareVolumePolicy leaves mounts out (notShared) and brings a subPathExpr's variable",
	"share-volume-devices-left-out":       "shareVolumeDevicePolicy leaves devices out (notShared)",
	"transfer-env-from-pod-field-missing": "transferEnv from a container the pod does not name (the engine warns)",

	"patch-metadata-conflict":         "the set patches pod annotations (patchPodMetadata stays on the webhook)",
	"patch-metadata-merge":            "the set patches pod annotations (patchPodMetadata stays on the webhook)",
	"patch-metadata-merge-not-object": "the set patches pod annotations (patchPodMetadata stays on the webhook)",
	"patch-metadata-not-allowed":      "the set patches pod annotations (patchPodMetadata stays on the webhook)",
	"patch-metadata-overwrite":        "the set patches pod annotations (patchPodMetadata stays on the webhook)",
	"patch-metadata-retain":           "the set patches pod annotations (patchPodMetadata stays on the webhook)",
	"overrides-env":                   "the set lets pods override sidecar fields (overrides stay on the webhook)",
	"overrides-not-quantity":          "the set lets pods override sidecar fields (overrides stay on the webhook)",
	"overrides-refused-limits":        "the set lets pods override sidecar fields (overrides stay on the webhook)",
	"overrides-refused-rule":          "the set lets pods override sidecar fields (overrides stay on the webhook)",
	"overrides-resources":             "the set lets pods override sidecar fields (overrides stay on the webhook)",
	"stale-record-stripped":           "the pod has a record",
	"routed-by-policy":                "the pod already carries the route mark",
	"resources-policy":                "the set computes a sidecar's resources (resourcesPolicy stays on the webhook)",
	"resources-policy-max-regex":      "the set computes a sidecar's resources (resourcesPolicy stays on the webhook)",
	"resources-policy-negative":       "the set computes a sidecar's resources (resourcesPolicy stays on the webhook)",
	"resources-policy-no-target":      "the set computes a sidecar's resources (resourcesPolicy stays on the webhook)",
	"resources-policy-pod-resources":  "the set computes a sidecar's resources (resourcesPolicy stays on the webhook)",
	"transfer-env-missing":            "transferEnv of a variable the pod lacks (the engine warns)",
	"transfer-env-references":         "transferEnv of values with references, and of a resourceFieldRef naming no container",
	"two-sets-order-shared-volume":    "two sets select the pod",

	"share-volumes-subpathexpr-defaulted": "shareVolumePolicy shares a mount with a subPathExpr",
	"transfer-env-defaulted":              "transferEnv of a value with a reference",

	"conflict-container-port":           "the pod declares a sidecar's container port",
	"conflict-port-name-before-app":     "the pod declares a sidecar's port name",
	"conflict-port-name-native-sidecar": "the pod declares a sidecar's port name",
	"port-name-after-app-warned":        "the pod declares a sidecar's port name (the webhook warns)",

	"host-network-ports":               "the pod is on the host's network and a sidecar declares ports",
	"host-network-declared-host-port":  "the pod is on the host's network and a sidecar declares ports",
	"host-network-native-sidecar-port": "the pod is on the host's network and a native sidecar declares ports",

	"pod-resources-exceeded": "the pod sets pod-level resources and a sidecar declares resources",
	"pod-resources-fit":      "the pod sets pod-level resources and a sidecar declares resources",

	"pod-resources-pad-burstable":      "the pod sets pod-level resources and the set pads them",
	"pod-resources-pad-guaranteed":     "the pod sets pod-level resources and the set pads them",
	"pod-resources-pad-init-container": "the pod sets pod-level resources and the set pads them",
	"pod-resources-pad-limits-only":    "the pod sets pod-level resources and the set pads them",
}

// outcome is what creating a pod gives: the pod stored, or the refusal.
type outcome struct {
	Pod   *corev1.Pod
	Error string
}

// TestPolicyModeStoresWhatTheWebhookStores creates the pod of every golden case of the engine
// through the API server in webhook mode, then in policy mode (each SidecarSet compiled into its
// MutatingAdmissionPolicy; the pod webhook registered with policy mode's matchCondition, so it
// is called only for pods a policy routes to it). Both must store the same pod, or refuse it
// with the same message. What the policies do alone is checked too: the cases in routedCases
// carry the route label and annotation and nothing else changed, every other case is already
// the final pod.
func TestPolicyModeStoresWhatTheWebhookStores(t *testing.T) {
	needsKubernetes(t, policyModeMinor, "policy mode (MutatingAdmissionPolicy v1)")
	cases := injecttest.LoadCases(t, "../../internal/inject/testdata")
	want := map[string]outcome{}
	for _, c := range cases {
		t.Run("webhook/"+c.Name, func(t *testing.T) {
			pod, _ := setUpCase(t, c)
			want[c.Name] = create(t, pod)
		})
	}
	registerPolicyModeWebhook(t)
	for _, c := range cases {
		t.Run("policy/"+c.Name, func(t *testing.T) {
			w, ok := want[c.Name]
			if !ok {
				t.Skip("webhook mode failed") // reported above
			}
			pod, sets := setUpCase(t, c)
			for _, set := range sets {
				compiled, err := policy.Compile(set, sets, nil, policyOptions(inject.Scope{OperatorNamespace: operatorNamespace}))
				must(t, err)
				createPolicy(t, compiled)
			}
			alone := pod.DeepCopy()
			alone.Labels[noWebhookLabel] = "true"
			_, routed := routedCases[c.Name]
			eventually(t, "the policies to give the webhook's outcome", func() (bool, string) {
				got := create(t, pod)
				if diff := cmp.Diff(w, got); diff != "" {
					return false, "policy mode differs from webhook mode (-webhook +policy):\n" + diff
				}
				byPolicy := create(t, alone)
				if byPolicy.Pod != nil {
					delete(byPolicy.Pod.Labels, noWebhookLabel)
				}
				if routed {
					return isRouted(pod, byPolicy)
				}
				if diff := cmp.Diff(w, byPolicy); diff != "" {
					return false, "the policies alone do not give the webhook's outcome (-webhook +policy):\n" + diff
				}
				return true, ""
			})
		})
	}
}

// registerPolicyModeWebhook registers the pod webhook, for one test, as config/policy-mode does,
// plus a matchCondition that keeps pods carrying noWebhookLabel from it; after the test the
// registration is restored, and in effect, for the tests after.
func registerPolicyModeWebhook(t *testing.T) {
	t.Helper()
	// Cleanups run last first: this one, after the registration is restored.
	probe := appPod(newNamespace(t, nil), "probe", "policy-probe", true)
	probe.Labels[noWebhookLabel] = "true"
	t.Cleanup(func() { awaitWebhookCalled(t, probe) })
	routing := policyModeWebhook(t).MatchConditions
	patchPodWebhook(t, func(w *admissionregistrationv1.MutatingWebhook) {
		w.MatchConditions = append(routing,
			admissionregistrationv1.MatchCondition{Name: "policy-test", Expression: fmt.Sprintf("!(%q in object.metadata.labels)", noWebhookLabel)})
	})
}

// awaitWebhookCalled waits until the API server calls the pod webhook for pod, which the test's
// matchConditions kept from it: the restored registration is in effect for the tests after.
func awaitWebhookCalled(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	before := webhookRequests(t, ourwebhook.PodInjectorPath)
	eventually(t, "the API server to call the pod webhook again", func() (bool, string) {
		_, err := dryRun(t, pod)
		if err != nil {
			return false, err.Error()
		}
		calls := webhookRequests(t, ourwebhook.PodInjectorPath) - before
		return calls > 0, fmt.Sprintf("%v calls", calls)
	})
}

// isRouted reports whether the policies alone stored the pod as created plus the route label
// and annotation.
func isRouted(pod *corev1.Pod, got outcome) (bool, string) {
	if got.Pod == nil {
		return false, "the policies alone refused the pod: " + got.Error
	}
	if v := got.Pod.Annotations[appsv1alpha1.WebhookRouteAnnotation]; v != appsv1alpha1.WebhookRouteValue {
		return false, fmt.Sprintf("the policies alone did not route the pod to the webhook: annotations %v", got.Pod.Annotations)
	}
	if v := got.Pod.Labels[appsv1alpha1.WebhookRouteLabel]; v != appsv1alpha1.WebhookRouteValue {
		return false, fmt.Sprintf("the policies alone did not label the pod for the webhook: labels %v", got.Pod.Labels)
	}
	if a, b := containerNames(pod.Spec.Containers), containerNames(got.Pod.Spec.Containers); !cmp.Equal(a, b) {
		return false, fmt.Sprintf("a routed pod's containers changed: %v -> %v", a, b)
	}
	if a, b := containerNames(pod.Spec.InitContainers), containerNames(got.Pod.Spec.InitContainers); !cmp.Equal(a, b) {
		return false, fmt.Sprintf("a routed pod's init containers changed: %v -> %v", a, b)
	}
	return true, ""
}

// setUpCase creates the case's SidecarSets (without validation: some cases hold sets it
// refuses) and a namespace with the case's labels, and returns the case's pod in it and the
// sets as stored (defaulted by the API server, as the operator reads them).
func setUpCase(t *testing.T, c injecttest.Case) (*corev1.Pod, []*appsv1alpha1.SidecarSet) {
	t.Helper()
	labels := map[string]string{}
	if c.Namespace != nil {
		for k, v := range c.Namespace.Labels {
			if k != corev1.LabelMetadataName {
				labels[k] = v
			}
		}
	}
	ns := newNamespace(t, labels)
	pod := c.Pod.DeepCopy()
	pod.Namespace = ns
	if sa := pod.Spec.ServiceAccountName; sa != "" {
		must(t, k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}))
	}
	var stored []*appsv1alpha1.SidecarSet
	withoutSidecarSetValidation(t, func() {
		for _, set := range c.Sets {
			set := set.DeepCopy()
			must(t, k8s.Create(ctx, set))
			t.Cleanup(func() { deleteIgnoreNotFound(t, set) })
			stored = append(stored, set)
		}
	})
	for _, set := range stored {
		waitForSet(t, set)
	}
	return pod, stored
}

// create dry-runs the pod's creation through the whole admission chain.
func create(t *testing.T, pod *corev1.Pod) outcome {
	t.Helper()
	got, err := dryRun(t, pod)
	if err != nil {
		// The API server prefixes the webhook's message with its own words: keep the message.
		msg := err.Error()
		if i := strings.Index(msg, "denied the request: "); i >= 0 {
			msg = msg[i+len("denied the request: "):]
		}
		return outcome{Error: msg}
	}
	got.Namespace = "" // each mode's pods are in a namespace of their own
	return outcome{Pod: got}
}

// createPolicy creates a compiled set's policy and binding, deleted after the test.
func createPolicy(t *testing.T, c *policy.Compiled) {
	t.Helper()
	must(t, k8s.Create(ctx, c.Policy))
	t.Cleanup(func() { deleteIgnoreNotFound(t, c.Policy) })
	must(t, k8s.Create(ctx, c.Binding))
	t.Cleanup(func() { deleteIgnoreNotFound(t, c.Binding) })
}

// policyModeWebhook is the pod webhook as config/policy-mode registers it.
func policyModeWebhook(t *testing.T) admissionregistrationv1.MutatingWebhook {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(manifestsDir, "policy-mode.yaml"))
	must(t, err)
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		must(t, err)
		var cfg admissionregistrationv1.MutatingWebhookConfiguration
		must(t, yaml.Unmarshal(doc, &cfg))
		if cfg.Kind != "MutatingWebhookConfiguration" {
			continue
		}
		for _, w := range cfg.Webhooks {
			if w.Name == "inject.sidecarset.io" {
				return w
			}
		}
	}
	t.Fatal("config/policy-mode registers no pod webhook")
	return admissionregistrationv1.MutatingWebhook{}
}

// TestPolicyReconcilerRendersUpdatesAndPrunes runs the policy reconciler with the permissions
// config/policy-mode gives the manager's ServiceAccount: it renders a new set's policy and
// binding, owned by the set, and the API server then injects the set's pods with no webhook
// call; a spec change reaches new pods; a deleted set's policy and binding go.
func TestPolicyReconcilerRendersUpdatesAndPrunes(t *testing.T) {
	needsKubernetes(t, policyModeMinor, "policy mode (MutatingAdmissionPolicy v1)")
	startPolicyReconciler(t)
	// Pods with noWebhookLabel never reach the webhook: what they get, the policy gave.
	registerPolicyModeWebhook(t)

	set := createSet(t, agentSet("policy-rec", "policy-rec"))
	var rendered admissionregistrationv1.MutatingAdmissionPolicy
	eventually(t, "the set's policy and binding", func() (bool, string) {
		if err := k8s.Get(ctx, client.ObjectKey{Name: policy.Name(set.Name)}, &rendered); err != nil {
			return false, err.Error()
		}
		var binding admissionregistrationv1.MutatingAdmissionPolicyBinding
		if err := k8s.Get(ctx, client.ObjectKey{Name: policy.Name(set.Name)}, &binding); err != nil {
			return false, err.Error()
		}
		if !metav1.IsControlledBy(&rendered, set) || !metav1.IsControlledBy(&binding, set) {
			return false, fmt.Sprintf("owners %v, %v", rendered.OwnerReferences, binding.OwnerReferences)
		}
		return true, ""
	})
	pod := appPod(newNamespace(t, nil), "by-policy", "policy-rec", true)
	pod.Labels[noWebhookLabel] = "true"
	sidecarImage := func() (bool, string) {
		got, err := dryRun(t, pod)
		if err != nil {
			return false, err.Error()
		}
		var current appsv1alpha1.SidecarSet
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), &current))
		want := current.Spec.Containers[0].Image
		names := containerNames(got.Spec.Containers)
		if !cmp.Equal(names, []string{"app", "policy-rec-agent"}) || got.Spec.Containers[1].Image != want {
			return false, fmt.Sprintf("containers %v, want app and policy-rec-agent with image %s", names, want)
		}
		if hash, _ := inject.InjectedHash(got.Annotations, set.Name); hash != inject.Hash(&current.Spec) {
			return false, fmt.Sprintf("record %q, want hash %s", got.Annotations[appsv1alpha1.StatusAnnotation], inject.Hash(&current.Spec))
		}
		return true, ""
	}
	eventually(t, "the policy to inject the pod", sidecarImage)

	must(t, testutil.Edit(ctx, k8s, set.DeepCopy(), func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "registry.example/agent:2.0" }))
	eventually(t, "the policy to inject the new image", sidecarImage)

	// Pinning the first revision (stored by the suite's operator): the policy injects it, not
	// the current spec, and records its hash, as the webhook would.
	first := inject.Hash(&set.Spec)
	pinned := &appsv1.ControllerRevision{}
	eventually(t, "the first content stored as a revision", func() (bool, string) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: revision.Name(set.Name, first)}, pinned)
		return err == nil, fmt.Sprint(err)
	})
	must(t, testutil.Edit(ctx, k8s, set.DeepCopy(), func(s *appsv1alpha1.SidecarSet) {
		s.Spec.InjectionStrategy.Revision = &appsv1alpha1.RevisionRef{Name: pinned.Name}
	}))
	eventually(t, "the policy to inject the pinned revision", func() (bool, string) {
		got, err := dryRun(t, pod)
		if err != nil {
			return false, err.Error()
		}
		names := containerNames(got.Spec.Containers)
		if !cmp.Equal(names, []string{"app", "policy-rec-agent"}) || got.Spec.Containers[1].Image != set.Spec.Containers[0].Image {
			return false, fmt.Sprintf("containers %v, want app and policy-rec-agent with the pinned image %s", names, set.Spec.Containers[0].Image)
		}
		if hash, _ := inject.InjectedHash(got.Annotations, set.Name); hash != first {
			return false, fmt.Sprintf("record %q, want the pinned hash %s", got.Annotations[appsv1alpha1.StatusAnnotation], first)
		}
		return true, ""
	})
	// The pinned revision gone: the webhook injects the current spec and warns, which a policy
	// cannot; so the policy leaves those pods to it (this pod never reaches it).
	must(t, k8s.Delete(ctx, pinned))
	eventually(t, "the policy to leave the set's pods to the webhook", func() (bool, string) {
		got, err := dryRun(t, pod)
		if err != nil {
			return false, err.Error()
		}
		names := containerNames(got.Spec.Containers)
		return cmp.Equal(names, []string{"app"}), fmt.Sprintf("containers %v, want app alone", names)
	})

	must(t, k8s.Delete(ctx, set))
	eventually(t, "the deleted set's policy and binding to go", func() (bool, string) {
		var p admissionregistrationv1.MutatingAdmissionPolicy
		var b admissionregistrationv1.MutatingAdmissionPolicyBinding
		pErr := k8s.Get(ctx, client.ObjectKey{Name: policy.Name(set.Name)}, &p)
		bErr := k8s.Get(ctx, client.ObjectKey{Name: policy.Name(set.Name)}, &b)
		return apierrors.IsNotFound(pErr) && apierrors.IsNotFound(bErr), fmt.Sprintf("policy: %v, binding: %v", pErr, bErr)
	})
}

// startPolicyReconciler runs the policy reconciler for one test, in a manager of its own with
// the permissions config/policy-mode gives the manager's ServiceAccount, reading the suite's
// SidecarSet snapshot (the webhook's view); excluded are its --excluded-namespaces. It returns
// the states the reconciler reports for the PolicyCompiled condition.
func startPolicyReconciler(t *testing.T, excluded ...string) *controllers.PolicyStates {
	t.Helper()
	// The probe pods run as the default ServiceAccount of the operator's namespace, which
	// kube-controller-manager makes in a cluster.
	ensureDefaultServiceAccount(t, operatorNamespace)
	cfg, err := asManagerServiceAccount(ctx, adminConfig, filepath.Join(manifestsDir, "policy-mode.yaml"))
	must(t, err)
	scheme, err := operator.NewScheme()
	must(t, err)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Cache: operator.CacheOptions(operatorNamespace, operator.InjectionPolicy),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)}})
	must(t, err)
	rec := &controllers.PolicyReconciler{Client: mgr.GetClient(), Sets: op.Sets, States: controllers.NewPolicyStates(), ForeignRecheck: time.Second,
		Options: policyOptions(inject.Scope{OperatorNamespace: operatorNamespace, ExcludedNamespaces: excluded})}
	must(t, rec.SetupWithManager(mgr))
	mgrCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mgrCtx) }()
	t.Cleanup(func() {
		stop()
		must(t, <-done)
	})
	return rec.States
}

// TestPolicyOfTheLargestSetInjects: the policy of the largest SidecarSet the CRD allows, beside
// 100 other sets (each a term of its "selected by another set" condition), stays within the
// API server's CEL cost limits: it is accepted, and it injects a pod on its own.
func TestPolicyOfTheLargestSetInjects(t *testing.T) {
	needsKubernetes(t, policyModeMinor, "policy mode (MutatingAdmissionPolicy v1)")
	set := createSet(t, policytest.LargestSet("policy-large", "policy-large"))
	others := append([]*appsv1alpha1.SidecarSet{set}, policytest.ManyOthers(100)...)
	compiled, err := policy.Compile(set, others, nil, policyOptions(inject.Scope{OperatorNamespace: operatorNamespace}))
	must(t, err)
	if compiled.Unsupported != nil {
		t.Fatalf("the largest set is not compiled: %s", compiled.Unsupported)
	}
	createPolicy(t, compiled)
	registerPolicyModeWebhook(t)
	pod := appPod(newNamespace(t, nil), "large", "policy-large", true)
	pod.Labels[noWebhookLabel] = "true"
	// policy.MaxSharedMounts app mounts, the most a policy shares: /data, these, and the
	// ServiceAccount token's mount the API server adds before; each shared into every sidecar.
	policytest.AddAppValues(pod, policy.MaxSharedMounts-2)
	eventually(t, "the largest set's policy to inject the pod", func() (bool, string) {
		got, err := dryRun(t, pod)
		if err != nil {
			return false, err.Error()
		}
		if len(got.Spec.Containers) != 33 || len(got.Spec.InitContainers) != 32 || len(got.Spec.ImagePullSecrets) != 16 {
			return false, fmt.Sprintf("%d containers, %d init containers, %d pull secrets", len(got.Spec.Containers),
				len(got.Spec.InitContainers), len(got.Spec.ImagePullSecrets))
		}
		if hash, _ := inject.InjectedHash(got.Annotations, set.Name); hash != compiled.Hash {
			return false, "record " + got.Annotations[appsv1alpha1.StatusAnnotation]
		}
		transferred := 0
		for _, c := range got.Spec.Containers[1:] {
			for _, e := range c.Env {
				if strings.HasPrefix(e.Name, "APP_VAR_") && e.Value == "v" {
					transferred++
				}
			}
		}
		if transferred != policy.MaxTransfers {
			return false, fmt.Sprintf("%d of %d transferred variables in the sidecars", transferred, policy.MaxTransfers)
		}
		app := got.Spec.Containers[0].VolumeMounts
		if len(app) != policy.MaxSharedMounts {
			return false, fmt.Sprintf("the app has %d mounts, want policy.MaxSharedMounts (%d)", len(app), policy.MaxSharedMounts)
		}
		for _, c := range append(got.Spec.Containers[1:], got.Spec.InitContainers...) {
			if len(c.VolumeMounts) < len(app) || !cmp.Equal(c.VolumeMounts[len(c.VolumeMounts)-len(app):], app) {
				return false, fmt.Sprintf("sidecar %s does not end with the app's %d mounts: %v", c.Name, len(app), c.VolumeMounts)
			}
		}
		return true, ""
	})
}

// policyModeMinor is the first Kubernetes minor version that serves MutatingAdmissionPolicy v1.
const policyModeMinor = 36

// TestPolicyModeNeedsMutatingAdmissionPolicies: on an API server that does not serve
// MutatingAdmissionPolicy v1 the operator refuses to start in policy mode, naming the flag and
// the way out; on one that does, the kind it needs is served.
func TestPolicyModeNeedsMutatingAdmissionPolicies(t *testing.T) {
	scheme, err := operator.NewScheme()
	must(t, err)
	mgr, err := ctrl.NewManager(adminConfig, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0", Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)}})
	must(t, err)
	_, mapErr := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: admissionregistrationv1.GroupName, Kind: "MutatingAdmissionPolicy"}, "v1")
	if kubernetesMinor >= policyModeMinor {
		if mapErr != nil {
			t.Fatalf("Kubernetes 1.%d does not serve MutatingAdmissionPolicy v1: %v", kubernetesMinor, mapErr)
		}
		return
	}
	if mapErr == nil {
		t.Fatalf("Kubernetes 1.%d serves MutatingAdmissionPolicy v1: policyModeMinor is wrong", kubernetesMinor)
	}
	_, err = operator.Setup(ctx, mgr, operator.Options{Namespace: operatorNamespace, Injection: operator.InjectionPolicy, Conditions: upgradeable,
		MetricsRegistry: prometheus.NewRegistry()}) // the suite's operator has registered its metrics already
	if err == nil || !contains(err.Error(), "--injection=policy", "Kubernetes 1.36", "--injection=webhook") {
		t.Fatalf("policy mode on Kubernetes 1.%d: %v; want a refusal naming the flag, the version and the webhook mode", kubernetesMinor, err)
	}
}
