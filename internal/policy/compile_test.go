package policy_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/policy"
	"github.com/sidecarset/sidecarset-operator/internal/revision"
	"github.com/sidecarset/sidecarset-operator/test/builders"
)

// plainSet is a SidecarSet a policy injects by itself: one sidecar, one volume it mounts, one
// pull secret. Tests change a copy of it.
func plainSet(name string) *appsv1alpha1.SidecarSet {
	return builders.SidecarSet(name, builders.Selecting(name),
		builders.WithContainers(corev1.Container{
			Name:         name,
			Image:        "example.com/" + name + ":1",
			Ports:        []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9102}},
			VolumeMounts: []corev1.VolumeMount{{Name: name + "-config", MountPath: "/etc/" + name}},
		}),
		builders.WithVolumes(corev1.Volume{Name: name + "-config", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}),
		builders.WithPullSecrets("regcred"))
}

var testOptions = policy.Options{Scope: inject.Scope{OperatorNamespace: "sidecarset-system"}}

// transfersOf is n transferEnv entries, VAR_0 to VAR_n-1 from the container app.
func transfersOf(n int) []appsv1alpha1.TransferEnvVar {
	out := make([]appsv1alpha1.TransferEnvVar, n)
	for i := range out {
		out[i] = appsv1alpha1.TransferEnvVar{SourceContainerName: "app", EnvName: fmt.Sprintf("VAR_%d", i)}
	}
	return out
}

