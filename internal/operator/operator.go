package operator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	operatorsv2 "github.com/operator-framework/api/pkg/operators/v2"
	"github.com/operator-framework/operator-lib/conditions"
	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/controllers"
	"github.com/sidecarset/sidecarset-operator/internal/images"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/opmetrics"
	"github.com/sidecarset/sidecarset-operator/internal/policy"
	"github.com/sidecarset/sidecarset-operator/internal/refusals"
	"github.com/sidecarset/sidecarset-operator/internal/snapshot"
	"github.com/sidecarset/sidecarset-operator/internal/status"
	ourwebhook "github.com/sidecarset/sidecarset-operator/internal/webhook"
)

// The injection modes (--injection).
const (
	// InjectionWebhook: the pod webhook injects every opted-in pod (the default).
	InjectionWebhook = "webhook"
	// InjectionPolicy: each SidecarSet is compiled into a MutatingAdmissionPolicy; the webhook
	// injects only the pods the policies route to it (docs/design/policy-mode.md).
	InjectionPolicy = "policy"
)

// Options configure the operator's parts.
type Options struct {
	// Namespace is the namespace the operator runs in; its Pods are never injected.
	Namespace string
	// Injection is InjectionWebhook (when empty) or InjectionPolicy.
	Injection string
	// ExcludedNamespaces are never injected, besides kube-system and Namespace
	// (--excluded-namespaces): the pod webhook and the policies leave their pods alone, and
	// status and rollouts count them as excluded. The pod webhook's registration must exclude
	// them too (the Helm chart renders both from webhook.excludedNamespaces).
	ExcludedNamespaces []string
	// PatchPodMetadataAllowedKeys are the annotation keys SidecarSets may patch onto pods
	// (spec.patchPodMetadata), exact or `prefix/*` (--patch-pod-metadata-allowed-keys). Empty
	// allows none: a set patching other keys injects its sidecars without them, with a warning.
	PatchPodMetadataAllowedKeys []string
	// MetricsRegistry registers the operator's metrics (opmetrics): controller-runtime's
	// registry, which the manager's metrics endpoint serves, when nil. A second operator in one
	// process (a test) needs a registry of its own.
	MetricsRegistry prometheus.Registerer
	// RefusalQuietPeriod is how long after the webhook's latest refusal of its pods a set's
	// Refusing condition turns False (refusals.QuietPeriod when zero; tests shorten it).
	RefusalQuietPeriod time.Duration
	// InsecureRegistries are the registries (host[:port]) the image resolver reaches over
	// plain HTTP (--insecure-registries), for sets pinning digests.
	InsecureRegistries []string
	// ImageRecheck is how often the tags of sets pinning digests are read again, to report
	// one that moved (10 minutes when zero; tests shorten it).
	ImageRecheck time.Duration
	// Conditions writes the operator's OLM OperatorCondition (Upgradeable=False during rollouts);
	// operator-lib's in-cluster factory when nil.
	Conditions conditions.Factory
}

// NewScheme returns a scheme with the core types and the SidecarSet API.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := appsv1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	// The OperatorCondition through which OLM is told whether the operator may be upgraded.
	if err := operatorsv2.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// CacheOptions keeps the manager's memory proportional to opted-in Pods: the Pod informer
