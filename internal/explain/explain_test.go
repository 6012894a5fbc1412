package explain

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/revision"
	"github.com/sidecarset/sidecarset-operator/internal/snapshot"
)

func agentSet(image string, strategy appsv1alpha1.UpdateStrategyType) *appsv1alpha1.SidecarSet {
	return &appsv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Generation: 1},
		Spec: appsv1alpha1.SidecarSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Containers:     []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "agent", Image: image}}},
			UpdateStrategy: appsv1alpha1.UpdateStrategy{Type: strategy},
		},
	}
}

func snapshotOf(t *testing.T, set *appsv1alpha1.SidecarSet) *snapshot.Snapshot {
	t.Helper()
	store := snapshot.NewStore()
	store.Upsert(set)
	return store.Load()
}

// injectedPod is a pod the set injected, as the webhook left it.
func injectedPod(t *testing.T, set *appsv1alpha1.SidecarSet) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "shop", Labels: map[string]string{"app": "web", appsv1alpha1.InjectLabel: "true"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/web:1"}}},
	}
	c, err := inject.Compile(set)
	if err != nil {
		t.Fatal(err)
	}
	res, err := inject.Apply(inject.Input{Pod: pod, Sets: []*inject.CompiledSet{c}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Pod()
}

// TestSidecarsOfExistingPods: for a pod that exists, the set's verdict says whether its
// sidecars are current and, when not, what keeps them outdated.
func TestSidecarsOfExistingPods(t *testing.T) {
	v1Rolling := agentSet("registry.example/agent:1.0", appsv1alpha1.RollingUpdate)
	edited := injectedPod(t, v1Rolling)
	edited.Spec.Containers[1].Image = "registry.example/agent:hotfix"
	notInjected := injectedPod(t, v1Rolling)
	delete(notInjected.Annotations, appsv1alpha1.StatusAnnotation)
	notInjected.Spec.Containers = notInjected.Spec.Containers[:1]

	evicting := func(set *appsv1alpha1.SidecarSet) *appsv1alpha1.SidecarSet {
		set.Spec.UpdateStrategy.Recreate, set.Spec.UpdateStrategy.Remediate = appsv1alpha1.RecreateEvict, appsv1alpha1.RecreateEvict
		return set
	}
	envChanged := evicting(agentSet("registry.example/agent:1.0", appsv1alpha1.RollingUpdate))
	envChanged.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "LEVEL", Value: "debug"}}
	owned := func(pod *corev1.Pod) *corev1.Pod {
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d8f", UID: "rs-1", Controller: ptr.To(true)}}
		return pod
	}

	for _, tc := range []struct {
		name     string
		set      *appsv1alpha1.SidecarSet
		pod      *corev1.Pod
		injected *appsv1alpha1.SidecarSet // the revision the pod was injected at, when known
		want     []string
	}{
		{"current", v1Rolling, injectedPod(t, v1Rolling), nil, []string{"current (hash " + inject.Hash(&v1Rolling.Spec) + ")"}},
		{"outdated, NotUpdate", agentSet("registry.example/agent:2.0", appsv1alpha1.NotUpdate), injectedPod(t, v1Rolling), nil,
			[]string{"outdated", "spec.updateStrategy.type is NotUpdate", "recreate the pod"}},
		{"outdated, updatable", agentSet("registry.example/agent:2.0", appsv1alpha1.RollingUpdate), injectedPod(t, v1Rolling), nil,
			[]string{"outdated", "the rolling update will update it in place"}},
		{"outdated, edited since injection", agentSet("registry.example/agent:2.0", appsv1alpha1.RollingUpdate), edited, v1Rolling,
			[]string{"not updatable in place", "spec.containers[agent].image: changed since injection"}},
		{"not injected", v1Rolling, notInjected, nil, []string{"not injected", "recreate it to inject"}},
		{"outdated, not updatable in place, recreated by eviction", envChanged, owned(injectedPod(t, v1Rolling)), v1Rolling,
			[]string{"not updatable in place (spec.containers[agent].env: changed", "the rolling update evicts it and its ReplicaSet web-5d8f recreates it"}},
		{"outdated, not updatable in place, a bare pod", envChanged, injectedPod(t, v1Rolling), v1Rolling,
			[]string{"not updatable in place (spec.containers[agent].env", "the rolling update does not recreate it: it has no controller"}},
		{"outdated, edited, never recreated", evicting(agentSet("registry.example/agent:2.0", appsv1alpha1.RollingUpdate)), owned(edited.DeepCopy()), v1Rolling,
			[]string{"not updatable in place: spec.containers[agent].image: changed since injection"}},
		{"not injected, remediated", evicting(agentSet("registry.example/agent:1.0", appsv1alpha1.RollingUpdate)), owned(notInjected.DeepCopy()), nil,
			[]string{"not injected", "the rolling update evicts it and its ReplicaSet web-5d8f recreates it"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{}
			if tc.injected != nil {
				opts.Injected = func(*inject.CompiledSet, string) *inject.CompiledSet {
					c, err := inject.Compile(tc.injected)
					if err != nil {
						t.Fatal(err)
					}
					return c
				}
			}
			got := Explain(snapshotOf(t, tc.set), Pod{Pod: tc.pod, Existing: true}, opts)
			if len(got) != 1 || got[0].Verdict != Injects {
				t.Fatalf("explanations %+v, want one Injects", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got[0].Sidecars, w) {
					t.Errorf("sidecars %q, want it to contain %q", got[0].Sidecars, w)
				}
			}
			// A pod that does not exist yet says nothing about sidecars.
			if fresh := Explain(snapshotOf(t, tc.set), Pod{Pod: tc.pod}, opts); fresh[0].Sidecars != "" {
				t.Errorf("a pod from a file got a sidecars verdict: %q", fresh[0].Sidecars)
			}
		})
	}
}

