package policy_test

import (
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
	corev1 "k8s.io/api/core/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// TestRecordEncodesPullSecretNames evaluates the policy's record (the variable the status
// annotation is written from) with every pull secret missing from the pod, and compares it with
// the record the engine writes for the same pod, byte for byte. Names holding JSON's special
// characters must stay data: a quote may neither break the JSON nor add an entry.
func TestRecordEncodesPullSecretNames(t *testing.T) {
	tests := []struct {
		name    string
		secrets []string
	}{
		{name: "plain", secrets: []string{"regcred"}},
		{name: "quote", secrets: []string{`a"b`}},
		{name: "injected entry", secrets: []string{`s","evil`}},
		{name: "backslash", secrets: []string{`back\slash`, `\"`}},
		{name: "html and control characters", secrets: []string{"<x>&y", "tab\there", "line\u2028sep"}},
		{name: "beyond ASCII", secrets: []string{"ünïcode", "名前"}},
		{name: "listed twice", secrets: []string{"regcred", "other", "regcred"}},
	}
	env, err := cel.NewEnv(
		cel.Variable("object", cel.DynType),
		cel.Variable("variables", cel.MapType(cel.StringType, cel.DynType)),
		cel.HomogeneousAggregateLiterals(),
		ext.Strings(ext.StringsVersion(2)),
	)
	if err != nil {
		t.Fatalf("creating CEL environment: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := plainSet("plain")
			set.Spec.ImagePullSecrets = nil
			for _, n := range tt.secrets {
				set.Spec.ImagePullSecrets = append(set.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: n})
			}
			want := engineRecord(t, set)
			c := mustCompile(t, set, nil)
			// The pod has no pull secrets: the policy adds (and records) what secrets lists.
			pod := map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "app"}}}}
			secrets := evalVariable(t, env, variable(t, c, "secrets"), map[string]any{"object": pod, "variables": map[string]any{}})
			out := evalVariable(t, env, variable(t, c, "record"), map[string]any{"object": pod, "variables": map[string]any{"secrets": secrets}})
			got, ok := out.Value().(string)
			if !ok {
				t.Fatalf("the record is a %T, want a string", out.Value())
			}
			if got != want {
				t.Errorf("the policy records\n  %s\nthe engine records\n  %s", got, want)
			}
		})
	}
}

// evalVariable evaluates a policy variable's expression.
func evalVariable(t testing.TB, env *cel.Env, expr string, vars map[string]any) ref.Val {
	t.Helper()
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		t.Fatalf("compiling %s: %v", expr, iss.Err())
	}
	prg, err := env.Program(ast)
	if err != nil {
		t.Fatalf("planning %s: %v", expr, err)
	}
	out, _, err := prg.Eval(vars)
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return out
}

// engineRecord is the status annotation the engine writes into a pod of set's that has no
// pull secrets.
func engineRecord(t testing.TB, set *appsv1alpha1.SidecarSet) string {
	t.Helper()
	compiled, err := inject.Compile(set)
	if err != nil {
		t.Fatalf("compiling %s: %v", set.Name, err)
	}
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	pod.Labels = map[string]string{appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue}
	for k, v := range set.Spec.Selector.MatchLabels {
		pod.Labels[k] = v
	}
	res, err := inject.Apply(inject.Input{Pod: pod, Sets: []*inject.CompiledSet{compiled}})
	if err != nil {
		t.Fatalf("the engine refuses the pod: %v", err)
	}
	rec, ok := res.Pod().Annotations[appsv1alpha1.StatusAnnotation]
	if !ok {
		t.Fatalf("the engine does not inject %s (skipped: %v)", set.Name, res.Skipped)
	}
	return rec
}