// TestCompileUnsupported checks which sets a policy cannot inject as the engine does: they
// stay on the webhook (every pod they select is routed), and Unsupported names the field.
func TestCompileUnsupported(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*appsv1alpha1.SidecarSetSpec)
		// field is Unsupported.Field, "" for a set the policy injects itself.
		field string
	}{
		{name: "plain", modify: func(*appsv1alpha1.SidecarSetSpec) {}},
		// Patched annotations stay on the webhook, which knows the operator's allow-list.
		{name: "patchPodMetadata", field: "spec.patchPodMetadata", modify: func(s *appsv1alpha1.SidecarSetSpec) {
			s.PatchPodMetadata = []appsv1alpha1.PatchPodMetadata{{Annotations: map[string]string{"prometheus.io/scrape": "true"}}}
		}},
		// A policy cannot draw a pod between a pinned revision and the current spec.
		{name: "revision policy Partial", field: "spec.injectionStrategy.revision.policy", modify: func(s *appsv1alpha1.SidecarSetSpec) {
			s.InjectionStrategy.Revision = &appsv1alpha1.RevisionRef{Name: "agent-0123", Policy: appsv1alpha1.RevisionPolicyPartial}
		}},
		// Per-pod overrides stay on the webhook, which checks the values with the set's rules.
		{name: "overrides", field: "spec.overrides", modify: func(s *appsv1alpha1.SidecarSetSpec) {
			s.Overrides = []appsv1alpha1.Override{{Annotation: "proxy.example.com/cpu", Container: s.Containers[0].Name,
				Field: appsv1alpha1.OverrideRequestsCPU}}
		}},
		// A sidecar's computed resources stay on the webhook, which evaluates the expressions.
		{name: "resourcesPolicy", field: "spec.containers[0].resourcesPolicy", modify: func(s *appsv1alpha1.SidecarSetSpec) {
			s.Containers[0].Resources = corev1.ResourceRequirements{}
			s.Containers[0].ResourcesPolicy = &appsv1alpha1.ResourcesPolicy{ResourcesExpr: appsv1alpha1.ResourcesExpr{
				Limits: map[corev1.ResourceName]appsv1alpha1.ResourceExpression{corev1.ResourceCPU: "cpu * 0.5"}}}
		}},
		// transferEnv is copied in CEL where the engine copies the app's variable unchanged
		// (the policy routes the other pods to the webhook), up to MaxTransfers entries.
		{name: "transferEnv", modify: func(s *appsv1alpha1.SidecarSetSpec) {
			s.Containers[0].TransferEnv = []appsv1alpha1.TransferEnvVar{{SourceContainerName: "app", EnvName: "LOG_LEVEL"}}
		}},
		{name: "init container transferEnv", modify: func(s *appsv1alpha1.SidecarSetSpec) {
			s.InitContainers = []appsv1alpha1.SidecarContainer{{
				Container:   corev1.Container{Name: "init", Image: "busybox"},
				TransferEnv: []appsv1alpha1.TransferEnvVar{{SourceContainerName: "app", EnvName: "LOG_LEVEL"}},
			}}
		}},
		{name: "transferEnv at the limit", modify: func(s *appsv1alpha1.SidecarSetSpec) {
			s.InitContainers = []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "init", Image: "busybox"},
				TransferEnv: transfersOf(policy.MaxTransfers / 2)}}
			s.Containers[0].TransferEnv = transfersOf(policy.MaxTransfers - policy.MaxTransfers/2)
		}},
		{name: "transferEnv over the limit", field: "spec.containers[0].transferEnv", modify: func(s *appsv1alpha1.SidecarSetSpec) {
			s.InitContainers = []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "init", Image: "busybox"},
				TransferEnv: transfersOf(policy.MaxTransfers / 2)}}
			s.Containers[0].TransferEnv = transfersOf(policy.MaxTransfers - policy.MaxTransfers/2 + 1)
		}},
		// Names read from the pod and several names in one entry are copied alike; the limit
		// counts variables, not entries.
		{name: "transferEnv sourceContainerNameFrom and envNames", modify: func(s *appsv1alpha1.SidecarSetSpec) {
			s.Containers[0].TransferEnv = []appsv1alpha1.TransferEnvVar{{EnvNames: []string{"LOG_LEVEL", "REGION"},
				SourceContainerNameFrom: &appsv1alpha1.SourceContainerNameSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['main']"}}}}
		}},
		{name: "transferEnv envNames over the limit", field: "spec.containers[0].transferEnv", modify: func(s *appsv1alpha1.SidecarSetSpec) {
			names := make([]string, policy.MaxTransfers)
			for i := range names {
				names[i] = fmt.Sprintf("VAR_%d", i)
			}
			s.Containers[0].TransferEnv = []appsv1alpha1.TransferEnvVar{{SourceContainerName: "app", EnvName: "LOG_LEVEL"},
				{SourceContainerName: "app", EnvNames: names}}
		}},
		// shareVolumeDevicePolicy: the policy copies the app's devices where the engine copies
		// them unchanged, and routes the other pods.
		{name: "shareVolumeDevicePolicy enabled", modify: func(s *appsv1alpha1.SidecarSetSpec) {
			s.Containers[0].ShareVolumeDevicePolicy = &appsv1alpha1.ShareVolumePolicy{Type: appsv1alpha1.ShareVolumePolicyEnabled}
		}},
		// shareVolumePolicy too: the policy copies the app's mounts where the engine copies them
		// unchanged, and routes the other pods.
		{name: "shareVolumePolicy enabled", modify: func(s *appsv1alpha1.SidecarSetSpec) {
			s.Containers = append(s.Containers, appsv1alpha1.SidecarContainer{
				Container:         corev1.Container{Name: "log-agent", Image: "fluent-bit"},
				ShareVolumePolicy: appsv1alpha1.ShareVolumePolicy{Type: appsv1alpha1.ShareVolumePolicyEnabled},
			})
		}},
		{name: "shareVolumePolicy disabled", modify: func(s *appsv1alpha1.SidecarSetSpec) {
			s.Containers[0].ShareVolumePolicy.Type = appsv1alpha1.ShareVolumePolicyDisabled
		}},
		// A host port: the policy routes the pods whose own containers bind one.
		{name: "container hostPort", modify: func(s *appsv1alpha1.SidecarSetSpec) {
			s.Containers[0].Ports = append(s.Containers[0].Ports, corev1.ContainerPort{Name: "syslog", ContainerPort: 5140, HostPort: 5140})
		}},
		{name: "two containers binding one host port", field: "spec.containers[1].ports[0].hostPort", modify: func(s *appsv1alpha1.SidecarSetSpec) {
			s.Containers[0].Ports = append(s.Containers[0].Ports, corev1.ContainerPort{Name: "syslog", ContainerPort: 5140, HostPort: 5140})
			s.Containers = append(s.Containers, appsv1alpha1.SidecarContainer{Container: corev1.Container{Name: "relay", Image: "relay",
				Ports: []corev1.ContainerPort{{ContainerPort: 6000, HostPort: 5140, Protocol: corev1.ProtocolTCP}}}})
		}},
		{name: "one host port on two protocols", modify: func(s *appsv1alpha1.SidecarSetSpec) {
			s.Containers[0].Ports = append(s.Containers[0].Ports, corev1.ContainerPort{Name: "syslog", ContainerPort: 5140, HostPort: 5140})
			s.Containers = append(s.Containers, appsv1alpha1.SidecarContainer{Container: corev1.Container{Name: "relay", Image: "relay",
				Ports: []corev1.ContainerPort{{ContainerPort: 6000, HostPort: 5140, Protocol: corev1.ProtocolUDP}}}})
		}},
		// A container port (number and protocol) two of the set's sidecars running alongside
		// the app declare: the engine refuses every pod.
		{name: "two sidecars declaring one container port", field: "spec.containers[0].ports[0].containerPort", modify: func(s *appsv1alpha1.SidecarSetSpec) {
			s.InitContainers = []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "proxy", Image: "envoy",
				RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Ports: []corev1.ContainerPort{{ContainerPort: 9090, Protocol: corev1.ProtocolTCP}}}}}
			s.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 9090}}
		}},
		{name: "one container port on two protocols", modify: func(s *appsv1alpha1.SidecarSetSpec) {
			s.InitContainers = []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "proxy", Image: "envoy",
				RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Ports: []corev1.ContainerPort{{ContainerPort: 9090, Protocol: corev1.ProtocolUDP}}}}}
			s.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 9090}}
		}},
		{name: "a plain init container's port", modify: func(s *appsv1alpha1.SidecarSetSpec) {
			s.InitContainers = []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "init", Image: "busybox",
				Ports: []corev1.ContainerPort{{ContainerPort: 9090}}}}}
			s.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 9090}}
		}},
		{name: "init container hostPort", modify: func(s *appsv1alpha1.SidecarSetSpec) {
			// Init containers run one at a time: the engine does not compare their host ports.
			s.InitContainers = []appsv1alpha1.SidecarContainer{{Container: corev1.Container{
				Name: "init", Image: "busybox", Ports: []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 8080}},
			}}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := plainSet("plain")
			tt.modify(&set.Spec)
			compiled := mustCompile(t, set, nil)
			got := ""
			if compiled.Unsupported != nil {
				got = compiled.Unsupported.Field
				if compiled.Unsupported.Reason == "" {
					t.Errorf("Unsupported %s gives no reason", got)
				}
			}
			if got != tt.field {
				t.Fatalf("Unsupported is %v, want field %q", compiled.Unsupported, tt.field)
			}
			if check := policy.Check(set); (check == nil) != (tt.field == "") || check != nil && *check != *compiled.Unsupported {
				t.Errorf("Check gives %v, Compile %v", check, compiled.Unsupported)
			}
			if injects := mutationInjects(t, compiled); injects != (tt.field == "") {
				t.Errorf("the mutation injects: %t, want %t:\n%s", injects, tt.field == "", mutation(t, compiled))
			}
		})
	}
}

