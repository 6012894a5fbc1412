// Package opmetrics holds every metric the operator serves, in one object built at start-up
// and handed to the pod webhook and the controllers: no package registers a global of its own,
// so a test builds its own Metrics on its own registry and reads exactly what its code moved.
package opmetrics

import (
	"fmt"

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
	for _, c := range []prometheus.Collector{m.Admissions, m.Decisions, m.Evictions, m.Pods, m.Ready} {
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
