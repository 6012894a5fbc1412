package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"
)

// metricName finds the operator's and controller-runtime's metric names in PromQL.
var metricName = regexp.MustCompile(`\b(sidecarset_[a-z_]+|controller_runtime_[a-z_]+)\b`)

// TestAlertsAndDashboardUseServedMetrics: every metric the PrometheusRule and the Grafana
// dashboard under config/ query is one the operator serves (after a pod was injected, so that
// every family has a series): a renamed metric would otherwise silence an alert.
func TestAlertsAndDashboardUseServedMetrics(t *testing.T) {
	ns := newNamespace(t, nil)
	set := createSet(t, agentSet("metrics-names", "metrics-names"))
	must(t, k8s.Create(ctx, appPod(ns, "metrics-names-0", "metrics-names", true)))
	waitForCounts(t, set, counts{matched: 1, updated: 1})

	families, err := metrics.Registry.Gather()
	must(t, err)
	served := map[string]bool{}
	for _, f := range families {
		served[f.GetName()] = true
	}

	var exprs []string
	var rule struct {
		Spec struct {
			Groups []struct {
				Rules []struct {
					Alert string `json:"alert"`
					Expr  string `json:"expr"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "config", "prometheus", "alerts.yaml"))
	must(t, err)
	must(t, yaml.Unmarshal(raw, &rule))
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	var dashboard struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	raw, err = os.ReadFile(filepath.Join(repoRoot(t), "config", "grafana", "sidecarset-operator.json"))
	must(t, err)
	must(t, json.Unmarshal(raw, &dashboard))
	for _, p := range dashboard.Panels {
		for _, target := range p.Targets {
			exprs = append(exprs, target.Expr)
		}
	}
	if len(exprs) < 10 {
		t.Fatalf("read %d expressions; the files lost their alerts or panels", len(exprs))
	}
	for _, e := range exprs {
		names := metricName.FindAllString(e, -1)
		if len(names) == 0 {
			t.Errorf("expression %q queries none of the operator's metrics", e)
		}
		for _, n := range names {
			family := strings.TrimSuffix(n, "_bucket")
			if !served[family] {
				t.Errorf("expression %q queries %s, which the operator does not serve", e, n)
			}
		}
	}
}