// TestNamespaceVerdicts: the excluded namespaces and the opt-out label decide for every set.
func TestNamespaceVerdicts(t *testing.T) {
	snap := snapshotOf(t, agentSet("registry.example/agent:1.0", appsv1alpha1.NotUpdate))
	pod := injectedPod(t, agentSet("registry.example/agent:1.0", appsv1alpha1.NotUpdate))
	opts := Options{Scope: inject.Scope{OperatorNamespace: "sidecarset-system"}}
	for _, tc := range []struct {
		namespace string
		labels    map[string]string
		want      Verdict
		why       string
	}{
		{"sidecarset-system", nil, NamespaceExcluded, "never injected"},
		{"shop", map[string]string{appsv1alpha1.NamespaceInjectionLabel: appsv1alpha1.NamespaceInjectionDisabled}, NamespaceExcluded, "remove the label"},
		{"shop", nil, Injects, "selected"},
	} {
		p := pod.DeepCopy()
		p.Namespace = tc.namespace
		got := Explain(snap, Pod{Pod: p, NamespaceLabels: tc.labels}, opts)
		if len(got) != 1 || got[0].Verdict != tc.want || !strings.Contains(got[0].Why, tc.why) {
			t.Errorf("namespace %s %v: %+v, want %s (%q)", tc.namespace, tc.labels, got, tc.want, tc.why)
		}
	}
}

// TestMirrorPodVerdict: a mirror pod, which the webhook and policy mode never inject, is never
// said to be injected, whatever selects it.
func TestMirrorPodVerdict(t *testing.T) {
	snap := snapshotOf(t, agentSet("registry.example/agent:1.0", appsv1alpha1.NotUpdate))
	pod := injectedPod(t, agentSet("registry.example/agent:1.0", appsv1alpha1.NotUpdate))
	pod.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "3c9a1f2e"}
	got := Explain(snap, Pod{Pod: pod}, Options{})
	if len(got) != 1 || got[0].Verdict != MirrorPod || !strings.Contains(got[0].Why, "mirror pods are never injected") {
		t.Errorf("a mirror pod: %+v, want MirrorPod", got)
	}
}