// lists and watches only Pods with the opt-in label, and keeps of each only what status
// needs. SidecarSets, Namespaces and Pods are handed out uncopied to code that only reads.
// namespace is the operator's: SidecarSet revisions are read there only. injection is the
// --injection flag: only policy mode reads MutatingAdmissionPolicies, which API servers before
// 1.36 do not serve (a cache option for a kind the server does not know fails the start).
func CacheOptions(namespace, injection string) cache.Options {
	optedIn := labels.SelectorFromSet(inject.OptInSelector().MatchLabels)
	rendered := labels.SelectorFromSet(labels.Set{policy.ManagedByLabel: policy.ManagedByValue})
	opts := cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:              {Label: optedIn, Transform: trimPod},
			&corev1.Namespace{}:        {UnsafeDisableDeepCopy: ptr.To(true)},
			&appsv1alpha1.SidecarSet{}: {UnsafeDisableDeepCopy: ptr.To(true)},
		},
		DefaultTransform: cache.TransformStripManagedFields(),
	}
	if injection == InjectionPolicy {
		// Only the policies and bindings the operator rendered.
		opts.ByObject[&admissionregistrationv1.MutatingAdmissionPolicy{}] = cache.ByObject{Label: rendered}
		opts.ByObject[&admissionregistrationv1.MutatingAdmissionPolicyBinding{}] = cache.ByObject{Label: rendered}
	}
	if namespace != "" {
		// Revisions live in the operator's namespace and carry the set's name.
		revisions, _ := labels.NewRequirement(appsv1alpha1.RevisionSetLabel, selection.Exists, nil)
		opts.ByObject[&appsv1.ControllerRevision{}] = cache.ByObject{
			Namespaces: map[string]cache.Config{namespace: {}}, Label: labels.NewSelector().Add(*revisions)}
	}
	return opts
}

// trimPod drops what status computation and the rollout never read. Of the spec it keeps each
// container's name and image and the node: a sidecar counts as settled when the kubelet
// reports the image the spec names (rollout.Classify), and the node's kubelet decides whether a
// native sidecar can be updated in place. It keeps each container's requests and limits and
// restart policy too: the rollout resizes a sidecar with a resourcesPolicy when an app
// container (or native sidecar) was resized in place; the pods of a workload share one copy of
// each (sharedResources). Of the container statuses it keeps the name, image, ready flag and why
// a container waits.
func trimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
			Labels: pod.Labels, Annotations: pod.Annotations, DeletionTimestamp: pod.DeletionTimestamp,
			Generation: pod.Generation, OwnerReferences: pod.OwnerReferences,
		},
		// The grace period says how long a pod may wait for an old sidecar to stop (status).
		Spec: corev1.PodSpec{NodeName: pod.Spec.NodeName, TerminationGracePeriodSeconds: pod.Spec.TerminationGracePeriodSeconds,
			Containers: trimContainers(pod.Spec.Containers), InitContainers: trimContainers(pod.Spec.InitContainers)},
		Status: corev1.PodStatus{Phase: pod.Status.Phase, Conditions: pod.Status.Conditions, ObservedGeneration: pod.Status.ObservedGeneration,
			ContainerStatuses: trimStatuses(pod.Status.ContainerStatuses), InitContainerStatuses: trimStatuses(pod.Status.InitContainerStatuses)},
	}, nil
}

func trimContainers(in []corev1.Container) []corev1.Container {
	if len(in) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(in))
	for i := range in {
		out[i] = corev1.Container{Name: in[i].Name, Image: in[i].Image, Resources: sharedResources.get(in[i].Resources), RestartPolicy: in[i].RestartPolicy}
	}
	return out
}

// Operator is what Setup registered.
type Operator struct {
	// Sets is the SidecarSet snapshot the webhooks and the reconciler share.
	Sets *snapshot.Store
	// Cache is the manager's cache, which the webhooks and the reconciler read.
	Cache cache.Cache
}