// TestCompilePinnedRevision: a set that pins a stored revision (by name or custom version) is
// compiled from that revision's content, records its hash and injects its image; its own
// revision is found among other sets'; while the revision is not stored, every pod goes to the
// webhook, which injects the current spec and warns.
func TestCompilePinnedRevision(t *testing.T) {
	old := plainSet("plain")
	old.Spec.Containers[0].Image = "registry.example/agent:1.0"
	oldHash := inject.Hash(&old.Spec)
	stored := func(set, hash, version string, number int64, spec *appsv1alpha1.SidecarSetSpec) *appsv1.ControllerRevision {
		return &appsv1.ControllerRevision{
			ObjectMeta: metav1.ObjectMeta{Name: revision.Name(set, hash), Labels: map[string]string{
				appsv1alpha1.RevisionSetLabel: set, appsv1alpha1.CustomVersionLabel: version}},
			Data: runtime.RawExtension{Raw: inject.Content(spec)}, Revision: number}
	}
	other := plainSet("other")
	other.Spec.Containers[0].Image = "registry.example/agent:0.1"
	revs := []*appsv1.ControllerRevision{
		stored("plain", oldHash, "v1", 1, &old.Spec),
		// Another set's revision with the same custom version, newer: not plain's.
		stored("other", inject.Hash(&other.Spec), "v1", 7, &other.Spec),
	}
	for _, tt := range []struct {
		name     string
		ref      appsv1alpha1.RevisionRef
		revs     []*appsv1.ControllerRevision
		unstored bool
	}{
		{name: "by name", ref: appsv1alpha1.RevisionRef{Name: revision.Name("plain", oldHash)}, revs: revs},
		{name: "by custom version", ref: appsv1alpha1.RevisionRef{CustomVersion: "v1"}, revs: revs},
		{name: "not stored", ref: appsv1alpha1.RevisionRef{CustomVersion: "v1"}, revs: revs[1:], unstored: true},
		{name: "no revisions", ref: appsv1alpha1.RevisionRef{Name: revision.Name("plain", oldHash)}, unstored: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			set := plainSet("plain")
			set.Spec.Containers[0].Image = "registry.example/agent:2.0"
			set.Spec.InjectionStrategy.Revision = &tt.ref
			compiled, err := policy.Compile(set, nil, tt.revs, testOptions)
			if err != nil {
				t.Fatal(err)
			}
			if tt.unstored {
				if u := compiled.Unsupported; u == nil || u.Field != "spec.injectionStrategy.revision" || !strings.Contains(u.Reason, "not stored") {
					t.Fatalf("Unsupported is %v, want the pinned revision not stored", u)
				}
				if mutationInjects(t, compiled) {
					t.Errorf("the mutation injects while the pinned revision is not stored:\n%s", mutation(t, compiled))
				}
				return
			}
			if compiled.Unsupported != nil {
				t.Fatalf("Unsupported: %v", compiled.Unsupported)
			}
			if compiled.Hash != oldHash {
				t.Errorf("hash %s, want the pinned revision's %s (the current spec's is %s)", compiled.Hash, oldHash, inject.Hash(&set.Spec))
			}
			m := mutation(t, compiled)
			if !strings.Contains(m, "registry.example/agent:1.0") || strings.Contains(m, "registry.example/agent:2.0") {
				t.Errorf("the mutation does not inject the pinned image 1.0 alone:\n%s", m)
			}
		})
	}
}

