package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/sidecarset/sidecarset-operator/internal/inject/injecttest"
)

// newCELEnv is the environment rendered expressions are evaluated in: cel-go's standard
// library plus HomogeneousAggregateLiterals, which the API server's base environment turns on
// and which is what obliges literal to wrap values in dyn(). labels stands for a label map.
func newCELEnv(t testing.TB) *cel.Env {
	t.Helper()
	env, err := cel.NewEnv(
		cel.Variable("labels", cel.MapType(cel.StringType, cel.StringType)),
		cel.HomogeneousAggregateLiterals(),
	)
	if err != nil {
		t.Fatalf("creating CEL environment: %v", err)
	}
	return env
}

// evalCEL compiles expr in env, checks that it has the type want, and evaluates it.
func evalCEL(t testing.TB, env *cel.Env, expr string, want *cel.Type, vars map[string]any) ref.Val {
	t.Helper()
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		t.Fatalf("compiling %s: %v", expr, iss.Err())
	}
	if !ast.OutputType().IsExactType(want) {
		t.Fatalf("%s has type %s, want %s", expr, ast.OutputType(), want)
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

// TestCELEnvRequiresHomogeneousLiterals checks the test environment itself: it must refuse
// the mixed literals the API server refuses, or TestLiteral would pass a literal without
// dyn() that the API server rejects.
func TestCELEnvRequiresHomogeneousLiterals(t *testing.T) {
	env := newCELEnv(t)
	for _, expr := range []string{`{"a": 1, "b": "x"}`, `[1, "x"]`, `[{"a": 1}, {"a": "x"}]`} {
		if _, iss := env.Compile(expr); iss.Err() == nil {
			t.Errorf("%s compiled; the environment does not enforce homogeneous aggregate literals", expr)
		}
	}
}

// selectorLabelSets are the label maps every selector of TestSelectorCEL is evaluated on:
// absent keys, empty values, the values the selectors name and others.
var selectorLabelSets = []map[string]string{
	nil,
	{},
	{"app": "web"},
	{"app": "api"},
	{"app": ""},
	{"tier": "front"},
	{"app": "web", "tier": "front"},
	{"app": "web", "tier": "back"},
	{"app": "api", "tier": "back", "example.com/env": "prod"},
	{"example.com/env": "dev", "tier": "front"},
}

// TestSelectorCEL checks that selectorCEL means what metav1.LabelSelector means, on every
// label map of selectorLabelSets. A nil selector is the exception, by design: it stands for an
// unset namespaceSelector and matches everything (metav1 would match nothing).
func TestSelectorCEL(t *testing.T) {
	env := newCELEnv(t)
	req := func(key string, op metav1.LabelSelectorOperator, values ...string) metav1.LabelSelectorRequirement {
		return metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	tests := []struct {
		name string
		sel  *metav1.LabelSelector
		// always and never say that the selector matches every label map, or none. Every
		// other selector must match some of them and not others, or the table could not tell
		// it from a constant.
		always, never bool
	}{
		{name: "nil", sel: nil, always: true},
		{name: "empty", sel: &metav1.LabelSelector{}, always: true},
		{name: "matchLabels", sel: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		{name: "matchLabels empty value", sel: &metav1.LabelSelector{MatchLabels: map[string]string{"app": ""}}},
		{name: "matchLabels two keys", sel: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "tier": "front"}}},
		{name: "matchLabels prefixed key", sel: &metav1.LabelSelector{MatchLabels: map[string]string{"example.com/env": "prod"}}},
		{name: "In", sel: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{req("app", metav1.LabelSelectorOpIn, "web", "api")}}},
		{name: "In one value", sel: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{req("tier", metav1.LabelSelectorOpIn, "back")}}},
		{name: "In empty value", sel: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{req("app", metav1.LabelSelectorOpIn, "")}}},
		{name: "NotIn", sel: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{req("app", metav1.LabelSelectorOpNotIn, "web")}}},
		{name: "NotIn two values", sel: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{req("tier", metav1.LabelSelectorOpNotIn, "front", "back")}}},
		{name: "Exists", sel: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{req("tier", metav1.LabelSelectorOpExists)}}},
		{name: "DoesNotExist", sel: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{req("tier", metav1.LabelSelectorOpDoesNotExist)}}},
		{name: "matchLabels and In on another key", sel: &metav1.LabelSelector{
			MatchLabels:      map[string]string{"app": "web"},
			MatchExpressions: []metav1.LabelSelectorRequirement{req("tier", metav1.LabelSelectorOpIn, "front")},
		}},
		{name: "matchLabels and NotIn on the same key", sel: &metav1.LabelSelector{
			MatchLabels:      map[string]string{"app": "web"},
			MatchExpressions: []metav1.LabelSelectorRequirement{req("app", metav1.LabelSelectorOpNotIn, "api")},
		}},
		{name: "contradiction", never: true, sel: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			req("app", metav1.LabelSelectorOpExists), req("app", metav1.LabelSelectorOpDoesNotExist),
		}}},
		{name: "every operator", sel: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			req("app", metav1.LabelSelectorOpIn, "web", "api"),
			req("tier", metav1.LabelSelectorOpNotIn, "front"),
			req("example.com/env", metav1.LabelSelectorOpDoesNotExist),
			req("tier", metav1.LabelSelectorOpExists),
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expr, err := selectorCEL(tt.sel, "labels")
			if err != nil {
				t.Fatalf("selectorCEL: %v", err)
			}
			want := metav1Selector(t, tt.sel)
			matched := 0
			for _, m := range selectorLabelSets {
				got := evalSelector(t, env, expr, m)
				if got != want.Matches(labels.Set(m)) {
					t.Errorf("labels %v: %s gives %t, metav1 selector %q gives %t", m, expr, got, want, !got)
				}
				if got {
					matched++
				}
			}
			if always, never := matched == len(selectorLabelSets), matched == 0; always != tt.always || never != tt.never {
				t.Errorf("%s matched %d of %d label maps, want always %t, never %t", expr, matched, len(selectorLabelSets), tt.always, tt.never)
			}
		})
	}
}