// Setup registers the webhooks, the reconciler and the health checks with the manager.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) (*Operator, error) {
	if opts.Conditions == nil {
		opts.Conditions = conditions.InClusterFactory{Client: mgr.GetClient()}
	}
	policyMode, err := injectionMode(mgr, opts.Injection)
	if err != nil {
		return nil, err
	}
	store := snapshot.NewStore()
	informer, err := mgr.GetCache().GetInformer(ctx, &appsv1alpha1.SidecarSet{})
	if err != nil {
		return nil, fmt.Errorf("getting the SidecarSet informer: %w", err)
	}
	reg, err := informer.AddEventHandler(store.EventHandler())
	if err != nil {
		return nil, fmt.Errorf("watching SidecarSets: %w", err)
	}
	synced := reg.HasSynced
	if opts.Namespace != "" {
		// A set may pin a stored revision: the view is complete only with the revisions too.
		revisions, err := mgr.GetCache().GetInformer(ctx, &appsv1.ControllerRevision{})
		if err != nil {
			return nil, fmt.Errorf("getting the ControllerRevision informer: %w", err)
		}
		revReg, err := revisions.AddEventHandler(store.RevisionEventHandler())
		if err != nil {
			return nil, fmt.Errorf("watching SidecarSet revisions: %w", err)
		}
		synced = func() bool { return reg.HasSynced() && revReg.HasSynced() }
	}
	store.SetSynced(synced)
	// The injector reads Namespaces and LimitRanges on every replica, leader or not: start
	// their informers now rather than on the first admission.
	if _, err := mgr.GetCache().GetInformer(ctx, &corev1.Namespace{}); err != nil {
		return nil, fmt.Errorf("getting the Namespace informer: %w", err)
	}
	if _, err := mgr.GetCache().GetInformer(ctx, &corev1.LimitRange{}); err != nil {
		return nil, fmt.Errorf("getting the LimitRange informer: %w", err)
	}

	scope, err := injectionScope(opts)
	if err != nil {
		return nil, err
	}
	allowed, err := inject.ParseKeyAllowList(opts.PatchPodMetadataAllowedKeys)
	if err != nil {
		return nil, err
	}
	registry := opts.MetricsRegistry
	if registry == nil {
		registry = metrics.Registry
	}
	opMetrics, err := opmetrics.New(registry)
	if err != nil {
		return nil, err
	}
	if err := setupWebhooks(mgr, store, scope, &allowed, opts.RefusalQuietPeriod, opMetrics); err != nil {
		return nil, err
	}
	var policyStates *controllers.PolicyStates
	if policyMode {
		policyStates = controllers.NewPolicyStates()
	}
	if err := setupControllers(mgr, store, opts, scope, policyMode, policyStates, &allowed, opMetrics); err != nil {
		return nil, err
	}
	if policyMode {
		lazy, err := readsPodLazily(mgr)
		if err != nil {
			return nil, err
		}
		policies := &controllers.PolicyReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Sets: store,
			States:  policyStates,
			Options: policy.Options{Scope: scope, LazyPod: lazy}}
		if err := policies.SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("setting up the policy reconciler: %w", err)
		}
	}
	if err := addHealthChecks(mgr, store); err != nil {
		return nil, err
	}
	return &Operator{Sets: store, Cache: mgr.GetCache()}, nil
}

// setupControllers registers the controllers that share the operator's view of the Pods, one
// per job: status (reads only), rollout (the only writer of Pods), and revisions (when the
// operator knows its namespace, where they are stored).
func setupControllers(mgr ctrl.Manager, store *snapshot.Store, opts Options, scope status.Scope,
	policyMode bool, policyStates *controllers.PolicyStates, allowed *inject.KeyAllowList, m *opmetrics.Metrics) error {
	resize, err := servesPodResize(mgr)
	if err != nil {
		return err
	}
	pods := controllers.NewPodIndex(mgr.GetCache(), scope)
	rollouts := controllers.NewRolloutStates()
	recorder := mgr.GetEventRecorder("sidecarset-controller")
	statusRec := &controllers.StatusReconciler{Client: mgr.GetClient(), Sets: store, Pods: pods, Rollouts: rollouts,
		Recorder: recorder, Namespace: opts.Namespace, PolicyMode: policyMode, Policies: policyStates, RefusalQuiet: opts.RefusalQuietPeriod, Metrics: m}
	if err := statusRec.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the status reconciler: %w", err)
	}
	rolloutRec := &controllers.RolloutReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Sets: store,
		Pods: pods, Scope: scope, Recorder: recorder, Namespace: opts.Namespace, States: rollouts,
		Upgrade: controllers.NewUpgradeGate(opts.Conditions), Resize: resize, AllowedAnnotations: allowed, Metrics: m}
	if err := rolloutRec.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the rollout reconciler: %w", err)
	}
	if opts.Namespace == "" {
		return nil
	}
	revisions := &controllers.RevisionReconciler{Client: mgr.GetClient(), Namespace: opts.Namespace, Pods: pods}
	if err := revisions.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the revision reconciler: %w", err)
	}
	// Pull secrets are read in the operator's namespace: without one, sets pinning digests wait.
	resolver := &controllers.ImageResolver{Client: mgr.GetClient(), Secrets: mgr.GetAPIReader(), Namespace: opts.Namespace,
		Resolver: &images.Resolver{Insecure: opts.InsecureRegistries}, Recorder: recorder, Recheck: opts.ImageRecheck}
	if err := resolver.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the image resolver: %w", err)
	}
	return nil
}