// TestCompilePausedNeverInjects checks that a paused set's policy adds nothing: it only routes
// pods that carry a record, whose sidecars the webhook keeps. The same set unpaused injects,
// so the check below can tell the two apart.
func TestCompilePausedNeverInjects(t *testing.T) {
	set := plainSet("plain")
	set.Spec.InitContainers = []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "init", Image: "busybox"}}}
	if !mutationInjects(t, mustCompile(t, set, nil)) {
		t.Fatalf("the unpaused set's mutation does not inject:\n%s", mutation(t, mustCompile(t, set, nil)))
	}
	set.Spec.InjectionStrategy.Paused = true
	compiled := mustCompile(t, set, nil)
	if compiled.Unsupported != nil {
		t.Errorf("pausing made the set unsupported: %v", compiled.Unsupported)
	}
	if mutationInjects(t, compiled) {
		t.Errorf("the paused set's mutation injects:\n%s", mutation(t, compiled))
	}
	if m := mutation(t, compiled); !strings.Contains(m, appsv1alpha1.WebhookRouteAnnotation) {
		t.Errorf("the paused set's mutation never routes a pod to the webhook:\n%s", m)
	}
}

// TestCompileRoutedNeverInjects: a set compiled to route its pods (one stopped by a conflict)
// adds nothing to any pod and says why; paused or not, the policy routes every pod it selects.
func TestCompileRoutedNeverInjects(t *testing.T) {
	for _, paused := range []bool{false, true} {
		set := plainSet("plain")
		set.Spec.InjectionStrategy.Paused = paused
		why := policy.Stopped("older")
		// No operator namespace: no probe branch in front of the mutation.
		compiled, err := policy.CompileRouted(set, nil, nil, policy.Options{}, why)
		if err != nil {
			t.Fatalf("CompileRouted: %v", err)
		}
		if compiled.Unsupported != why {
			t.Errorf("paused %t: Unsupported is %v, want %v", paused, compiled.Unsupported, why)
		}
		if mutationInjects(t, compiled) {
			t.Errorf("paused %t: the routed set's mutation injects:\n%s", paused, mutation(t, compiled))
		}
		if m := mutation(t, compiled); m != routeOnly(t) {
			t.Errorf("paused %t: the mutation does not route every pod:\n%s", paused, m)
		}
	}
}

