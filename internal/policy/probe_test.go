package policy_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/policy"
)

// TestCompileProbe: with an operator namespace, each policy gets a probe binding for probe pods
// of that namespace with the probe key, and answers them with its digest; the set's own binding
// leaves that namespace out. The key changes with the policy and with the set's binding, and
// only then.
func TestCompileProbe(t *testing.T) {
	set := plainSet("plain")
	c := mustCompile(t, set, nil)
	if c.Probe == nil || c.Digest == "" || c.ProbeKey == "" {
		t.Fatalf("no probe: binding %v, digest %q, key %q", c.Probe, c.Digest, c.ProbeKey)
	}
	if c.Probe.Name != policy.ProbeName(set.Name) || c.Probe.Spec.PolicyName != c.Policy.Name {
		t.Errorf("probe binding %s binds %s, want %s binding %s", c.Probe.Name, c.Probe.Spec.PolicyName, policy.ProbeName(set.Name), c.Policy.Name)
	}
	match := c.Probe.Spec.MatchResources
	if got := match.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"]; got != testOptions.OperatorNamespace {
		t.Errorf("the probe binding selects namespace %q, want the operator's", got)
	}
	if got := match.ObjectSelector.MatchLabels[policy.ProbeLabel]; got != c.ProbeKey {
		t.Errorf("the probe binding selects probe key %q, want %q", got, c.ProbeKey)
	}
	if m := mutation(t, c); !strings.HasPrefix(m, `request.namespace == "`+testOptions.OperatorNamespace+`" ?`) || !strings.Contains(m, `"`+c.Digest+`"`) {
		t.Errorf("the mutation does not answer probe pods with the digest %s first:\n%s", c.Digest, m)
	}
	if !excludes(c.Binding.Spec.MatchResources.NamespaceSelector, testOptions.OperatorNamespace) {
		t.Errorf("the set's binding does not leave the operator's namespace out: %v", c.Binding.Spec.MatchResources.NamespaceSelector)
	}
	pod := policy.ProbePod(testOptions.OperatorNamespace, c.ProbeKey)
	if pod.Namespace != testOptions.OperatorNamespace || pod.Labels[policy.ProbeLabel] != c.ProbeKey ||
		pod.Labels[appsv1alpha1.InjectLabel] != appsv1alpha1.InjectLabelValue {
		t.Errorf("probe pod in %s with labels %v", pod.Namespace, pod.Labels)
	}

	if again := mustCompile(t, plainSet("plain"), nil); again.ProbeKey != c.ProbeKey || again.Digest != c.Digest {
		t.Errorf("the same set gives another key or digest: %s/%s, then %s/%s", c.ProbeKey, c.Digest, again.ProbeKey, again.Digest)
	}
	image := plainSet("plain")
	image.Spec.Containers[0].Image = "example.com/plain:2"
	if other := mustCompile(t, image, nil); other.ProbeKey == c.ProbeKey || other.Digest == c.Digest {
		t.Errorf("a new image keeps the probe key %s or the digest %s", c.ProbeKey, c.Digest)
	}
	selector := plainSet("plain")
	selector.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	if other := mustCompile(t, selector, nil); other.ProbeKey == c.ProbeKey {
		t.Errorf("a new namespaceSelector keeps the probe key %s", c.ProbeKey)
	}

	none, err := policy.Compile(set, nil, nil, policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if none.Probe != nil || none.Digest != "" || strings.Contains(mutation(t, none), "request.namespace") {
		t.Errorf("without an operator namespace there is a probe: %v %q", none.Probe, none.Digest)
	}
}

// excludes reports whether sel has a NotIn requirement on the namespace name listing ns.
func excludes(sel *metav1.LabelSelector, ns string) bool {
	for _, r := range sel.MatchExpressions {
		if r.Key == "kubernetes.io/metadata.name" && r.Operator == metav1.LabelSelectorOpNotIn {
			for _, v := range r.Values {
				if v == ns {
					return true
				}
			}
		}
	}
	return false
}

// TestProbeNamesNeverCollide: a probe binding's name is never the name of a set's binding,
// whatever the two sets are called.
func TestProbeNamesNeverCollide(t *testing.T) {
	for _, a := range []string{"x", "probe", "probe.x", "sidecarset-x", "a.b"} {
		for _, b := range []string{"x", "probe", "probe.x", "probe.sidecarset-x", "sidecarset-x"} {
			if policy.ProbeName(a) == policy.Name(b) {
				t.Errorf("ProbeName(%q) == Name(%q) == %s", a, b, policy.Name(b))
			}
		}
	}
}