// TestPartialRevision: for a set that pins a revision with policy Partial, the verdict names
// the content the pod gets and why, and an existing pod is compared with the current spec.
func TestPartialRevision(t *testing.T) {
	stable := agentSet("registry.example/agent:1.0", appsv1alpha1.RollingUpdate)
	c1, err := inject.Compile(stable)
	if err != nil {
		t.Fatal(err)
	}
	rev := revision.Reconcile(c1, "ops", nil, nil).Create
	current := agentSet("registry.example/agent:2.0", appsv1alpha1.RollingUpdate)
	current.Spec.InjectionStrategy.Revision = &appsv1alpha1.RevisionRef{Name: rev.Name, Policy: appsv1alpha1.RevisionPolicyPartial}
	current.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"track": "canary"}}
	store := snapshot.NewStore()
	store.UpsertRevision(rev)
	store.Upsert(current)
	opts := Options{}

	pod := injectedPod(t, stable) // the pinned revision's content, not matched by the update selector
	got := Explain(store.Load(), Pod{Pod: pod}, opts)
	if len(got) != 1 || !strings.Contains(got[0].Why, "hash "+c1.Hash) || !strings.Contains(got[0].Why, "gets the pinned revision") {
		t.Errorf("a new pod: %+v, want the pinned revision at hash %s named", got, c1.Hash)
	}
	got = Explain(store.Load(), Pod{Pod: pod, Existing: true}, opts)
	if len(got) != 1 || !strings.Contains(got[0].Why, "the pod's record names the pinned revision") ||
		!strings.Contains(got[0].Sidecars, "the set is at "+inject.Hash(&current.Spec)) {
		t.Errorf("an existing pod on the pinned revision: %+v, want it outdated against the current spec", got)
	}
}

// TestOverridesOfExistingPods: explain names the values a pod's overrides set, the recorded
// ones for a pod that exists, and says when its annotation changed since injection.
func TestOverridesOfExistingPods(t *testing.T) {
	const key = "agent.example.com/log-level"
	set := agentSet("registry.example/agent:1.0", appsv1alpha1.RollingUpdate)
	set.Spec.Overrides = []appsv1alpha1.Override{{Annotation: key, Container: "agent", Field: appsv1alpha1.OverrideEnv, EnvName: "LOG_LEVEL"}}
	annotated := func(value string) *corev1.Pod {
		pod := injectedPod(t, agentSet("registry.example/agent:1.0", appsv1alpha1.RollingUpdate))
		pod.Annotations[key] = value
		return pod
	}
	c, err := inject.Compile(set)
	if err != nil {
		t.Fatal(err)
	}
	fresh := annotated("debug")
	delete(fresh.Annotations, appsv1alpha1.StatusAnnotation)
	fresh.Spec.Containers = fresh.Spec.Containers[:1]
	res, err := inject.Apply(inject.Input{Pod: fresh, Sets: []*inject.CompiledSet{c}})
	if err != nil {
		t.Fatal(err)
	}
	injectedWithDebug := res.Pod()
	changed := injectedWithDebug.DeepCopy()
	changed.Annotations[key] = "warn"
	for _, tc := range []struct {
		name     string
		p        Pod
		wantWhy  string
		wantNone bool
	}{
		{name: "a new pod", p: Pod{Pod: fresh}, wantWhy: "the pod overrides agent env LOG_LEVEL=debug (annotation " + key + ")"},
		{name: "an injected pod", p: Pod{Pod: injectedWithDebug, Existing: true}, wantWhy: "agent env LOG_LEVEL=debug (annotation " + key + ")"},
		{name: "changed since injection", p: Pod{Pod: changed, Existing: true}, wantWhy: "LOG_LEVEL=debug (annotation " + key + ", changed since injection"},
		{name: "set after injection", p: Pod{Pod: annotated("warn"), Existing: true}, wantWhy: "was set after injection"},
		{name: "no annotation", p: Pod{Pod: injectedPod(t, set), Existing: true}, wantNone: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Explain(snapshotOf(t, set), tc.p, Options{})
			if len(got) != 1 || got[0].Verdict != Injects {
				t.Fatalf("got %+v, want one Injects", got)
			}
			if tc.wantNone != !strings.Contains(got[0].Why, "overrides") || !strings.Contains(got[0].Why, tc.wantWhy) {
				t.Errorf("Why = %q, want it to say %q (no overrides: %v)", got[0].Why, tc.wantWhy, tc.wantNone)
			}
		})
	}
}