// routeOnly is the patch of a policy that routes every pod: that of a set Check refuses.
func routeOnly(t testing.TB) string {
	t.Helper()
	set := plainSet("plain")
	set.Spec.Containers[0].TransferEnv = transfersOf(policy.MaxTransfers + 1)
	compiled, err := policy.Compile(set, nil, nil, policy.Options{})
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return mutation(t, compiled)
}

// TestCompileOthers checks the routing of pods other sets select: a pod another set selects
// goes to the webhook, so with no other set (the set itself and sets without a selector do not
// count) the mutation is that of a set alone, and with one it names that set's labels.
func TestCompileOthers(t *testing.T) {
	unselective := plainSet("no-selector")
	unselective.Spec.Selector = nil
	tests := []struct {
		name   string
		others []*appsv1alpha1.SidecarSet
		// want is "false" when no other set selects any pod (the mutation is that of a set
		// alone), or "" when the mutation routes the pods labelled as wantLabel.
		want      string
		wantLabel string
	}{
		{name: "no others", others: nil, want: "false"},
		{name: "only itself", others: []*appsv1alpha1.SidecarSet{plainSet("plain")}, want: "false"},
		{name: "other without selector", others: []*appsv1alpha1.SidecarSet{plainSet("plain"), unselective}, want: "false"},
		{name: "another set", others: []*appsv1alpha1.SidecarSet{plainSet("plain"), plainSet("other")}, wantLabel: `"other"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mutation(t, mustCompile(t, plainSet("plain"), tt.others))
			switch {
			case tt.want == "false" && got != mutation(t, mustCompile(t, plainSet("plain"), nil)):
				t.Errorf("the mutation is not that of a set alone, so another set selects some pods:\n%s", got)
			case tt.want == "" && (!readsLabels(got) || !strings.Contains(got, tt.wantLabel)):
				t.Errorf("the mutation does not route pods labelled as %s:\n%s", tt.wantLabel, got)
			}
		})
	}
}

// readsLabels reports whether a mutation reads the pod's or its namespace's labels: only
// another set's selectors do.
func readsLabels(mutation string) bool {
	return strings.Contains(mutation, "object.metadata.labels")
}

// TestCompileOthersOrder checks that the order in which the others come (a cache list's,
// unspecified) does not change the policy: the reconciler rewrites a policy whose rendering
// changed, so an order-dependent one would be rewritten forever. The golden cases have at most
// one other set, too few to tell.
func TestCompileOthersOrder(t *testing.T) {
	a, b, c := plainSet("a"), plainSet("b"), plainSet("c")
	sorted := mustCompile(t, a, []*appsv1alpha1.SidecarSet{a, b, c}).Policy
	reversed := mustCompile(t, a, []*appsv1alpha1.SidecarSet{c, b, a}).Policy
	if !readsLabels(sorted.Spec.Mutations[0].JSONPatch.Expression) {
		t.Fatalf("the policy does not route the pods the others select:\n%s", sorted.Spec.Mutations[0].JSONPatch.Expression)
	}
	if diff := cmp.Diff(sorted, reversed); diff != "" {
		t.Errorf("the policy depends on the order of the others (-sorted +reversed):\n%s", diff)
	}
}

// TestCompileRefuses checks the sets Compile refuses to render, as the engine refuses to
// inject with them (sets written while validation was down): no selector or an empty one (the
// binding would select every pod), selectors metav1 cannot parse.
func TestCompileRefuses(t *testing.T) {
	badOperator := []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Matches", Values: []string{"x"}}}
	noValues := []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn}}
	withSelector := func(sel, ns *metav1.LabelSelector) func() *appsv1alpha1.SidecarSet {
		return func() *appsv1alpha1.SidecarSet {
			s := plainSet("plain")
			s.Spec.Selector, s.Spec.NamespaceSelector = sel, ns
			return s
		}
	}
	tests := []struct {
		name   string
		set    func() *appsv1alpha1.SidecarSet
		others func() []*appsv1alpha1.SidecarSet
	}{
		{name: "nil selector", set: withSelector(nil, nil)},
		{name: "empty selector", set: withSelector(&metav1.LabelSelector{}, nil)},
		{name: "unknown operator", set: withSelector(&metav1.LabelSelector{MatchExpressions: badOperator}, nil)},
		{name: "In without values", set: withSelector(&metav1.LabelSelector{MatchExpressions: noValues}, nil)},
		{name: "namespaceSelector operator", set: withSelector(&metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
			&metav1.LabelSelector{MatchExpressions: badOperator})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, others := plainSet("plain"), []*appsv1alpha1.SidecarSet(nil)
			if tt.set != nil {
				set = tt.set()
			}
			if tt.others != nil {
				others = tt.others()
			}
			if compiled, err := policy.Compile(set, others, nil, testOptions); err == nil {
				t.Errorf("Compile rendered %s, want an error", compiled.Policy.Name)
			}
		})
	}
}

func mustCompile(t testing.TB, set *appsv1alpha1.SidecarSet, others []*appsv1alpha1.SidecarSet) *policy.Compiled {
	t.Helper()
	compiled, err := policy.Compile(set, others, nil, testOptions)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return compiled
}

// mutation is the policy's one JSONPatch expression.
func mutation(t testing.TB, c *policy.Compiled) string {
	t.Helper()
	ms := c.Policy.Spec.Mutations
	if len(ms) != 1 || ms[0].JSONPatch == nil {
		t.Fatalf("the policy has %d mutations, want one JSONPatch", len(ms))
	}
	return ms[0].JSONPatch.Expression
}

// mutationInjects reports whether the mutation may add anything to the pod's spec: every
// injecting patch operation has a path under /spec/ (containers, init containers, volumes,
// pull secrets); routing only adds an annotation.
func mutationInjects(t testing.TB, c *policy.Compiled) bool {
	t.Helper()
	m := mutation(t, c)
	return strings.Contains(m, `"/spec/containers`) || strings.Contains(m, `"/spec/initContainers`) ||
		strings.Contains(m, `"/spec/volumes`) || strings.Contains(m, `"/spec/imagePullSecrets`)
}

// TestCompileIgnoresInvalidOthers: another set the engine cannot use (its selector refused)
// selects nothing, as in the engine, rather than stopping this set's policy.
func TestCompileIgnoresInvalidOthers(t *testing.T) {
	bad := plainSet("other")
	bad.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Matches", Values: []string{"x"}}}
	emptyNS := plainSet("other-ns")
	emptyNS.Spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpIn}}}
	compiled, err := policy.Compile(plainSet("plain"), []*appsv1alpha1.SidecarSet{bad, emptyNS}, nil, testOptions)
	if err != nil {
		t.Fatalf("an invalid other set stopped the policy: %v", err)
	}
	if m := mutation(t, compiled); readsLabels(m) {
		t.Errorf("invalid other sets select pods:\n%s", m)
	}
}
