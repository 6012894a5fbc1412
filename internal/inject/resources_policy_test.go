package inject_test

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
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

// TestUpdateInPlaceResourcesPolicy injects a pod with a sidecar whose resourcesPolicy computes
// its resources, resizes the app container in place (and maybe changes the set), and checks
// what UpdateInPlace makes of it: the sidecar follows the app container through a resize,
// even when the pod's hash is current, and the resized pod is what injecting afresh gives.
func TestUpdateInPlaceResourcesPolicy(t *testing.T) {
	policySet := func(cpu string) *appsv1alpha1.SidecarSet {
		s := webSet("mesh", corev1.Container{Name: "proxy", Image: "proxy:1"})
		s.Spec.Containers[0].ResourcesPolicy = &appsv1alpha1.ResourcesPolicy{ResourcesExpr: appsv1alpha1.ResourcesExpr{
			Requests: map[corev1.ResourceName]appsv1alpha1.ResourceExpression{corev1.ResourceCPU: appsv1alpha1.ResourceExpression(cpu)},
			Limits:   map[corev1.ResourceName]appsv1alpha1.ResourceExpression{corev1.ResourceMemory: "memory / 2.0"},
		}}
		return s
	}
	app := func(cpu, memory string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memory)},
		}
	}
	tests := []struct {
		name      string
		cpuExpr   string                      // the set's cpu request expression, before and after
		resizedTo corev1.ResourceRequirements // the app container's resources after its resize
		change    func(*appsv1alpha1.SidecarSet)
		// wantImages are "name:to"; wantResized "name:requests cpu/limits memory"; wantBlocked
		// a substring of the one entry of Blocked.
		wantImages  []string
		wantResized []string
		wantBlocked string
	}{
		{name: "nothing resized", cpuExpr: "cpu * 0.5", resizedTo: app("400m", "256Mi")},
		{name: "the app's cpu request resized", cpuExpr: "cpu * 0.5", resizedTo: app("1", "256Mi"),
			wantResized: []string{"proxy:500m/128Mi"}},
		{name: "the app's memory resized", cpuExpr: "cpu * 0.5", resizedTo: app("400m", "1Gi"),
			wantResized: []string{"proxy:200m/512Mi"}},
		{name: "resized so that the expression goes negative", cpuExpr: "cpu - quantity('300m')", resizedTo: app("200m", "256Mi"),
			wantBlocked: "spec.containers[0].resourcesPolicy.resourcesExpr.requests[cpu]: for this pod (cpu = 0.2"},
		{name: "a new image after the app was resized", cpuExpr: "cpu * 0.5", resizedTo: app("1", "256Mi"),
			change:     func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "proxy:2" },
			wantImages: []string{"proxy:proxy:2"}, wantResized: []string{"proxy:500m/128Mi"}},
		{name: "a new expression", cpuExpr: "cpu * 0.5", resizedTo: app("400m", "256Mi"),
			change: func(s *appsv1alpha1.SidecarSet) {
				s.Spec.Containers[0].ResourcesPolicy.ResourcesExpr.Requests[corev1.ResourceCPU] = "cpu * 0.25"
			},
			wantResized: []string{"proxy:100m/128Mi"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := policySet(tt.cpuExpr)
			res, err := inject.Apply(inject.Input{Pod: webPod(corev1.Container{Name: "app", Image: "app:1", Resources: app("400m", "256Mi")}), Sets: compile(t, old)})
			if err != nil {
				t.Fatal(err)
			}
			pod := res.Pod()
			pod.ResourceVersion = "42"
			pod.Spec.Containers[0].Resources = tt.resizedTo // pods/resize of the app container
			set := policySet(tt.cpuExpr)
			if tt.change != nil {
				tt.change(set)
			}
			sets := compile(t, set)
			u, err := inject.UpdateInPlace(inject.Input{Pod: pod, Sets: sets}, "mesh", compile(t, old)[0])
			if err != nil {
				t.Fatal(err)
			}
			var images, resized []string
			for _, c := range u.Images {
				images = append(images, c.Name+":"+c.To)
			}
			for _, r := range u.Resources {
				resized = append(resized, fmt.Sprintf("%s:%s/%s", r.Name, r.To.Requests.Cpu(), r.To.Limits.Memory()))
			}
			if strings.Join(images, ",") != strings.Join(tt.wantImages, ",") {
				t.Errorf("Images = %v, want %v", images, tt.wantImages)
			}
			if strings.Join(resized, ",") != strings.Join(tt.wantResized, ",") {
				t.Errorf("Resources = %v, want %v", resized, tt.wantResized)
			}
			if tt.wantBlocked != "" {
				if len(u.Blocked) != 1 || !strings.Contains(u.Blocked[0], tt.wantBlocked) {
					t.Fatalf("Blocked = %q, want one entry containing %q", u.Blocked, tt.wantBlocked)
				}
			} else if len(u.Blocked) > 0 {
				t.Fatalf("Blocked = %q, want none", u.Blocked)
			}
			if got, want := inject.NeedsPolicyResize(sets[0], pod), u.Current() && (len(tt.wantResized) > 0 || tt.wantBlocked != ""); got != want {
				t.Errorf("NeedsPolicyResize = %v, want %v", got, want)
			}
			if tt.wantBlocked != "" {
				return
			}
			// The resized (and patched) pod is current: injecting it afresh changes nothing.
			updated := patchedPod(t, pod, u.ResizePatch())
			if ops := u.Patch(); ops != nil {
				updated = patchedPod(t, updated, ops[1:])
			}
			again, err := inject.Apply(inject.Input{Pod: updated, Sets: sets})
			if err != nil {
				t.Fatal(err)
			}
			if again.Changed() {
				t.Errorf("the updated pod is not current: Apply would patch %s", mustJSON(t, again.Patch()))
			}
			if inject.NeedsPolicyResize(sets[0], updated) {
				t.Errorf("the updated pod still needs a resize")
			}
		})
	}
}
