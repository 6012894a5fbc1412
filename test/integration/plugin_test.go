package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/cli"
	"github.com/sidecarset/sidecarset-operator/test/testutil"
)

// plugin runs kubectl-sidecarset against the suite's API server.
func plugin(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	args = append(args, "--kubeconfig", adminKubeconfig, "--operator-namespace", operatorNamespace)
	code = cli.Run(ctx, args, genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut})
	return code, out.String(), errOut.String()
}

// dryRunCreate creates the pod through the whole admission chain, webhook included, without
// storing it, and returns what would be stored, made comparable across the two ways a pod can
// get its sidecars: the names the chain generates are fixed, volumes are sorted by name and
// LimitRanger's note is dropped. With the webhook, the in-tree plugins run before it (the
// ServiceAccount volume lands before the sidecars') and again after it (LimitRanger's note then
// lists only the sidecars); with the plugin's output they run once on the injected pod.
func dryRunCreate(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	got, err := dryRun(t, pod)
	must(t, err)
	return got
}

// dryRun is dryRunCreate returning the API server's refusal.
func dryRun(t *testing.T, pod *corev1.Pod) (*corev1.Pod, error) {
	t.Helper()
	got := pod.DeepCopy()
	if err := k8s.Create(ctx, got, client.DryRunAll); err != nil {
		return nil, err
	}
	got.ObjectMeta = metav1.ObjectMeta{Name: got.Name, Namespace: got.Namespace, Labels: got.Labels, Annotations: got.Annotations}
	for _, l := range [][]corev1.Container{got.Spec.InitContainers, got.Spec.Containers} {
		for i := range l {
			for j := range l[i].VolumeMounts {
				if strings.HasPrefix(l[i].VolumeMounts[j].Name, "kube-api-access-") {
					l[i].VolumeMounts[j].Name = "kube-api-access"
				}
			}
		}
	}
	for i := range got.Spec.Volumes {
		if strings.HasPrefix(got.Spec.Volumes[i].Name, "kube-api-access-") {
			got.Spec.Volumes[i].Name = "kube-api-access"
		}
	}
	slices.SortFunc(got.Spec.Volumes, func(a, b corev1.Volume) int { return strings.Compare(a.Name, b.Name) })
	delete(got.Annotations, "kubernetes.io/limit-ranger")
	return got, nil
}

// TestPluginInjectMatchesWebhook: `inject -f` on a Pod and on a Deployment's template gives
// what the webhook gives the same pod through the production admission chain: creating the
// plugin's output stores exactly what creating the input stores (the webhook then finds it
// already injected).
func TestPluginInjectMatchesWebhook(t *testing.T) {
	ns := limitRangeNamespace(t)
	createSet(t, chainSet("plugin", "plugin"))
	pod := appPod(ns, "plugin-0", "plugin", true)
	pod.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	podYAML, err := yaml.Marshal(pod)
	must(t, err)
	deployment := `apiVersion: apps/v1
kind: Deployment
metadata: {name: plugin, namespace: ` + ns + `}
spec:
  selector: {matchLabels: {app: plugin}}
  template:
    metadata:
      labels: {app: plugin, sidecarset.io/inject: "true"}
    spec:
      containers:
      - {name: app, image: registry.example/app:1.0}
`
	code, out, stderr := plugin(t, string(podYAML)+"---\n"+deployment, "inject", "-f", "-")
	if code != 0 {
		t.Fatalf("inject: exit %d: %s", code, stderr)
	}
	docs := strings.Split(out, "---\n")
	if len(docs) != 2 {
		t.Fatalf("inject printed %d documents, want 2:\n%s", len(docs), out)
	}
	var injected corev1.Pod
	must(t, yaml.UnmarshalStrict([]byte(docs[0]), &injected))
	if diff := cmp.Diff(dryRunCreate(t, pod), dryRunCreate(t, &injected)); diff != "" {
		t.Errorf("the webhook stores a different pod than the plugin's output gives (-webhook +plugin):\n%s", diff)
	}
	if names := containerNames(injected.Spec.Containers); !cmp.Equal(names, []string{"app", "plugin-agent"}) {
		t.Errorf("plugin output containers %v", names)
	}

	var dep struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	must(t, yaml.Unmarshal([]byte(docs[1]), &dep))
	asPod := func(tmpl corev1.PodTemplateSpec) *corev1.Pod {
		meta := tmpl.ObjectMeta
		meta.Name, meta.Namespace = "plugin-template", ns
		return &corev1.Pod{ObjectMeta: meta, Spec: tmpl.Spec}
	}
	var original struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	must(t, yaml.Unmarshal([]byte(deployment), &original))
	if diff := cmp.Diff(dryRunCreate(t, asPod(original.Spec.Template)), dryRunCreate(t, asPod(dep.Spec.Template))); diff != "" {
		t.Errorf("the Deployment's template: the webhook stores a different pod (-webhook +plugin):\n%s", diff)
	}
}

