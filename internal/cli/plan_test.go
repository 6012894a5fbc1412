package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/revision"
	"github.com/sidecarset/sidecarset-operator/internal/rollout"
)

// injectedAnnotation says, on a pod of a plan case, which SidecarSets the webhook injected it
// with: before (the default), now, or never.
const injectedAnnotation = "test.sidecarset.io/injected"

// kubeletRunsAnnotation ("container=image"), on a pod of a plan case, makes its kubelet report
// that container's old instance still running that image (the new one waits for it to stop);
// imageWrittenAnnotation (RFC 3339) is when managedFields say the container's image was
// written.
const (
	kubeletRunsAnnotation  = "test.sidecarset.io/kubelet-runs"
	imageWrittenAnnotation = "test.sidecarset.io/image-written"
)

// TestRolloutPlanGolden plans each case under testdata/plan (a directory with the SidecarSet
// now, sidecarsets.yaml) over the pods of testdata/plan/cluster.yaml (and of the case's own
// cluster.yaml, when it has one), injected as the webhook
// injects them with the set of testdata/plan/before.yaml, whose revision the operator stored,
// and compares the table and the JSON with the case's golden file.
func TestRolloutPlanGolden(t *testing.T) {
	cases, err := filepath.Glob("testdata/plan/*/sidecarsets.yaml")
	if err != nil || len(cases) == 0 {
		t.Fatalf("no cases under testdata/plan: %v", err)
	}
	for _, file := range cases {
		dir := filepath.Dir(file)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			in := planCase(t, dir)
			plan, err := planRollout(in)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := printPlan(&out, plan); err != nil {
				t.Fatal(err)
			}
			raw, err := json.MarshalIndent(plan, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			compareGolden(t, filepath.Join(dir, "golden"), out.String()+"--- -o json\n"+string(raw)+"\n")
		})
	}
}

// planCase builds what the plugin reads from a cluster for the case in dir.
func planCase(t *testing.T, dir string) planInput {
	t.Helper()
	const operatorNamespace = "sidecarset-system"
	before, now := readSets(t, "testdata/plan/before.yaml"), readSets(t, filepath.Join(dir, "sidecarsets.yaml"))
	var namespaces []*corev1.Namespace
	var nodes []*corev1.Node
	var pods []*corev1.Pod
	docs := readDocs(t, "testdata/plan/cluster.yaml")
	if _, err := os.Stat(filepath.Join(dir, "cluster.yaml")); err == nil {
		docs = append(docs, readDocs(t, filepath.Join(dir, "cluster.yaml"))...) // the case's own pods
	}
	for _, d := range docs {
		switch d.Object.GetKind() {
		case "Namespace":
			namespaces = append(namespaces, convert[corev1.Namespace](t, d.Object.Object))
		case "Node":
			nodes = append(nodes, convert[corev1.Node](t, d.Object.Object))
		case "Pod":
			pods = append(pods, convert[corev1.Pod](t, d.Object.Object))
		}
	}
	nsLabels := func(name string) map[string]string {
		for _, ns := range namespaces {
			if ns.Name == name {
				return ns.Labels
			}
		}
		return nil
	}
	webhookBefore, webhookNow := newTestEngine(t, before, nil, nsLabels), newTestEngine(t, now, nil, nsLabels)
	for i, pod := range pods {
		switch pod.Annotations[injectedAnnotation] {
		case "never":
		case "now":
			pods[i] = injectWith(t, webhookNow, pod)
		default:
			pods[i] = injectWith(t, webhookBefore, pod)
		}
		running(pods[i])
		stillRunsOld(t, pods[i])
	}
	var revisions []*appsv1.ControllerRevision
	for _, sets := range [][]*appsv1alpha1.SidecarSet{before, now} {
		for _, s := range sets {
			c, err := inject.Compile(s)
			if err != nil {
				t.Fatal(err)
			}
			revisions = append(revisions, revision.Reconcile(c, operatorNamespace, nil, nil).Create)
		}
	}
	return planInput{set: now[0], engine: newTestEngine(t, now, revisions, nsLabels), pods: pods,
		namespaceLabels: nsLabels, now: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC),
		env: rollout.InPlaceEnv{Revisions: true, Resize: true, KubeletVersion: func(name string) (*version.Version, error) {
			for _, n := range nodes {
				if n.Name == name {
					return version.ParseGeneric(n.Status.NodeInfo.KubeletVersion)
				}
			}
			return nil, nil
		}}}
}