// TestSelectorCELRefusesUnknownOperators checks that an operator selectorCEL cannot render is an
// error, not a condition that silently matches.
func TestSelectorCELRefusesUnknownOperators(t *testing.T) {
	sel := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Matches", Values: []string{"web"}}}}
	if expr, err := selectorCEL(sel, "labels"); err == nil {
		t.Errorf("selectorCEL rendered %s, want an error for operator Matches", expr)
	}
}

// fuzzSelectorKeys and fuzzSelectorValues are FuzzSelectorCEL's alphabet: small, so that
// selectors and label maps keep naming the same keys and values.
var (
	fuzzSelectorKeys   = []string{"app", "tier", "example.com/env"}
	fuzzSelectorValues = []string{"", "web", "api"}
	fuzzSelectorOps    = []metav1.LabelSelectorOperator{
		metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist,
	}
)

// FuzzSelectorCEL builds a label map and a valid selector from the fuzzed bytes and checks that
// selectorCEL and metav1.LabelSelector agree on it.
func FuzzSelectorCEL(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 2, 0, 1, 1, 0, 1, 0, 0, 1})                   // matchLabels app=web
	f.Add([]byte{1, 0, 3, 1, 0, 1, 0, 0, 2, 1, 0})                // app In (web, api)
	f.Add([]byte{0, 2, 1, 1, 0, 0, 1, 0, 1, 1, 2})                // tier NotIn (web)
	f.Add([]byte{2, 1, 0, 1, 0, 2, 2, 2, 2, 3, 2})                // Exists, DoesNotExist
	f.Add([]byte{3, 3, 3, 2, 2, 0, 1, 3, 0, 1, 2, 0, 1, 1, 2, 2}) // matchLabels and expressions
	f.Add([]byte{1, 1, 1, 0})                                     // nil selector
	env := newCELEnv(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &selectorGen{data: data}
		m := g.labels()
		sel := g.selector()
		expr, err := selectorCEL(sel, "labels")
		if err != nil {
			t.Fatalf("selectorCEL(%v): %v", sel, err)
		}
		want := metav1Selector(t, sel)
		if got := evalSelector(t, env, expr, m); got != want.Matches(labels.Set(m)) {
			t.Errorf("labels %v: %s gives %t, metav1 selector %q gives %t", m, expr, got, want, !got)
		}
	})
}