// TestPluginRefusesAsTheWebhookDoes: a pod the webhook denies is an error of the plugin with
// the same message, exit code 1 and nothing printed.
func TestPluginRefusesAsTheWebhookDoes(t *testing.T) {
	ns := newNamespace(t, nil)
	createSet(t, agentSet("plugin-deny", "plugin-deny"))
	pod := appPod(ns, "clash", "plugin-deny", true)
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "plugin-deny-agent", Image: "registry.example/mine:1"})
	err := k8s.Create(ctx, pod.DeepCopy())
	if err == nil {
		t.Fatal("the API server created a pod whose container clashes with the sidecar")
	}
	pod.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	raw, yerr := yaml.Marshal(pod)
	must(t, yerr)
	code, out, stderr := plugin(t, string(raw), "inject", "-f", "-")
	msg := strings.TrimSpace(stderr[strings.LastIndex(stderr, "): ")+3:])
	if code != cli.ExitRefused || out != "" || !strings.Contains(err.Error(), msg) {
		t.Errorf("plugin: exit %d, stdout %q, stderr %q; API server: %v", code, out, stderr, err)
	}
}

// TestPluginExplainAndStatus: explain on a pod that exists says its sidecars are current, and
// after the set changes (NotUpdate) that they are outdated and why; status prints the counts
// and conditions the reconciler wrote.
func TestPluginExplainAndStatus(t *testing.T) {
	ns := newNamespace(t, nil)
	set := createSet(t, agentSet("plugin-explain", "explained"))
	createSet(t, agentSet("plugin-other", "somebody-else"))
	pod := appPod(ns, "explained-0", "explained", true)
	must(t, k8s.Create(ctx, pod))

	code, out, stderr := plugin(t, "", "explain", "pod", pod.Name, "-n", ns)
	if code != 0 || !contains(out, "plugin-explain   Injects", "sidecars: current", "plugin-other     SelectorMismatch") {
		t.Errorf("explain: exit %d, stderr %q:\n%s", code, stderr, out)
	}

	setImages(t, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "registry.example/agent:2.0" })
	waitForSet(t, set)
	code, out, _ = plugin(t, "", "explain", "pod", pod.Name, "-n", ns)
	if code != 0 || !contains(out, "sidecars: outdated", "spec.updateStrategy.type is NotUpdate") {
		t.Errorf("explain after the update: exit %d:\n%s", code, out)
	}

	waitForCounts(t, set, counts{1, 0, 0, 0})
	code, out, stderr = plugin(t, "", "status", set.Name)
	if code != 0 || !contains(out, "SidecarSet plugin-explain", "matched 1, updated 0, ready 0", "PodsUpdated") {
		t.Errorf("status: exit %d, stderr %q:\n%s", code, stderr, out)
	}
	code, _, stderr = plugin(t, "", "status", "no-such-set")
	if code != cli.ExitRefused || !strings.Contains(stderr, `SidecarSet "no-such-set" not found`) {
		t.Errorf("status of a missing set: exit %d, %q", code, stderr)
	}
}

