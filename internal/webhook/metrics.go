package webhook

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Admission results, the values of the result label.
const (
	resultInjected = "injected"
	resultSkipped  = "skipped"
	resultDenied   = "denied"
	resultError    = "error"
)

var (
	admissions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sidecarset_pod_admissions_total",
		Help: "Pod admissions by the sidecar injector, by result (injected, skipped, denied, error) and reason.",
	}, []string{"result", "reason"})
	decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sidecarset_pod_decisions_total",
		Help: "What each SidecarSet whose selector matched an opted-in pod did with it: result injected (reason Injected), " +
			"skipped (reason AlreadyInjected, NamespaceMismatch or Paused) or denied (reason: why the engine refused the pod, " +
			"one of the refusal reasons in docs/concepts.md, such as ContainerClash, PortClash or LimitRange).",
	}, []string{"sidecarset", "result", "reason"})
)

func init() {
	// controller-runtime's registry is served on the manager's metrics endpoint, next to its
	// own webhook latency histogram (controller_runtime_webhook_latency_seconds).
	metrics.Registry.MustRegister(admissions, decisions)
}

// Reasons for the reason label.
const (
	reasonNotPodCreate    = "NotPodCreate"
	reasonNoMatch         = "NoMatchingSidecarSet"
	reasonUnchanged       = "AlreadyInjected"
	reasonInjected        = "Injected"
	reasonStripped        = "StaleInjectionRemoved"
	reasonDecode          = "DecodeError"
	reasonNotReady        = "NotReady"
	reasonNamespaceLookup = "NamespaceLookupError"
	reasonInjectionError  = "InjectionError"
)