// selectorGen reads FuzzSelectorCEL's choices from the fuzzed bytes; once they run out every
// choice is 0.
type selectorGen struct{ data []byte }

func (g *selectorGen) intn(n int) int {
	if len(g.data) == 0 {
		return 0
	}
	b := g.data[0]
	g.data = g.data[1:]
	return int(b) % n
}

// labels chooses, for each key of the alphabet, to leave it out or give it a value.
func (g *selectorGen) labels() map[string]string {
	m := map[string]string{}
	for _, k := range fuzzSelectorKeys {
		if i := g.intn(len(fuzzSelectorValues) + 1); i > 0 {
			m[k] = fuzzSelectorValues[i-1]
		}
	}
	return m
}

// selector builds a selector that metav1 accepts: In and NotIn get at least one value,
// Exists and DoesNotExist none. Keys may repeat, across matchLabels and expressions too.
func (g *selectorGen) selector() *metav1.LabelSelector {
	if g.intn(8) == 1 {
		return nil
	}
	sel := &metav1.LabelSelector{}
	for range g.intn(3) {
		if sel.MatchLabels == nil {
			sel.MatchLabels = map[string]string{}
		}
		sel.MatchLabels[fuzzSelectorKeys[g.intn(len(fuzzSelectorKeys))]] = fuzzSelectorValues[g.intn(len(fuzzSelectorValues))]
	}
	for range g.intn(4) {
		r := metav1.LabelSelectorRequirement{
			Key:      fuzzSelectorKeys[g.intn(len(fuzzSelectorKeys))],
			Operator: fuzzSelectorOps[g.intn(len(fuzzSelectorOps))],
		}
		if r.Operator == metav1.LabelSelectorOpIn || r.Operator == metav1.LabelSelectorOpNotIn {
			for range 1 + g.intn(3) {
				r.Values = append(r.Values, fuzzSelectorValues[g.intn(len(fuzzSelectorValues))])
			}
		}
		sel.MatchExpressions = append(sel.MatchExpressions, r)
	}
	return sel
}

// metav1Selector is what sel means to Kubernetes, except that a nil selector matches
// everything: selectorCEL renders unset namespace selectors, which select every namespace.
func metav1Selector(t testing.TB, sel *metav1.LabelSelector) labels.Selector {
	t.Helper()
	if sel == nil {
		return labels.Everything()
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatalf("metav1 refuses selector %v: %v", sel, err)
	}
	return s
}

func evalSelector(t testing.TB, env *cel.Env, expr string, m map[string]string) bool {
	t.Helper()
	out := evalCEL(t, env, expr, cel.BoolType, map[string]any{"labels": m})
	b, ok := out.(types.Bool)
	if !ok {
		t.Fatalf("%s evaluated to %v (%T), want a bool", expr, out, out)
	}
	return bool(b)
}

// trickyStrings are strings whose CEL literal needs escapes, or that other template
// languages would expand.
var trickyStrings = []string{
	``,
	`say "hi"`,
	`C:\path\to\file`,
	`\"`,
	"line one\nline two\r\n",
	"tab\there",
	"\b\f\x00\x01\x1f\x7f",
	"naïve café 日本語 🚀",
	"${x} $(VAR) $$(VAR) {{ .Values }} %s",
	"\u2028\u2029",
	"<html>&amp;</html>",
	`'single' '''triple'''`,
	`"""`,
	"\xff\xfe not UTF-8",
}