// TestPluginRolloutPlan: rollout plan reads the set, the opted-in pods, their namespaces and
// the stored revisions from the cluster (outdated pods are updatable in place: the revision they
// were injected with was found) and writes nothing; with -f it plans a change not yet applied;
// and the pod it says the next step updates now is the one the operator's rollout updates
// first once that change is applied.
func TestPluginRolloutPlan(t *testing.T) {
	ns := newNamespace(t, nil)
	startFakeKubelet(t, ns, 3*time.Second)
	legacy := appPod(ns, "plan-legacy", "plan", true)
	must(t, k8s.Create(ctx, legacy)) // before the set: never injected
	set := createSet(t, rollingSet("plan", "plan"))
	pods := rolloutPods(t, ns, "plan", 3)
	waitForCounts(t, set, counts{4, 3, 3, 3})
	setImages(t, set, func(s *appsv1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy.Paused = true
		s.Spec.Containers[0].Image = "registry.example/agent:2.0"
	})
	rollingCondition(t, set, "Paused", "3 pods wait")
	var live appsv1alpha1.SidecarSet
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), &live))
	images := func() string {
		var out []string
		for _, p := range append(slices.Clone(pods), legacy) {
			out = append(out, imagesOf(getPod(t, p)))
		}
		return strings.Join(out, " ")
	}
	before := images()

	code, out, stderr := plugin(t, "", "rollout", "plan", set.Name)
	if code != 0 || stderr != "" || !contains(out, "RollingUpdate, maxUnavailable 1 (default), partition 0, paused",
		"plan-0        update in place   waits: paused", "plan-2        update in place   waits: paused",
		"plan-legacy   leave             -               not injected by this SidecarSet", "next step: 0 updated in place, 0 evicted; 3 wait; 1 left alone") {
		t.Errorf("rollout plan: exit %d, stderr %q:\n%s", code, stderr, out)
	}

	// The change about to be applied: unpaused.
	change := live.DeepCopy()
	change.Spec.UpdateStrategy.Paused = false
	change.TypeMeta = metav1.TypeMeta{APIVersion: appsv1alpha1.GroupVersion.String(), Kind: "SidecarSet"}
	raw, err := yaml.Marshal(change)
	must(t, err)
	file := filepath.Join(t.TempDir(), "plan.yaml")
	must(t, os.WriteFile(file, raw, 0o600))
	code, out, stderr = plugin(t, "", "rollout", "plan", "-f", file, "-o", "json")
	var plan cli.RolloutPlan
	if code != 0 || stderr != "" || json.Unmarshal([]byte(out), &plan) != nil {
		t.Fatalf("rollout plan -f: exit %d, stderr %q:\n%s", code, stderr, out)
	}
	var now, waiting []string
	for _, p := range plan.Pods {
		switch {
		case p.Next == "now" && p.Action == cli.ActionInPlace:
			now = append(now, p.Name)
		case p.Next == "waits" && p.WaitsFor == "budget":
			waiting = append(waiting, p.Name)
		}
	}
	if len(now) != 1 || len(waiting) != 2 || plan.Strategy.Paused {
		t.Fatalf("rollout plan -f: %d now %v, %d waiting for the budget %v; want 1 and 2:\n%s", len(now), now, len(waiting), waiting, out)
	}

	// Nothing was written.
	var after appsv1alpha1.SidecarSet
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), &after))
	if after.Generation != live.Generation || images() != before {
		t.Fatalf("the plan wrote: generation %d -> %d, pods %s -> %s", live.Generation, after.Generation, before, images())
	}

	// Applied, the rollout starts with the pod the plan named.
	setImages(t, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Paused = false })
	var first string
	eventually(t, "the rollout to update a pod", func() (bool, string) {
		var updated []string
		for _, p := range pods {
			if strings.Contains(imagesOf(getPod(t, p)), "agent:2.0") {
				updated = append(updated, p.Name)
			}
		}
		if len(updated) == 1 {
			first = updated[0]
		}
		return len(updated) > 0, fmt.Sprint(updated)
	})
	if first != now[0] {
		t.Errorf("the rollout updated %q first; the plan said %q", first, now[0])
	}
}

