package cli

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestKruiseExprToCEL(t *testing.T) {
	for _, tc := range []struct {
		resource corev1.ResourceName
		kruise   string
		want     string // "" when refused
		wantErr  string
	}{
		{"cpu", "max(cpu*50%, 50m)", "max(cpu * 0.5, quantity('50m'))", ""},
		{"cpu", "cpu", "cpu", ""},
		{"cpu", "CPU * 2 + 1", "cpu * 2.0 + 1.0", ""},
		{"cpu", "min(cpu, 1.5) - 100m", "min(cpu, 1.5) - quantity('100m')", ""},
		{"cpu", "cpu*1e3%", "cpu * 10.0", ""},
		{"memory", "memory/4", "memory / 4.0", ""},
		{"memory", "(memory + 64Mi) * 125%", "(memory + quantity('64Mi')) * 1.25", ""},
		{"memory", "200Mi", "quantity('200Mi')", ""},
		{"memory", "memory ^ 2", "", `'^' at offset 7`},
		{"memory", "memory * 2Qi", "", `quantity "2Qi"`},
		{"cpu", "avg(cpu, 1)", "", "undeclared reference to 'avg'"},
	} {
		t.Run(tc.kruise, func(t *testing.T) {
			got, err := kruiseExprToCEL(tc.resource, tc.kruise)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("kruiseExprToCEL(%q) = %q, %v; want an error containing %q", tc.kruise, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("kruiseExprToCEL(%q) = %q, %v; want %q", tc.kruise, got, err, tc.want)
			}
		})
	}
}
