package policy_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/policy"
	"github.com/sidecarset/sidecarset-operator/internal/policy/policytest"
)

// TestRecordEncodesPullSecretNames runs the policy, with the API server's code, on a pod that
// lacks every pull secret the set lists, and compares the record it writes (the status
// annotation) with the engine's for the same pod, byte for byte. Names holding JSON's special
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
	for _, tt := range tests {
		for _, lazy := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/lazy=%t", tt.name, lazy), func(t *testing.T) {
				set := plainSet("plain")
				set.Spec.ImagePullSecrets = nil
				for _, n := range tt.secrets {
					set.Spec.ImagePullSecrets = append(set.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: n})
				}
				pod := recordPod(set)
				want := engineRecord(t, set, pod)
				opts := testOptions
				opts.LazyPod = lazy
				c, err := policy.Compile(set, nil, nil, opts)
				if err != nil {
					t.Fatal(err)
				}
				// The pod has no pull secrets: the policy adds (and records) every one the set lists.
				p, err := policytest.Compile(c.Policy)
				if err != nil {
					t.Fatal(err)
				}
				ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pod.Namespace, Labels: map[string]string{corev1.LabelMetadataName: pod.Namespace}}}
				out, err := p.Mutate(t.Context(), pod, ns)
				if err != nil {
					t.Fatalf("the API server refuses the pod: %v", err)
				}
				if got := out.Annotations[appsv1alpha1.StatusAnnotation]; got != want {
					t.Errorf("the policy records\n  %s\nthe engine records\n  %s", got, want)
				}
			})
		}
	}
}

// recordPod is a pod of set's that has no pull secrets.
func recordPod(set *appsv1alpha1.SidecarSet) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pod"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	pod.Labels = map[string]string{appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue}
	for k, v := range set.Spec.Selector.MatchLabels {
		pod.Labels[k] = v
	}
	return pod
}

// engineRecord is the status annotation the engine writes into pod, of set's.
func engineRecord(t testing.TB, set *appsv1alpha1.SidecarSet, pod *corev1.Pod) string {
	t.Helper()
	compiled, err := inject.Compile(set)
	if err != nil {
		t.Fatalf("compiling %s: %v", set.Name, err)
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