// TestLiteral checks that literal renders Kubernetes values as CEL literals that compile with
// homogeneous aggregate literals on (as in the API server) and evaluate to the values' JSON.
func TestLiteral(t *testing.T) {
	tests := []struct {
		name  string
		value any
	}{
		{name: "null", value: nil},
		{name: "bool", value: true},
		{name: "zero", value: 0},
		{name: "negative", value: -1},
		{name: "max int64", value: int64(math.MaxInt64)},
		{name: "min int64", value: int64(math.MinInt64)},
		{name: "empty list", value: []string{}},
		{name: "empty map", value: map[string]string{}},
		{name: "nested lists", value: [][]any{{1, "a", nil}, {}, {true, []int{2}}}},
		{name: "mixed map", value: map[string]any{"int": 1, "string": "s", "list": []any{1, "a"}, "map": map[string]any{}, "null": nil}},
		{name: "tricky keys", value: map[string]int{`quo"te`: 1, "new\nline": 2, `back\slash`: 3, "": 4, "\u2028": 5}},
		{name: "tricky strings", value: trickyStrings},
		{name: "empty container", value: &corev1.Container{}},
		{name: "container", value: fullContainer()},
		{name: "native sidecar", value: &corev1.Container{
			Name: "proxy", Image: "envoy:1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
			StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9901, Service: ptr.To("")}}},
		}},
		{name: "volumes", value: fullVolumes()},
	}
	for _, c := range injecttest.LoadCases(t, "../inject/testdata") {
		for _, s := range c.Sets {
			for i := range s.Spec.InitContainers {
				tests = append(tests, struct {
					name  string
					value any
				}{fmt.Sprintf("%s/%s/initContainers[%d]", c.Name, s.Name, i), &s.Spec.InitContainers[i].Container})
			}
			for i := range s.Spec.Containers {
				tests = append(tests, struct {
					name  string
					value any
				}{fmt.Sprintf("%s/%s/containers[%d]", c.Name, s.Name, i), &s.Spec.Containers[i].Container})
			}
			for i := range s.Spec.Volumes {
				tests = append(tests, struct {
					name  string
					value any
				}{fmt.Sprintf("%s/%s/volumes[%d]", c.Name, s.Name, i), &s.Spec.Volumes[i]})
			}
		}
	}
	env := newCELEnv(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lit, err := literal(tt.value)
			if err != nil {
				t.Fatalf("literal: %v", err)
			}
			got := celJSON(t, evalCEL(t, env, lit, celTypeOfJSON(t, tt.value), nil))
			if diff := cmp.Diff(jsonOf(t, tt.value), got); diff != "" {
				t.Errorf("%s evaluates to something else than the value's JSON (-JSON +CEL):\n%s", lit, diff)
			}
		})
	}
}

// TestLiteralRefusesNonIntegers checks that literal fails on numbers it cannot write as a CEL
// int: a pod holds none, and writing one as an int or a double would change its JSON.
func TestLiteralRefusesNonIntegers(t *testing.T) {
	for _, v := range []any{1.5, uint64(math.MaxUint64), map[string]any{"a": []any{0.25}}} {
		if lit, err := literal(v); err == nil {
			t.Errorf("literal(%v) = %s, want an error", v, lit)
		}
	}
}

// celTypeOfJSON is the CEL type literal's output must have for v: maps of string keys and
// lists, both of dyn whatever their content, and the scalar's own type otherwise.
func celTypeOfJSON(t testing.TB, v any) *cel.Type {
	t.Helper()
	switch j := jsonOf(t, v).(type) {
	case nil:
		return cel.NullType
	case bool:
		return cel.BoolType
	case int64:
		return cel.IntType
	case string:
		return cel.StringType
	case []any:
		return cel.ListType(cel.DynType)
	case map[string]any:
		if len(j) == 0 {
			return cel.MapType(cel.DynType, cel.DynType) // {} has no key to type
		}
		return cel.MapType(cel.StringType, cel.DynType)
	default:
		t.Fatalf("unexpected JSON value %T", j)
		return nil
	}
}

// jsonOf is v's JSON decoded, with integers as int64 so that nothing is rounded.
func jsonOf(t testing.TB, v any) any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encoding %T: %v", v, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		t.Fatalf("decoding %T's JSON: %v", v, err)
	}
	var walk func(any) any
	walk = func(v any) any {
		switch v := v.(type) {
		case json.Number:
			n, err := v.Int64()
			if err != nil {
				t.Fatalf("JSON number %s is not an int64: %v", v, err)
			}
			return n
		case []any:
			for i := range v {
				v[i] = walk(v[i])
			}
		case map[string]any:
			for k := range v {
				v[k] = walk(v[k])
			}
		}
		return v
	}
	return walk(tree)
}