// TestPluginInstallsAsKubectlPlugin: `make install-plugin` puts kubectl-sidecarset where
// kubectl finds it, and `kubectl sidecarset` runs it.
func TestPluginInstallsAsKubectlPlugin(t *testing.T) {
	kubectl := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Fatalf("kubectl is not among the control-plane binaries: %v", err)
	}
	dir := t.TempDir()
	run(t, "make", "-C", repoRoot(t), "install-plugin", "PLUGIN_DIR="+dir)
	out := string(run(t, "env", "PATH="+dir+":"+os.Getenv("PATH"), kubectl, "plugin", "list"))
	if !strings.Contains(out, filepath.Join(dir, "kubectl-sidecarset")) {
		t.Errorf("kubectl plugin list does not show the plugin:\n%s", out)
	}
	out = string(run(t, "env", "PATH="+dir+":"+os.Getenv("PATH"), kubectl, "sidecarset", "status", "--help"))
	if !strings.Contains(out, "status SIDECARSET") {
		t.Errorf("kubectl sidecarset status --help:\n%s", out)
	}
}

var repoRoot, run = testutil.RepoRoot, testutil.Run

// TestKubectlWaitForReady: the Ready summary condition makes `kubectl wait
// --for=condition=Ready` work on a SidecarSet, at its current generation.
func TestKubectlWaitForReady(t *testing.T) {
	kubectl := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	set := createSet(t, agentSet("wait-ready", "wait-ready"))
	run(t, kubectl, "--kubeconfig", adminKubeconfig, "wait", "--for=condition=Ready", "--timeout=20s", "sidecarset/"+set.Name)
	setImages(t, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "registry.example/agent:2.0" })
	run(t, kubectl, "--kubeconfig", adminKubeconfig, "wait", "--for=condition=Ready", "--timeout=20s", "sidecarset/"+set.Name)
	var got appsv1alpha1.SidecarSet
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), &got))
	if c := meta.FindStatusCondition(got.Status.Conditions, appsv1alpha1.ConditionReady); c == nil || c.ObservedGeneration != got.Generation {
		t.Errorf("Ready %+v at generation %d", c, got.Generation)
	}
}

// TestPluginConvertsKruiseSidecarSets: `convert -f` on OpenKruise SidecarSets (the samples of
// internal/cli/testdata/convert) gives SidecarSets that the API server stores as they are: the
// CRD's schema and the operator's validating webhook accept them (a server-side dry run), and
// OpenKruise's defaults that differ from ours are written out.
func TestPluginConvertsKruiseSidecarSets(t *testing.T) {
	input, err := os.ReadFile(filepath.Join("..", "..", "internal", "cli", "testdata", "convert", "input.yaml"))
	must(t, err)
	code, stdout, stderr := plugin(t, string(input), "convert", "-f", "-")
	if code != 0 {
		t.Fatalf("convert exited %d: %s", code, stderr)
	}
	docs, err := cli.ReadDocuments(strings.NewReader(stdout), "convert's output")
	must(t, err)
	sets := 0
	for _, d := range docs {
		if d.Object.GetKind() != "SidecarSet" {
			continue
		}
		sets++
		var set appsv1alpha1.SidecarSet
		must(t, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(d.Object.Object, &set, true))
		if set.Spec.UpdateStrategy.Type != appsv1alpha1.RollingUpdate || set.Spec.UpdateStrategy.MaxUnavailable == nil {
			t.Errorf("SidecarSet %s: updateStrategy %+v, want OpenKruise's defaults (RollingUpdate, maxUnavailable) written out", set.Name, set.Spec.UpdateStrategy)
		}
		if err := k8s.Create(ctx, &set, client.DryRunAll); err != nil {
			t.Errorf("the API server refused converted SidecarSet %s: %v", set.Name, err)
		}
	}
	if sets != 3 {
		t.Errorf("convert printed %d SidecarSets, want the 3 of the input", sets)
	}
}
