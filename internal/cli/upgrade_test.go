package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/revision"
	"github.com/sidecarset/sidecarset-operator/internal/rollout"
)

// TestUpgradeCheck plays the running operator by the status and the pods it leaves (its hash,
// its conditions, the records it wrote) and checks what upgrade-check makes of them with this
// version's engine: nothing when they agree, and each difference named, set by set and pod by
// pod.
func TestUpgradeCheck(t *testing.T) {
	agentSet := func(name string, created time.Time) *appsv1alpha1.SidecarSet {
		return &appsv1alpha1.SidecarSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 2, CreationTimestamp: metav1.NewTime(created)},
			Spec: appsv1alpha1.SidecarSetSpec{
				Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Containers:     []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "agent", Image: "agent:1", Env: []corev1.EnvVar{{Name: "LEVEL", Value: "info"}}}}},
				UpdateStrategy: appsv1alpha1.UpdateStrategy{Type: appsv1alpha1.RollingUpdate, MaxUnavailable: ptr.To(intstrOne)},
			},
			Status: appsv1alpha1.SidecarSetStatus{ObservedGeneration: 2},
		}
	}
	setRecord := func(pod *corev1.Pod, set, from, to string) {
		pod.Annotations[appsv1alpha1.StatusAnnotation] = strings.Replace(pod.Annotations[appsv1alpha1.StatusAnnotation], from, to, 1)
	}
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name string
		// running adjusts what the running operator left: the set (its status) and the pods it injected.
		running func(set *appsv1alpha1.SidecarSet, pods []*corev1.Pod)
		others  []*appsv1alpha1.SidecarSet // further SidecarSets in the cluster
		change  SetChange
		why     string
		pods    []Action // After of each pod reported, in order
		podWhy  string   // in the first pod's why
	}{
		{name: "the same engine", running: func(*appsv1alpha1.SidecarSet, []*corev1.Pod) {}, change: SetUnchanged},
		{name: "another hash for the same spec", running: func(set *appsv1alpha1.SidecarSet, pods []*corev1.Pod) {
			for _, p := range pods {
				setRecord(p, "mesh", set.Status.Hash, "0123456789abcdef")
			}
			set.Status.Hash = "0123456789abcdef"
		}, change: SetRehashed, why: "computes hash", pods: []Action{ActionLeave, ActionLeave}, podWhy: "revision it was injected with (mesh-0123456789abcdef) is not stored"},
		{name: "a sidecar injected otherwise under the same hash", running: func(_ *appsv1alpha1.SidecarSet, pods []*corev1.Pod) {
			pods[1].Spec.Containers[1].Env[0].Value = "debug"
		}, change: SetUnchanged, pods: []Action{ActionDrift}, podWhy: "spec.containers[agent].env: differs from what this version injects"},
		{name: "a record this version cannot read", running: func(_ *appsv1alpha1.SidecarSet, pods []*corev1.Pod) {
			pods[0].Annotations[appsv1alpha1.StatusAnnotation] = `{"mesh":{"hash":`
		}, change: SetUnchanged},
		{name: "a set this version cannot compile", running: func(set *appsv1alpha1.SidecarSet, _ []*corev1.Pod) {
			set.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near"}}
		}, change: SetRefused, why: "cannot compile the SidecarSet"},
		{name: "a set the running operator could not compile either", running: func(set *appsv1alpha1.SidecarSet, _ []*corev1.Pod) {
			set.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near"}}
			set.Status.Conditions = []metav1.Condition{{Type: appsv1alpha1.ConditionInvalid, Status: metav1.ConditionTrue, Reason: "InvalidSpec"}}
		}, change: SetUnchanged},
		{name: "not observed yet", running: func(set *appsv1alpha1.SidecarSet, _ []*corev1.Pod) { set.Status.ObservedGeneration = 1 },
			change: SetUnobserved, why: "has not observed generation 2"},
		{name: "a conflict the running operator did not see", others: []*appsv1alpha1.SidecarSet{agentSet("aaa-older", epoch.Add(-time.Hour))},
			running: func(*appsv1alpha1.SidecarSet, []*corev1.Pod) {}, change: SetStopped, why: "stops injecting"},
		{name: "a conflict the running operator saw too", others: []*appsv1alpha1.SidecarSet{agentSet("aaa-older", epoch.Add(-time.Hour))},
			running: func(set *appsv1alpha1.SidecarSet, _ []*corev1.Pod) {
				set.Status.Conditions = []metav1.Condition{{Type: appsv1alpha1.ConditionConflict, Status: metav1.ConditionTrue, Reason: "StoppedByConflict"}}
			}, change: SetUnchanged},
	} {
		t.Run(tt.name, func(t *testing.T) {
			set := agentSet("mesh", epoch)
			c, err := inject.Compile(set)
			if err != nil {
				t.Fatal(err)
			}
			set.Status.Hash = c.Hash
			nsLabels := func(string) map[string]string { return nil }
			pods := []*corev1.Pod{}
			for _, name := range []string{"web-0", "web-1"} {
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name,
					Labels: map[string]string{"app": "web", appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}}
				pod = injectWith(t, newTestEngine(t, []*appsv1alpha1.SidecarSet{set}, nil, nsLabels), pod)
				running(pod)
				pods = append(pods, pod)
			}
			revisions := []*appsv1.ControllerRevision{revisionOf(t, set)}
			tt.running(set, pods)
			all := append([]*appsv1alpha1.SidecarSet{set}, tt.others...)
			e := newTestEngine(t, all, revisions, nsLabels)
			var items []appsv1alpha1.SidecarSet
			for _, s := range all {
				items = append(items, *s)
			}
			got, err := checkSet(planInput{set: set, engine: e, pods: pods, namespaceLabels: nsLabels, now: epoch,
				env: rollout.InPlaceEnv{Revisions: true, Resize: true}}, items)
			if err != nil {
				t.Fatal(err)
			}
			if got.Change != tt.change || !strings.Contains(got.Why, tt.why) {
				t.Errorf("change %s (%s); want %s saying %q", got.Change, got.Why, tt.change, tt.why)
			}
			var after []Action
			for _, p := range got.Pods {
				after = append(after, p.After)
			}
			if strings.Join(actions(after), ",") != strings.Join(actions(tt.pods), ",") {
				t.Fatalf("pods %+v; want afters %v", got.Pods, tt.pods)
			}
			if tt.podWhy != "" && !strings.Contains(got.Pods[0].Why, tt.podWhy) {
				t.Errorf("first pod's why %q; want it to contain %q", got.Pods[0].Why, tt.podWhy)
			}
		})
	}
}

