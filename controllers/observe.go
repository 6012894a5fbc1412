package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/eventcatalog"
	"github.com/sidecarset/sidecarset-operator/internal/opmetrics"
	"github.com/sidecarset/sidecarset-operator/internal/rollout"
	"github.com/sidecarset/sidecarset-operator/internal/tally"
)

// export sets the gauges of a set from the status it should have.
func export(m *opmetrics.Metrics, name string, st *appsv1alpha1.SidecarSetStatus) {
	for _, s := range [...]struct {
		state string
		v     int32
	}{{"matched", st.MatchedPods}, {"updated", st.UpdatedPods}, {"ready", st.ReadyPods},
		{"updated_ready", st.UpdatedReadyPods}, {"unavailable", st.UnavailablePods}, {"excluded", st.ExcludedPods}} {
		m.Pods.WithLabelValues(name, s.state).Set(float64(s.v))
	}
	ready := 0.0
	if meta.IsStatusConditionTrue(st.Conditions, appsv1alpha1.ConditionReady) {
		ready = 1
	}
	m.Ready.WithLabelValues(name).Set(ready)
}

// unexport drops the series of a deleted set.
func unexport(m *opmetrics.Metrics, name string) {
	m.Pods.DeletePartialMatch(prometheus.Labels{"sidecarset": name})
	m.Ready.DeleteLabelValues(name)
	exportFootprints(m, name, nil)
}

// exportFootprints sets the resource gauges of a set from what its sidecars request and
// limit in each namespace (tally.Footprints).
func exportFootprints(m *opmetrics.Metrics, name string, byNamespace map[string]tally.Footprint) {
	out := make(map[string]opmetrics.Footprint, len(byNamespace))
	amounts := func(a rollout.Amounts) opmetrics.Amounts {
		return opmetrics.Amounts{CPU: float64(a.CPU) / 1000, Memory: float64(a.Memory), EphemeralStorage: float64(a.EphemeralStorage)}
	}
	for ns, f := range byNamespace {
		regular := func(all, native rollout.Amounts) rollout.Amounts { all.Add(native, -1); return all }
		out[ns] = opmetrics.Footprint{Pods: f.Pods,
			Requests: [2]opmetrics.Amounts{amounts(regular(f.Requests, f.NativeRequests)), amounts(f.NativeRequests)},
			Limits:   [2]opmetrics.Amounts{amounts(regular(f.Limits, f.NativeLimits)), amounts(f.NativeLimits)}}
	}
	m.SetFootprints(name, out)
}

// recordStatusEvents records events on the SidecarSet for what changed in its status that its
// owner should hear about: the Ready condition's reason (invalid, stopped by a conflict,
// rolling, ready again), and selected pods appearing in namespaces that are never injected.
// The events.k8s.io recorder aggregates repeats into a series.
func (r *StatusReconciler) recordStatusEvents(set *appsv1alpha1.SidecarSet, old, now *appsv1alpha1.SidecarSetStatus) {
	was, is := meta.FindStatusCondition(old.Conditions, appsv1alpha1.ConditionReady), meta.FindStatusCondition(now.Conditions, appsv1alpha1.ConditionReady)
	if is != nil && (was == nil || was.Reason != is.Reason) {
		note := is.Message
		// The detailed condition says more than the summary.
		for reason, detail := range map[string]string{"Invalid": appsv1alpha1.ConditionInvalid, "StoppedByConflict": appsv1alpha1.ConditionConflict} {
			if c := meta.FindStatusCondition(now.Conditions, detail); is.Reason == reason && c != nil {
				note = c.Message
			}
		}
		eventcatalog.Recorder{To: r.Recorder}.Record(set, eventcatalog.Reason(is.Reason), "Reconcile", "%s", note)
	}
	if now.ExcludedPods > 0 && old.ExcludedPods == 0 {
		eventcatalog.Recorder{To: r.Recorder}.Record(set, eventcatalog.PodsExcluded, "Reconcile",
			"%d pods the SidecarSet selects are in namespaces that are never injected (kube-system, the operator's namespace, or labelled %s=%s); they get no sidecars",
			now.ExcludedPods, appsv1alpha1.NamespaceInjectionLabel, appsv1alpha1.NamespaceInjectionDisabled)
	}
}