// celJSON is a CEL value as the JSON tree jsonOf returns. Only JSON's types are accepted: a
// double or a bytes value where the JSON has an int or a string is a difference.
func celJSON(t testing.TB, v ref.Val) any {
	t.Helper()
	switch v := v.(type) {
	case types.Null:
		return nil
	case types.Bool:
		return bool(v)
	case types.Int:
		return int64(v)
	case types.String:
		return string(v)
	case traits.Mapper:
		out := map[string]any{}
		for it := v.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			key, ok := k.(types.String)
			if !ok {
				t.Fatalf("map key %v is a %s, want a string", k, k.Type())
			}
			out[string(key)] = celJSON(t, v.Get(k))
		}
		return out
	case traits.Lister:
		size, ok := v.Size().(types.Int)
		if !ok {
			t.Fatalf("list size is %v", v.Size())
		}
		out := make([]any, 0, int(size))
		for i := types.Int(0); i < size; i++ {
			out = append(out, celJSON(t, v.Get(i)))
		}
		return out
	}
	t.Fatalf("CEL value %v has type %s, which JSON does not have", v, v.Type())
	return nil
}

// fullContainer sets most of a container's kinds of fields: scalars of every JSON type,
// quantities, int-or-strings, nested lists of objects and optional pointers.
func fullContainer() *corev1.Container {
	return &corev1.Container{
		Name:       "log-agent",
		Image:      "fluent/fluent-bit:3.2.4@sha256:4c5ae3d8e1b2f0a9c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4",
		Command:    []string{"/bin/sh", "-c"},
		Args:       append([]string{"--config=/etc/fluent-bit/fluent-bit.conf"}, trickyStrings...),
		WorkingDir: "/var/log",
		Ports: []corev1.ContainerPort{
			{Name: "metrics", ContainerPort: 2020, Protocol: corev1.ProtocolTCP},
			{Name: "syslog", ContainerPort: 5140, HostPort: 5140, HostIP: "127.0.0.1", Protocol: corev1.ProtocolUDP},
		},
		EnvFrom: []corev1.EnvFromSource{{Prefix: "FB_", ConfigMapRef: &corev1.ConfigMapEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "fluent-bit-env"}, Optional: ptr.To(true)}}},
		Env: []corev1.EnvVar{
			{Name: "LOG_LEVEL", Value: "info"},
			{Name: "MOTD", Value: "line\n\t\"quoted\" \\ ${HOME} $(LOG_LEVEL) \u2028"},
			{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
			{Name: "MEM_LIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{
				ContainerName: "log-agent", Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
			{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "fb"}, Key: "token", Optional: ptr.To(false)}}},
		},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi"), "example.com/device": resource.MustParse("1")},
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "logs", MountPath: "/var/log", ReadOnly: true, SubPath: "app", MountPropagation: ptr.To(corev1.MountPropagationHostToContainer)},
		},
		LivenessProbe: &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/api/v1/health", Port: intstr.FromString("metrics"), HTTPHeaders: []corev1.HTTPHeader{{Name: "X-Probe", Value: "1"}}}},
			InitialDelaySeconds: 10, PeriodSeconds: 5, FailureThreshold: 3, TerminationGracePeriodSeconds: ptr.To[int64](30),
		},
		ReadinessProbe:           &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(2020)}}},
		StartupProbe:             &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/ready"}}}},
		Lifecycle:                &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		ImagePullPolicy:          corev1.PullIfNotPresent,
		SecurityContext: &corev1.SecurityContext{
			RunAsUser: ptr.To[int64](65532), RunAsNonRoot: ptr.To(true), ReadOnlyRootFilesystem: ptr.To(true),
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_BIND_SERVICE"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
}

// fullVolumes are volumes of most sources, projected and ephemeral ones included.
func fullVolumes() []corev1.Volume {
	return []corev1.Volume{
		{Name: "logs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("64Mi"))}}},
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "fluent-bit"}, DefaultMode: ptr.To[int32](0o644),
			Items: []corev1.KeyToPath{{Key: "fluent-bit.conf", Path: "fluent-bit.conf", Mode: ptr.To[int32](0o400)}}}}},
		{Name: "certs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "certs", Optional: ptr.To(true)}}},
		{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: ptr.To[int32](0o444),
			Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "vault", ExpirationSeconds: ptr.To[int64](3600), Path: "token"}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
					Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
					{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
					{Path: "cpu", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "app", Resource: "limits.cpu", Divisor: resource.MustParse("1m")}},
				}}},
			},
		}}},
		{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log", Type: ptr.To(corev1.HostPathDirectory)}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"type": "scratch"}},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}}}},
	}
}