// TestComputedResources: explain says what a sidecar's resourcesPolicy computes for the pod.
func TestComputedResources(t *testing.T) {
	set := agentSet("registry.example/agent:1.0", appsv1alpha1.RollingUpdate)
	set.Spec.Containers[0].ResourcesPolicy = &appsv1alpha1.ResourcesPolicy{ResourcesExpr: appsv1alpha1.ResourcesExpr{
		Limits: map[corev1.ResourceName]appsv1alpha1.ResourceExpression{corev1.ResourceCPU: "cpu * 0.5"}}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "shop", Labels: map[string]string{"app": "web", appsv1alpha1.InjectLabel: "true"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/web:1",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("600m")}}}}},
	}
	got := Explain(snapshotOf(t, set), Pod{Pod: pod}, Options{})
	if want := "resourcesPolicy computes from the pod's containers agent limits cpu=300m"; len(got) != 1 || !strings.Contains(got[0].Why, want) {
		t.Errorf("explanations %+v, want one saying %q", got, want)
	}
}

// TestRestartingPods: a pod the rolling update patched whose kubelet does not run the new
// sidecar yet is restarting, never current, and explain says what it waits for: the old
// container to stop, with the pod's grace period and how long it has waited since its image was
// written (managedFields), or the new container to start.
func TestRestartingPods(t *testing.T) {
	v2 := agentSet("registry.example/agent:2.0", appsv1alpha1.RollingUpdate)
	hash := inject.Hash(&v2.Spec)
	patchedAt := time.Date(2026, 11, 25, 11, 59, 48, 0, time.UTC)
	now := patchedAt.Add(12 * time.Second)
	// kubelet makes the pod's kubelet report the agent sidecar as state with image, and the app
	// running, the pod Ready.
	kubelet := func(image string, state corev1.ContainerState) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
				ContainerStatuses: []corev1.ContainerStatus{
					{Name: "app", Image: "registry.example/web:1", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
					{Name: "agent", Image: image, Ready: true, State: state}}}
		}
	}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	imageWritten := func(p *corev1.Pod) {
		p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "sidecarset-operator", Operation: metav1.ManagedFieldsOperationUpdate, Time: &metav1.Time{Time: patchedAt},
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:containers":{"k:{\"name\":\"agent\"}":{"f:image":{}}}}}`)}}
	}
	graceful := func(seconds int64) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To(seconds) }
	}
	for _, tc := range []struct {
		name  string
		shape []func(*corev1.Pod)
		want  string
	}{
		{"old container terminating", []func(*corev1.Pod){kubelet("registry.example/agent:1.0", running), imageWritten},
			"restarting, waiting for the old container to stop (grace period 30s, waited 12s): sidecar agent still runs registry.example/agent:1.0, " +
				"the pod's spec names registry.example/agent:2.0 (hash " + hash + "); a sidecar that does not exit on SIGTERM is stopped only when the grace period ends"},
		{"old container terminating, a grace period of its own, the patch time unknown", []func(*corev1.Pod){kubelet("registry.example/agent:1.0", running), graceful(600)},
			"restarting, waiting for the old container to stop (grace period 10m0s): sidecar agent still runs registry.example/agent:1.0"},
		{"old container gone, the new one pulling", []func(*corev1.Pod){
			kubelet("registry.example/agent:1.0", corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}), imageWritten},
			"restarting, the new container waits (ContainerCreating): sidecar agent, the kubelet reports registry.example/agent:1.0"},
		{"the new image running", []func(*corev1.Pod){kubelet("registry.example/agent:2.0", running), imageWritten}, "current (hash " + hash + ")"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := injectedPod(t, v2) // patched: the record and the spec name 2.0
			for _, shape := range tc.shape {
				shape(pod)
			}
			got := Explain(snapshotOf(t, v2), Pod{Pod: pod, Existing: true}, Options{Now: now})
			if len(got) != 1 {
				t.Fatalf("explanations %+v, want one", got)
			}
			if !strings.HasPrefix(got[0].Sidecars, tc.want) {
				t.Errorf("sidecars:\n got %q\nwant %q", got[0].Sidecars, tc.want)
			}
		})
	}
}
