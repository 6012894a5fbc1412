package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// webPod is an opted-in pod of namespace shop that SidecarSet mesh (meshObjects) selects.
const webPod = `apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: shop, labels: {app: web, sidecarset.io/inject: "true"}}
spec:
  containers: [{name: app, image: app:1}]
`

// meshObjects are a cluster's SidecarSet mesh, whose sidecar has a 512Mi memory limit, and
// namespace shop.
func meshObjects() []client.Object {
	set := &appsv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "mesh"},
		Spec: appsv1alpha1.SidecarSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Containers: []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "proxy", Image: "proxy:1",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")}}}}},
		},
	}
	return []client.Object{set, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}}
}

// memoryBound is a LimitRange of namespace shop capping a container's memory at 256Mi: mesh's
// sidecar breaks it.
func memoryBound() *corev1.LimitRange {
	return &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "bounds"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
		Type: corev1.LimitTypeContainer, Max: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}}}}}
}

// runWith runs the plugin against the client c and returns its exit code and output.
func runWith(t *testing.T, c client.Client, args []string, stdin string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	o := &options{streams: genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut}, client: c}
	return run(context.Background(), args, o), out.String(), errOut.String()
}

// TestPluginJudgesLimitRanges: in a namespace whose LimitRange caps memory at 256Mi per
// container, the webhook refuses the pod naming the set (TestLimitRangeRefusalNamesTheSet in
// internal/webhook). The plugin, reading the same set, namespace and LimitRange from the same
// cluster, says the same: inject refuses, explain says Refused, both exit ExitRefused.
func TestPluginJudgesLimitRanges(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(append(meshObjects(), memoryBound())...).Build()

	code, stdout, stderr := runWith(t, c, []string{"inject", "-f", "-", "-n", "shop"}, webPod)
	if code != ExitRefused || !strings.Contains(stderr, "LimitRange") || stdout != "" {
		t.Errorf("inject: exit %d, want %d with the webhook's LimitRange refusal; stderr %q, printed the pod injected: %v",
			code, ExitRefused, strings.TrimSpace(stderr), strings.Contains(stdout, "name: proxy"))
	}
	code, stdout, _ = runWith(t, c, []string{"explain", "-f", "-", "-n", "shop"}, webPod)
	if code != ExitRefused || !strings.Contains(stdout, "Refused") || !strings.Contains(stdout, "LimitRange") {
		t.Errorf("explain: exit %d, want %d; the verdict does not name the LimitRange refusal:\n%s", code, ExitRefused, stdout)
	}
}

