// Package opmetrics holds every metric the operator serves, in one object built at start-up
// and handed to the pod webhook and the controllers: no package registers a global of its own,
// so a test builds its own Metrics on its own registry and reads exactly what its code moved.
package opmetrics

import (
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the operator's own metrics. docs/operations.md describes each; the alerts and
// the dashboard use only these and controller-runtime's (TestAlertsAndDashboardUseServedMetrics).
type Metrics struct {
	// Admissions: pod admissions by the sidecar injector, by result and reason.
	Admissions *prometheus.CounterVec
	// Decisions: what each SidecarSet whose selector matched an opted-in pod did with it.
	Decisions *prometheus.CounterVec
	// Evictions: pods the rollout evicted, by SidecarSet and reason.
	Evictions *prometheus.CounterVec
	// Pods: each SidecarSet's pods by state, as in its status (the leader's).
	Pods *prometheus.GaugeVec
	// Ready: 1 when a SidecarSet's Ready condition is True (the leader's).
	Ready *prometheus.GaugeVec
	// SidecarRequests and SidecarLimits: what each SidecarSet's sidecars request and limit, per
	// namespace, as status.sidecarResources sums them (the leader's).
	SidecarRequests, SidecarLimits *prometheus.GaugeVec
	// SidecarPods: the pods those figures are summed over, per namespace (the leader's).
	SidecarPods *prometheus.GaugeVec

	mu sync.Mutex
	// footprinted: set -> the namespaces SetFootprints last exported for it.
	footprinted map[string][]string
}

// Footprint is what a set's sidecars request and limit in one namespace: cpu in cores, memory
// and ephemeral storage in bytes, over Pods pods.
type Footprint struct {
	Pods int32
	// Regular and native sidecars apart.
	Requests, Limits [2]Amounts
}

// The values of the sidecar label, indexing Footprint's arrays.
var sidecarKinds = [2]string{"regular", "native"}

// Amounts are cpu in cores, memory and ephemeral storage in bytes.
type Amounts struct{ CPU, Memory, EphemeralStorage float64 }

// SetFootprints sets a set's resource gauges to byNamespace, and drops the series of the
// namespaces it named last time and not now (nil drops them all). Live series are never
// dropped and set again, so a scrape never misses one.
func (m *Metrics) SetFootprints(set string, byNamespace map[string]Footprint) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ns := range m.footprinted[set] {
		if _, live := byNamespace[ns]; !live {
			for _, g := range []*prometheus.GaugeVec{m.SidecarRequests, m.SidecarLimits, m.SidecarPods} {
				g.DeletePartialMatch(prometheus.Labels{"sidecarset": set, "namespace": ns})
			}
		}
	}
	if len(byNamespace) == 0 {
		delete(m.footprinted, set)
		return
	}
	namespaces := make([]string, 0, len(byNamespace))
	for ns, f := range byNamespace {
		namespaces = append(namespaces, ns)
		m.SidecarPods.WithLabelValues(set, ns).Set(float64(f.Pods))
		for _, v := range []struct {
			g *prometheus.GaugeVec
			a [2]Amounts
		}{{m.SidecarRequests, f.Requests}, {m.SidecarLimits, f.Limits}} {
			for i, kind := range sidecarKinds {
				v.g.WithLabelValues(set, ns, kind, "cpu", "core").Set(v.a[i].CPU)
				v.g.WithLabelValues(set, ns, kind, "memory", "byte").Set(v.a[i].Memory)
				v.g.WithLabelValues(set, ns, kind, "ephemeral_storage", "byte").Set(v.a[i].EphemeralStorage)
			}
		}
	}
	if m.footprinted == nil {
		m.footprinted = map[string][]string{}
	}
	m.footprinted[set] = namespaces
}

// New builds the metrics and registers them with reg (controller-runtime's registry, served on
// the manager's metrics endpoint, in the operator; a fresh registry in a test).
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Admissions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sidecarset_pod_admissions_total",
			Help: "Pod admissions by the sidecar injector, by result (injected, skipped, denied, error) and reason.",
		}, []string{"result", "reason"}),
		Decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sidecarset_pod_decisions_total",
			Help: "What each SidecarSet whose selector matched an opted-in pod did with it: result injected (reason Injected), " +
				"skipped (reason AlreadyInjected, NamespaceMismatch or Paused) or denied (reason: why the engine refused the pod, " +
				"one of the refusal reasons in docs/concepts.md, such as ContainerClash, PortClash or LimitRange).",
		}, []string{"sidecarset", "result", "reason"}),
		Evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sidecarset_pod_evictions_total",
			Help: "Pods the rollout evicted so that their controllers recreate them with the current sidecars, by SidecarSet and " +
				"reason (outdated: the change cannot be made in place; not_injected: the pod never got the sidecars).",
		}, []string{"sidecarset", "reason"}),
		Pods: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sidecarset_pods",
			Help: "Pods of each SidecarSet by state (matched, updated, ready, updated_ready, unavailable, excluded), as in its status; " +
				"exported by the leader.",
		}, []string{"sidecarset", "state"}),
		Ready: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sidecarset_ready",
			Help: "1 when the SidecarSet's Ready condition is True, 0 otherwise; exported by the leader.",
		}, []string{"sidecarset"}),
	}
	// The resource metrics take kube-state-metrics' shape (kube_pod_container_resource_requests:
	// resource, unit, values in cores and bytes), so a cost query joins them by namespace.
	// They carry no pod label: a series per namespace and set, however many pods. The sidecar
	// label keeps native sidecars (init containers that run for the pod's life) apart: cost
	// tools that read only app containers' requests miss those.
	for _, v := range []struct {
		to   **prometheus.GaugeVec
		name string
		what string
	}{{&m.SidecarRequests, "sidecarset_sidecar_resource_requests", "request"}, {&m.SidecarLimits, "sidecarset_sidecar_resource_limits", "limit"}} {
		*v.to = prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: v.name,
			Help: "What each SidecarSet's sidecars " + v.what + " in total in the pods it injected, per namespace, sidecar kind " +
				"(regular: containers; native: init containers with restartPolicy Always) and resource (cpu in cores, memory and " +
				"ephemeral_storage in bytes; unit says which); exported by the leader.",
		}, []string{"sidecarset", "namespace", "sidecar", "resource", "unit"})
	}
	m.SidecarPods = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sidecarset_sidecar_pods",
		Help: "The pods each SidecarSet injected, not being deleted, per namespace: what sidecarset_sidecar_resource_* sum over; exported by the leader.",
	}, []string{"sidecarset", "namespace"})
	for _, c := range []prometheus.Collector{m.Admissions, m.Decisions, m.Evictions, m.Pods, m.Ready, m.SidecarRequests, m.SidecarLimits, m.SidecarPods} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering the operator's metrics: %w", err)
		}
	}
	return m, nil
}

// Unregistered is a Metrics no registry serves, for code run outside the operator (the
// kubectl plugin runs the webhook's handler) and for tests that read no metric.
func Unregistered() *Metrics {
	m, err := New(prometheus.NewRegistry())
	if err != nil {
		panic(err) // a fresh registry takes every collector once
	}
	return m
}