func readDocs(t *testing.T, file string) []Document {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	docs, err := ReadDocuments(f, file)
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

func readSets(t *testing.T, file string) []*appsv1alpha1.SidecarSet {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	sets, err := ReadSidecarSets(f, file)
	if err != nil {
		t.Fatal(err)
	}
	return sets
}

func convert[T any](t *testing.T, obj map[string]any) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func newTestEngine(t *testing.T, sets []*appsv1alpha1.SidecarSet, revisions []*appsv1.ControllerRevision, nsLabels func(string) map[string]string) *Engine {
	t.Helper()
	e, err := NewEngine(sets, revisions, inject.Scope{OperatorNamespace: "sidecarset-system"}, func(_ context.Context, ns string) (map[string]string, error) { return nsLabels(ns), nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// injectWith creates the pod through the webhook's handler.
func injectWith(t *testing.T, e *Engine, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	injected, out, err := e.InjectPod(context.Background(), raw, pod.Namespace)
	if err != nil || !out.Changed {
		t.Fatalf("injecting %s/%s: changed %v, %v %s", pod.Namespace, pod.Name, out.Changed, err, out.Message)
	}
	got := &corev1.Pod{}
	if err := json.Unmarshal(injected, got); err != nil {
		t.Fatal(err)
	}
	return got
}

// stillRunsOld makes the pod's kubelet report a container's old instance still running, as its
// kubeletRunsAnnotation says, and records when its image was written (imageWrittenAnnotation).
func stillRunsOld(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	name, image, ok := strings.Cut(pod.Annotations[kubeletRunsAnnotation], "=")
	if !ok {
		return
	}
	for i := range pod.Status.ContainerStatuses {
		if st := &pod.Status.ContainerStatuses[i]; st.Name == name {
			st.Image = image
		}
	}
	if at, ok := pod.Annotations[imageWrittenAnnotation]; ok {
		written, err := time.Parse(time.RFC3339, at)
		if err != nil {
			t.Fatal(err)
		}
		fields := fmt.Sprintf(`{"f:spec":{"f:containers":{"k:{\"name\":\"%s\"}":{"f:image":{}}}}}`, name)
		pod.ManagedFields = append(pod.ManagedFields, metav1.ManagedFieldsEntry{Manager: "manager", Operation: metav1.ManagedFieldsOperationUpdate,
			Time: &metav1.Time{Time: written}, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)})
	}
}

// running makes the pod run as the kubelet reports it: Ready, every container running the image
// its spec names.
func running(pod *corev1.Pod) {
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	started := func(c corev1.Container) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	}
	for _, c := range pod.Spec.InitContainers {
		pod.Status.InitContainerStatuses = append(pod.Status.InitContainerStatuses, started(c))
	}
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, started(c))
	}
}

// TestSlowestSeconds: the bound adds the longest grace periods, maxUnavailable pods at a time.
func TestSlowestSeconds(t *testing.T) {
	for _, tc := range []struct {
		graces         []int64
		maxUnavailable int
		want           int64
	}{
		{nil, 1, 0},
		{[]int64{30, 30, 30}, 1, 90},
		{[]int64{30, 300, 30, 30}, 2, 330},
		{[]int64{5, 120, 30}, 3, 120},
		{[]int64{30}, 0, 30},
	} {
		if got := slowestSeconds(slices.Clone(tc.graces), tc.maxUnavailable); got != tc.want {
			t.Errorf("slowestSeconds(%v, %d) = %d, want %d", tc.graces, tc.maxUnavailable, got, tc.want)
		}
	}
}