// TestOfflineLimitRangesComeFromTheFiles: with --sidecarsets, the LimitRanges are the
// LimitRange objects of -f, each in its own namespace (or -n's); inject and explain agree.
func TestOfflineLimitRangesComeFromTheFiles(t *testing.T) {
	setsFile := filepath.Join(t.TempDir(), "sets.yaml")
	if err := os.WriteFile(setsFile, []byte(`apiVersion: apps.sidecarset.io/v1alpha1
kind: SidecarSet
metadata: {name: mesh}
spec:
  selector: {matchLabels: {app: web}}
  containers: [{name: proxy, image: "proxy:1", resources: {limits: {memory: 512Mi}}}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	const bound = `apiVersion: v1
kind: LimitRange
metadata: {name: bounds%s}
spec: {limits: [{type: Container, max: {memory: 256Mi}}]}
---
`
	for _, tc := range []struct {
		name    string
		input   string
		refused bool
	}{
		{"no LimitRange", webPod, false},
		{"LimitRange of the pod's namespace", strings.Replace(bound, "%s", ", namespace: shop", 1) + webPod, true},
		{"LimitRange of -n's namespace", strings.Replace(bound, "%s", "", 1) + webPod, true},
		{"LimitRange of another namespace", strings.Replace(bound, "%s", ", namespace: lab", 1) + webPod, false},
		{"LimitRange in a List", `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: LimitRange
  metadata: {name: bounds, namespace: shop}
  spec: {limits: [{type: Container, max: {memory: 256Mi}}]}
---
` + webPod, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for cmd, says := range map[string]string{"inject": "Pod shop/web-0: injected mesh", "explain": "Injects"} {
				want := ExitOK
				if tc.refused {
					want, says = ExitRefused, "LimitRange bounds of namespace shop"
				}
				code, stdout, stderr := runPlugin(t, []string{cmd, "-f", "-", "-n", "shop", "--sidecarsets", setsFile}, tc.input)
				if code != want || !strings.Contains(stdout+stderr, says) {
					t.Errorf("%s: exit %d, want %d saying %q; stdout:\n%s\nstderr:\n%s", cmd, code, want, says, stdout, stderr)
				}
			}
		})
	}
}

// TestInjectExitCodeWhenTheClusterFails: the help says exit code 3 when "the cluster could not
// be reached or refused a read". Reading the pod's namespace fails after the SidecarSets were
// listed; inject runs the webhook's handler, which answers such a failure as an internal error,
// and still exits 3, as explain does.
func TestInjectExitCodeWhenTheClusterFails(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(meshObjects()...).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Namespace); ok {
				return errors.New("dial tcp 10.0.0.1:443: connect: connection refused")
			}
			return cl.Get(ctx, key, obj, opts...)
		},
	}).Build()
	for _, cmd := range []string{"explain", "inject"} {
		code, _, stderr := runWith(t, c, []string{cmd, "-f", "-", "-n", "shop"}, webPod)
		if code != ExitCluster {
			t.Errorf("%s: exit %d, want %d (cluster); stderr %q", cmd, code, ExitCluster, strings.TrimSpace(stderr))
		}
	}
}

// injects matches explain's line for SidecarSet mesh injecting.
var injects = regexp.MustCompile(`(?m)^mesh +Injects `)

// TestExplainReadsLists: explain -f reads what inject -f reads: the items of a List (what
// `kubectl get -o yaml` prints) and of a typed list whose items carry no apiVersion and kind
// (what the API server answers a list with).
func TestExplainReadsLists(t *testing.T) {
	list := `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: web-0, namespace: shop, labels: {app: web, sidecarset.io/inject: "true"}}
  spec:
    containers: [{name: app, image: app:1}]
`
	podList := `apiVersion: v1
kind: PodList
metadata: {resourceVersion: "7"}
items:
- metadata: {name: web-0, namespace: shop, labels: {app: web, sidecarset.io/inject: "true"}}
  spec:
    containers: [{name: app, image: app:1}]
`
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(meshObjects()...).Build()
	for name, input := range map[string]string{"List": list, "PodList": podList} {
		t.Run(name, func(t *testing.T) {
			if code, stdout, stderr := runWith(t, c, []string{"inject", "-f", "-", "-n", "shop"}, input); code != ExitOK ||
				!strings.Contains(stderr, "Pod shop/web-0: injected mesh") || !strings.Contains(stdout, "name: proxy") {
				t.Errorf("inject on a %s: exit %d, stdout %q, stderr %q", name, code, stdout, strings.TrimSpace(stderr))
			}
			if code, stdout, stderr := runWith(t, c, []string{"explain", "-f", "-", "-n", "shop"}, input); code != ExitOK ||
				!strings.Contains(stdout, "Pod shop/web-0") || !injects.MatchString(stdout) {
				t.Errorf("explain on a %s: exit %d, stdout %q, stderr %q", name, code, stdout, strings.TrimSpace(stderr))
			}
		})
	}
}

// failing returns interceptor functions under which reading a kind of object fails as an
// unreachable API server would: "Namespace", "LimitRange", "SidecarSet", "Pod".
func failing(kind string) interceptor.Funcs {
	refused := errors.New("dial tcp 10.0.0.1:443: connect: connection refused")
	return interceptor.Funcs{
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Namespace); ok && kind == "Namespace" {
				return refused
			}
			if _, ok := obj.(*corev1.Pod); ok && kind == "Pod" {
				return refused
			}
			return cl.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*corev1.LimitRangeList); ok && kind == "LimitRange" {
				return refused
			}
			if _, ok := list.(*appsv1alpha1.SidecarSetList); ok && kind == "SidecarSet" {
				return refused
			}
			return cl.List(ctx, list, opts...)
		},
	}
}

// TestExitCodes: inject and explain exit with the code the help gives each outcome.
func TestExitCodes(t *testing.T) {
	existing := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "shop",
		Labels: map[string]string{"app": "web", appsv1alpha1.InjectLabel: "true"}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}}
	for _, tc := range []struct {
		name   string
		args   []string
		stdin  string
		bound  bool   // the cluster has memoryBound
		fail   string // the kind whose reads fail
		want   int
		output string // what standard output or error says
	}{
		{name: "inject injects", args: []string{"inject", "-f", "-"}, stdin: webPod, want: ExitOK, output: "Pod shop/web-0: injected mesh"},
		{name: "inject refused", args: []string{"inject", "-f", "-"}, stdin: webPod, bound: true, want: ExitRefused, output: `SidecarSet "mesh"`},
		{name: "inject: namespace unreadable", args: []string{"inject", "-f", "-"}, stdin: webPod, fail: "Namespace", want: ExitCluster,
			output: "reading namespace shop: dial tcp"},
		{name: "inject: LimitRanges unreadable", args: []string{"inject", "-f", "-"}, stdin: webPod, fail: "LimitRange", want: ExitCluster,
			output: "listing the LimitRanges of namespace shop: dial tcp"},
		{name: "inject: SidecarSets unreadable", args: []string{"inject", "-f", "-"}, stdin: webPod, fail: "SidecarSet", want: ExitCluster,
			output: "listing SidecarSets: dial tcp"},
		{name: "inject: bad YAML", args: []string{"inject", "-f", "-"}, stdin: "kind: [", want: ExitRefused, output: "not valid YAML or JSON"},
		{name: "inject: not an object", args: []string{"inject", "-f", "-"}, stdin: "name: web\n", want: ExitRefused, output: "no apiVersion and kind"},
		{name: "inject: argument", args: []string{"inject", "web.yaml"}, want: ExitUsage, output: "takes no arguments"},

		{name: "explain injects", args: []string{"explain", "-f", "-"}, stdin: webPod, want: ExitOK, output: "Injects   selected"},
		{name: "explain refused", args: []string{"explain", "-f", "-"}, stdin: webPod, bound: true, want: ExitRefused,
			output: "the webhook refuses Pod shop/web-0"},
		{name: "explain pod refused", args: []string{"explain", "pod", "web-0"}, bound: true, want: ExitRefused,
			output: "the webhook refuses Pod shop/web-0"},
		{name: "explain: namespace unreadable", args: []string{"explain", "-f", "-"}, stdin: webPod, fail: "Namespace", want: ExitCluster,
			output: "reading namespace shop: dial tcp"},
		{name: "explain: LimitRanges unreadable", args: []string{"explain", "-f", "-"}, stdin: webPod, fail: "LimitRange", want: ExitCluster,
			output: "listing the LimitRanges of namespace shop: dial tcp"},
		{name: "explain: SidecarSets unreadable", args: []string{"explain", "-f", "-"}, stdin: webPod, fail: "SidecarSet", want: ExitCluster,
			output: "listing SidecarSets: dial tcp"},
		{name: "explain: pod unreadable", args: []string{"explain", "pod", "web-0"}, fail: "Pod", want: ExitCluster, output: "reading pod shop/web-0"},
		{name: "explain: bad YAML", args: []string{"explain", "-f", "-"}, stdin: "kind: [", want: ExitRefused, output: "not valid YAML or JSON"},
		{name: "explain: no pod", args: []string{"explain", "-f", "-"}, stdin: "apiVersion: v1\nkind: Service\nmetadata: {name: web}\n",
			want: ExitRefused, output: "holds no pod and no workload"},
		{name: "explain: pod not found", args: []string{"explain", "pod", "web-1"}, want: ExitRefused, output: "pod shop/web-1 not found"},
		{name: "explain: both inputs", args: []string{"explain", "pod", "web-0", "-f", "-"}, want: ExitUsage, output: "not both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objects := append(meshObjects(), existing.DeepCopy())
			if tc.bound {
				objects = append(objects, memoryBound())
			}
			b := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objects...)
			if tc.fail != "" {
				b = b.WithInterceptorFuncs(failing(tc.fail))
			}
			code, stdout, stderr := runWith(t, b.Build(), append(tc.args, "-n", "shop"), tc.stdin)
			if code != tc.want || !strings.Contains(stdout+stderr, tc.output) {
				t.Errorf("exit %d, want %d saying %q; stdout:\n%s\nstderr:\n%s", code, tc.want, tc.output, stdout, stderr)
			}
			if tc.want != ExitOK && !strings.HasPrefix(stderr, "error: ") && !strings.Contains(stderr, "\nerror: ") {
				t.Errorf("exit %d without an error line on standard error: %q", code, stderr)
			}
		})
	}
}

// TestExplainAgreesWithInject: for each LimitRange, explain refuses the pod exactly when
// inject (the webhook's handler) does, for a set that sizes its sidecar and one that does not.
func TestExplainAgreesWithInject(t *testing.T) {
	item := func(typ corev1.LimitType, field string, res corev1.ResourceName, q string) corev1.LimitRangeItem {
		l := corev1.ResourceList{res: resource.MustParse(q)}
		out := corev1.LimitRangeItem{Type: typ}
		switch field {
		case "max":
			out.Max = l
		case "min":
			out.Min = l
		case "ratio":
			out.MaxLimitRequestRatio = l
		}
		return out
	}
	for _, tc := range []struct {
		name string
		item corev1.LimitRangeItem
	}{
		{"container max memory", item(corev1.LimitTypeContainer, "max", corev1.ResourceMemory, "256Mi")},
		{"container max memory above the sidecar's", item(corev1.LimitTypeContainer, "max", corev1.ResourceMemory, "1Gi")},
		{"container min cpu", item(corev1.LimitTypeContainer, "min", corev1.ResourceCPU, "100m")},
		{"container memory ratio", item(corev1.LimitTypeContainer, "ratio", corev1.ResourceMemory, "2")},
		{"pod max memory", item(corev1.LimitTypePod, "max", corev1.ResourceMemory, "256Mi")},
	} {
		for _, sized := range []bool{true, false} {
			objects := meshObjects()
			if !sized {
				set := objects[0].(*appsv1alpha1.SidecarSet)
				set.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
			}
			lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "bounds"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{tc.item}}}
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(append(objects, lr)...).Build()
			injectCode, _, injectErr := runWith(t, c, []string{"inject", "-f", "-", "-n", "shop"}, webPod)
			explainCode, explainOut, _ := runWith(t, c, []string{"explain", "-f", "-", "-n", "shop"}, webPod)
			if injectCode != explainCode || injectCode == ExitRefused && !strings.Contains(explainOut, "Refused") {
				t.Errorf("%s, sidecar sized %v: inject exits %d (%s), explain exits %d:\n%s",
					tc.name, sized, injectCode, strings.TrimSpace(injectErr), explainCode, explainOut)
			}
		}
	}
}

// TestExitCodesDocumented: the help text and docs/kubectl-plugin.md say what each exit code
// means in the words of exitCodes.
func TestExitCodesDocumented(t *testing.T) {
	raw, err := os.ReadFile("../../docs/kubectl-plugin.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Join(strings.Fields(string(raw)), " ")
	_, help, _ := runPlugin(t, []string{"--help"}, "")
	help = strings.Join(strings.Fields(help), " ")
	for _, c := range exitCodes {
		if line := "- " + strconv.Itoa(c.code) + ": " + c.means; !strings.Contains(doc, line) {
			t.Errorf("docs/kubectl-plugin.md does not say %q", line)
		}
		if line := strconv.Itoa(c.code) + " " + c.means; !strings.Contains(help, line) {
			t.Errorf("the help does not say %q:\n%s", line, help)
		}
	}
}