// servesPodResize reports whether the API server serves the pods/resize subresource (Kubernetes
// 1.33 and later), through which the rollout changes a running sidecar's resources.
func servesPodResize(mgr ctrl.Manager) (bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return false, fmt.Errorf("creating a discovery client: %w", err)
	}
	list, err := dc.ServerResourcesForGroupVersion("v1")
	if err != nil {
		return false, fmt.Errorf("discovering the core API's resources: %w", err)
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "pods/resize" }), nil
}

// readsPodLazily reports whether the API server reads the pod lazily for a policy with
// matchConditions (policy.Options.LazyPod), by its version. A cluster whose API servers are
// upgraded while the operator runs keeps the older rendering, correct on both, until the
// operator restarts.
func readsPodLazily(mgr ctrl.Manager) (bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return false, fmt.Errorf("creating a discovery client: %w", err)
	}
	info, err := dc.ServerVersion()
	if err != nil {
		return false, fmt.Errorf("reading the API server's version: %w", err)
	}
	return policy.ReadsPodLazily(info.GitVersion), nil
}

// injectionScope is the engine's gate scope: the operator's own namespace and
// opts.ExcludedNamespaces, which must be namespace names, are never injected (nor is
// kube-system). The webhook, status, rollouts and policies all read this one scope.
func injectionScope(opts Options) (inject.Scope, error) {
	for _, ns := range opts.ExcludedNamespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			return inject.Scope{}, fmt.Errorf("--excluded-namespaces: %q is not a namespace name (%s); list names separated by commas",
				ns, strings.Join(msgs, ", "))
		}
	}
	return inject.Scope{OperatorNamespace: opts.Namespace, ExcludedNamespaces: opts.ExcludedNamespaces}, nil
}

// ParseList splits the value of a list flag (--excluded-namespaces, --insecure-registries):
// entries separated by commas, blanks around them and empty entries ignored.
func ParseList(value string) []string {
	var out []string
	for _, ns := range strings.Split(value, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			out = append(out, ns)
		}
	}
	return out
}

// injectionMode reports whether the operator runs in policy mode. Policy mode on an API server
// that does not serve MutatingAdmissionPolicy v1 is an error naming the flag, never a silent
// fallback to the webhook.
func injectionMode(mgr ctrl.Manager, mode string) (bool, error) {
	switch mode {
	case "", InjectionWebhook:
		return false, nil
	case InjectionPolicy:
	default:
		return false, fmt.Errorf("--injection=%q: use %q or %q", mode, InjectionWebhook, InjectionPolicy)
	}
	gk := schema.GroupKind{Group: admissionregistrationv1.GroupName, Kind: "MutatingAdmissionPolicy"}
	if _, err := mgr.GetRESTMapper().RESTMapping(gk, admissionregistrationv1.SchemeGroupVersion.Version); err != nil {
		return false, fmt.Errorf("--injection=%s needs the API server to serve %s/v1 MutatingAdmissionPolicy "+
			"(Kubernetes 1.36 or later, its MutatingAdmissionPolicy admission plugin on); run with --injection=%s instead: %w",
			InjectionPolicy, admissionregistrationv1.GroupName, InjectionWebhook, err)
	}
	return true, nil
}

