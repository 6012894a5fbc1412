package inject_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

func TestResourceExprEval(t *testing.T) {
	for _, tc := range []struct {
		name     string
		resource corev1.ResourceName
		expr     string
		value    float64
		want     string // the quantity, or "" when wantErr
		wantErr  string
	}{
		{name: "Kruise's max(cpu*50%, 50m), above the floor", resource: "cpu", expr: "max(cpu * 0.5, quantity('50m'))", value: 0.4, want: "200m"},
		{name: "Kruise's max(cpu*50%, 50m), at the floor", resource: "cpu", expr: "max(cpu * 0.5, quantity('50m'))", value: 0.02, want: "50m"},
		{name: "min of three", resource: "memory", expr: "min(memory, quantity('1Gi'), quantity('512Mi'))", value: 2 << 30, want: "512Mi"},
		{name: "a fixed quantity", resource: "memory", expr: "quantity('200Mi')", value: 0, want: "200Mi"},
		{name: "a plain number of cores", resource: "cpu", expr: "cpu + 1.0", value: 0.25, want: "1250m"},
		{name: "rounded up to a millicore", resource: "cpu", expr: "cpu / 3.0", value: 0.1, want: "34m"},
		{name: "double rounding is not rounded up", resource: "cpu", expr: "cpu * 3.0", value: 0.1, want: "300m"},
		{name: "rounded up to a byte", resource: "memory", expr: "memory / 3.0", value: 100, want: "34"},
		{name: "zero", resource: "cpu", expr: "cpu * 0.0", value: 2, want: "0"},
		{name: "negative", resource: "cpu", expr: "cpu - quantity('1')", value: 0.5, wantErr: "must not be negative"},
		{name: "NaN", resource: "cpu", expr: "cpu / cpu", value: 0, wantErr: "not a quantity"},
		{name: "infinite", resource: "memory", expr: "memory / 0.0", value: 1, wantErr: "not a quantity"},
		{name: "too large", resource: "memory", expr: "memory * 1e300", value: 1, wantErr: "too large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := inject.CompileResourceExpr(tc.resource, tc.expr)
			if err != nil {
				t.Fatalf("compiling %q: %v", tc.expr, err)
			}
			q, err := e.Eval(tc.value)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Eval(%v) = %s, %v; want an error containing %q", tc.value, q.String(), err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Eval(%v): %v", tc.value, err)
			}
			if q.String() != tc.want {
				t.Errorf("Eval(%v) = %s, want %s", tc.value, q.String(), tc.want)
			}
		})
	}
}

func TestCompileResourceExprRefuses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		resource corev1.ResourceName
		expr     string
		wantErr  string
	}{
		{"a resource that is not computed", "ephemeral-storage", "1.0", "only cpu and memory"},
		{"an int literal", "cpu", "cpu * 2", "write 2.0, not 2"},
		{"a bool", "cpu", "cpu > 1.0", "must give a number"},
		{"an int result", "memory", "1", "must give a number"},
		{"a bad quantity", "memory", "quantity('1 GB')", `quantity("1 GB")`},
		{"a computed quantity", "memory", "quantity('1' + 'Gi')", "quoted quantity"},
		{"the other variable", "memory", "cpu", "undeclared reference to 'cpu'"},
		{"over the cost limit", "cpu", balancedSum(10), "over the limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := inject.CompileResourceExpr(tc.resource, tc.expr)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("CompileResourceExpr(%q) = %v; want an error containing %q", tc.expr, err, tc.wantErr)
			}
		})
	}
}

// balancedSum is an expression adding up 2^depth times cpu, nested no deeper than depth.
func balancedSum(depth int) string {
	if depth == 0 {
		return "cpu"
	}
	half := balancedSum(depth - 1)
	return "(" + half + " + " + half + ")"
}