var intstrOne = intstr.FromInt32(1)

func actions(as []Action) []string {
	var out []string
	for _, a := range as {
		out = append(out, string(a))
	}
	return out
}

// revisionOf is the revision the operator stores of the set's current spec.
func revisionOf(t *testing.T, set *appsv1alpha1.SidecarSet) *appsv1.ControllerRevision {
	t.Helper()
	c, err := inject.Compile(set)
	if err != nil {
		t.Fatal(err)
	}
	p := revision.Reconcile(c, "sidecarset-system", nil, nil)
	if p.Create == nil {
		t.Fatal("no revision to create")
	}
	return p.Create
}

// TestSampled: a sample spans the pods at even steps, and 0 takes them all.
func TestSampled(t *testing.T) {
	var pods []*corev1.Pod
	for _, ns := range []string{"c", "a", "b"} {
		for _, n := range []string{"p1", "p0"} {
			pods = append(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n}})
		}
	}
	keys := func(ps []*corev1.Pod) string {
		var out []string
		for _, p := range ps {
			out = append(out, rollout.PodKey(p))
		}
		return strings.Join(out, " ")
	}
	for _, tc := range []struct {
		n    int
		want string
	}{
		{0, "a/p0 a/p1 b/p0 b/p1 c/p0 c/p1"},
		{3, "a/p0 b/p0 c/p0"},
		{2, "a/p0 b/p1"},
		{9, "a/p0 a/p1 b/p0 b/p1 c/p0 c/p1"},
	} {
		if got := keys(sampled(pods, tc.n)); got != tc.want {
			t.Errorf("sample of %d: %s; want %s", tc.n, got, tc.want)
		}
	}
}

// TestUpgradeReportPrinted: the sets' table, then the pods' one only when a pod changes; and
// the exit code says whether anything would.
func TestUpgradeReportPrinted(t *testing.T) {
	r := &UpgradeReport{Version: "v0.2.0"}
	r.add(UpgradeSet{Name: "mesh", Change: SetUnchanged, RunningHash: "aaaa", Hash: "aaaa", PodsSelected: 4, PodsChecked: 2})
	var out bytes.Buffer
	if err := printUpgradeReport(&out, r); err != nil {
		t.Fatal(err)
	}
	if r.Changed() || !strings.Contains(out.String(), "2 of 4") || !strings.Contains(out.String(), "No pod the running operator counts as current") {
		t.Errorf("changed %v, printed:\n%s", r.Changed(), out.String())
	}
	r.add(UpgradeSet{Name: "logs", Change: SetRehashed, Why: "this version computes hash bbbb", RunningHash: "aaaa", Hash: "bbbb", PodsChecked: 1,
		EditsRefused: []string{"spec.containers[0].name: Invalid"},
		Pods:         []UpgradePod{{Namespace: "shop", Name: "web-0", Now: ActionCurrent, After: ActionInPlace, Why: "outdated"}}})
	out.Reset()
	if err := printUpgradeReport(&out, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"logs ", "rehashed", "its next edit must fix what this version's validation refuses: spec.containers[0].name: Invalid",
		"NAMESPACE", "shop ", "web-0", "update in place"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report does not say %q:\n%s", want, out.String())
		}
	}
	if !r.Changed() || r.Summary.SetsChanged != 1 || r.Summary.PodsChanged != 1 || r.Summary.PodsChecked != 3 {
		t.Errorf("summary %+v, changed %v; want 1 set and 1 pod changed of 3 checked", r.Summary, r.Changed())
	}
}