// setupWebhooks registers the pod injector (never injecting what scope excludes) and the
// SidecarSet validator.
func setupWebhooks(mgr ctrl.Manager, store *snapshot.Store, scope inject.Scope, allowed *inject.KeyAllowList, quiet time.Duration,
	m *opmetrics.Metrics) error {
	reader := mgr.GetCache()
	// Each replica records the pods its webhook refuses into the set's status.refusals (its own
	// entry) and a PodRefused event on the set.
	ledger := &refusals.Ledger{Replica: replicaName(), Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("sidecarset-injector"),
		Quiet: quiet}
	if err := mgr.Add(ledger); err != nil {
		return fmt.Errorf("adding the refusal ledger: %w", err)
	}
	podSecurity, err := ourwebhook.NewPodSecurity()
	if err != nil {
		return err
	}
	injector := &ourwebhook.PodInjector{
		Sets:               store,
		PodSecurity:        podSecurity,
		Recorder:           mgr.GetEventRecorder("sidecarset-injector"),
		Scope:              scope,
		AllowedAnnotations: allowed,
		NamespaceLabels:    ourwebhook.NamespaceLabelsFrom(reader, mgr.GetAPIReader()),
		LimitRanges:        ourwebhook.LimitRangesFrom(reader),
		Refusals:           ledger,
		Metrics:            m,
	}
	// Review decodes the AdmissionReview itself and hands the request to controller-runtime's Webhook.
	mgr.GetWebhookServer().Register(ourwebhook.PodInjectorPath,
		ourwebhook.NewReview(injector))
	err = ctrl.NewWebhookManagedBy(mgr, &appsv1alpha1.SidecarSet{}).
		WithValidator(&ourwebhook.SidecarSetValidator{Reader: reader}).
		Complete()
	if err != nil {
		return fmt.Errorf("setting up the SidecarSet validating webhook: %w", err)
	}
	return nil
}

// addHealthChecks: alive while the process runs; ready once the webhook server serves and the
// SidecarSet view is complete (a replica that is not ready gets no admission traffic).
func addHealthChecks(mgr ctrl.Manager, store *snapshot.Store) error {
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding healthz check: %w", err)
	}
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return fmt.Errorf("adding webhook readyz check: %w", err)
	}
	return mgr.AddReadyzCheck("sidecarsets-synced", func(*http.Request) error {
		if !store.Ready() {
			return errors.New("the SidecarSet cache has not synced")
		}
		return nil
	})
}

func trimStatuses(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	if len(in) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(in))
	for i := range in {
		out[i] = corev1.ContainerStatus{Name: in[i].Name, Image: in[i].Image, ImageID: in[i].ImageID, Ready: in[i].Ready}
		if w := in[i].State.Waiting; w != nil {
			out[i].State.Waiting = &corev1.ContainerStateWaiting{Reason: w.Reason}
		}
		// Status reads only that the container runs: an old sidecar still running while the
		// spec names the new image is a pod waiting for it to stop. One shared, read-only value.
		if in[i].State.Running != nil {
			out[i].State.Running = runningState
		}
	}
	return out
}

// runningState marks a running container in the pod cache; nothing writes to it.
var runningState = &corev1.ContainerStateRunning{}

// replicaName names this replica in status.refusals: its pod's name (POD_NAME, from the
// downward API in config/manager), else the host's name.
func replicaName() string {
	if name := os.Getenv("POD_NAME"); name != "" {
		return name
	}
	if name, err := os.Hostname(); err == nil && name != "" {
		return name
	}
	return "sidecarset-operator"
}
