package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const chartDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  labels:
    app.kubernetes.io/managed-by: kustomize
  name: sidecarset-controller-manager
  namespace: sidecarset-system
spec:
  replicas: 2
  template:
    spec:
      containers:
      - args:
        - --metrics-bind-address=:8443
        env:
        - name: POD_NAMESPACE
          value: x
        image: ghcr.io/sidecarset/sidecarset-operator:v0.1.0
        name: manager
        resources:
          limits:
            memory: 256Mi
          requests:
            cpu: 50m
        securityContext:
          readOnlyRootFilesystem: true
`

// TestWriteChart: the values come from the rendered defaults, the namespace becomes the
// release's, the resources block is replaced whole; a rendering whose anchors moved is refused.
func TestWriteChart(t *testing.T) {
	dir := t.TempDir()
	if err := writeChart(chartSources{Default: []byte(chartDeployment)}, dir, "1.2.3"); err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	values := read("values.yaml")
	for _, want := range []string{"repository: ghcr.io/sidecarset/sidecarset-operator\n", "tag: v0.1.0\n", "replicas: 2\n",
		"resources:\n  limits:\n    memory: 256Mi\n  requests:\n    cpu: 50m\n"} {
		if !strings.Contains(values, want) {
			t.Errorf("values.yaml lacks %q:\n%s", want, values)
		}
	}
	dep := read("templates/00-deployment-sidecarset-controller-manager.yaml")
	for _, want := range []string{"namespace: {{ .Release.Namespace }}", "replicas: {{ .Values.replicas }}",
		"{{ toYaml .Values.resources | indent 10 }}\n        securityContext:", "managed-by: {{ .Release.Service }}",
		// The extra environment comes after the container's own.
		"          value: x\n{{- with .Values.env }}\n{{ toYaml . | indent 8 }}\n{{- end }}\n        image:",
		// The manager leaves out the namespaces the webhook's registration leaves out.
		"{{ end }}\n{{- with .Values.webhook.excludedNamespaces }}\n        - --excluded-namespaces={{ join \",\" . }}\n{{- end }}\n",
		// The allow-list of patched annotation keys reaches the manager.
		"{{- with .Values.webhook.patchPodMetadataAllowedKeys }}\n        - --patch-pod-metadata-allowed-keys={{ join \",\" . }}\n{{- end }}\n",
		// Plain-HTTP registries for digest pinning reach the manager.
		"{{- with .Values.insecureRegistries }}\n        - --insecure-registries={{ join \",\" . }}\n{{- end }}\n"} {
		if !strings.Contains(dep, want) {
			t.Errorf("the Deployment template lacks %q:\n%s", want, dep)
		}
	}
	if strings.Contains(dep, "sidecarset-system") || strings.Contains(dep, "256Mi") {
		t.Errorf("the Deployment template keeps a rendered namespace or resource:\n%s", dep)
	}
	if !strings.Contains(read("Chart.yaml"), "version: 1.2.3") {
		t.Error("Chart.yaml lacks the version")
	}

	moved := strings.Replace(chartDeployment, "  replicas: 2\n", "", 1)
	if err := writeChart(chartSources{Default: []byte(moved)}, t.TempDir(), "1"); err == nil || !strings.Contains(err.Error(), "replicas") {
		t.Errorf("a Deployment without replicas: %v, want the pattern named", err)
	}
}

// TestWithVariants: the lines a variant adds come under its condition, the lines it changes
// under if/else, wherever they are; an insert-only variant that drops or changes a line of the
// base is refused, naming the line, as are two variants changing the same lines.
func TestWithVariants(t *testing.T) {
	const cond, other = "{{- if .V }}", "{{- if .W }}"
	adds := func(text string) variant { return variant{text: text, condition: cond, insertOnly: true} }
	changes := func(text string) variant { return variant{text: text, condition: other} }
	tests := []struct {
		name, base string
		variants   []variant
		want, err  string
	}{
		{name: "same", base: "a\nb\n", variants: []variant{adds("a\nb\n")}, want: "a\nb\n"},
		{name: "none", base: "a\nb\n", want: "a\nb\n"},
		{name: "appended", base: "a\nb\n", variants: []variant{adds("a\nb\nc\n")}, want: "a\nb\n" + cond + "\nc\n{{- end }}\n"},
		{name: "inside, twice", base: "a\nb\nc\n", variants: []variant{adds("x\na\ny\nz\nb\nc\n")},
			want: cond + "\nx\n{{- end }}\na\n" + cond + "\ny\nz\n{{- end }}\nb\nc\n"},
		{name: "a repeated line", base: "- a\n- b\n", variants: []variant{adds("- a\n- a\n- b\n")}, want: "- a\n" + cond + "\n- a\n{{- end }}\n- b\n"},
		{name: "changed, insert-only", base: "a\nb\n", variants: []variant{adds("a\nB\n")}, err: `line "b"`},
		{name: "removed, insert-only", base: "a\nb\nc\n", variants: []variant{adds("a\nc\n")}, err: `line "b"`},
		{name: "changed", base: "a\nb\nc\n", variants: []variant{changes("a\nB\nc\n")},
			want: "a\n" + other + "\nB\n{{- else }}\nb\n{{- end }}\nc\n"},
		{name: "two lines for one, and one removed", base: "a\nb\nc\nd\n", variants: []variant{changes("a\nB1\nB2\nc\n")},
			want: "a\n" + other + "\nB1\nB2\n{{- else }}\nb\n{{- end }}\nc\n" + other + "\n{{- else }}\nd\n{{- end }}\n"},
		{name: "an addition and a change", base: "a\nb\nc\n", variants: []variant{adds("a\nx\nb\nc\n"), changes("a\nb\nC\n")},
			want: "a\n" + cond + "\nx\n{{- end }}\nb\n" + other + "\nC\n{{- else }}\nc\n{{- end }}\n"},
		{name: "an addition where a change starts", base: "a\nb\n", variants: []variant{adds("a\nx\nb\n"), changes("a\nB\n")},
			want: "a\n" + cond + "\nx\n{{- end }}\n" + other + "\nB\n{{- else }}\nb\n{{- end }}\n"},
		{name: "an addition inside a change", base: "a\nb\nc\nd\n", variants: []variant{adds("a\nb\nx\nc\nd\n"), changes("a\nB\nC\nd\n")},
			err: `line "c"`},
		{name: "two changes of one line", base: "a\nb\n", variants: []variant{changes("a\nB\n"), {text: "a\nβ\n", condition: cond}},
			err: `line "b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := withVariants(tt.base, tt.variants...)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one naming %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// FuzzDiffLines: applying the hunks of a diff to a gives b, whatever the lines.
func FuzzDiffLines(f *testing.F) {
	f.Add("a\nb\nc\n", "a\nB\nc\nd\n")
	f.Add("", "x\n")
	f.Add("- a\n- a\n", "- a\n")
	f.Fuzz(func(t *testing.T, x, y string) {
		a, b := strings.SplitAfter(x, "\n"), strings.SplitAfter(y, "\n")
		var got []string
		i := 0
		for _, h := range diffLines(a, b) {
			if h.from < i || h.to < h.from {
				t.Fatalf("hunk [%d, %d) after line %d", h.from, h.to, i)
			}
			got = append(append(got, a[i:h.from]...), h.lines...)
			i = h.to
		}
		got = append(got, a[i:]...)
		if strings.Join(got, "") != y {
			t.Errorf("the hunks turn %q into %q, want %q", x, strings.Join(got, ""), y)
		}
	})
}

// TestWriteChartLocalNode: what the local node's rendering changes comes under localNode, the
// changed lines as if/else, and its replicas stay its own.
func TestWriteChartLocalNode(t *testing.T) {
	local := strings.NewReplacer("  replicas: 2\n", "  replicas: 1\n",
		"        - --metrics-bind-address=:8443\n", "        - --metrics-bind-address=127.0.0.1:18443\n        - --webhook-port=19443\n",
		"    spec:\n      containers:\n", "    spec:\n      hostNetwork: true\n      containers:\n").Replace(chartDeployment)
	dir := t.TempDir()
	if err := writeChart(chartSources{Default: []byte(chartDeployment), LocalNode: []byte(local)}, dir, "1"); err != nil {
		t.Fatal(err)
	}
	dep, err := os.ReadFile(filepath.Join(dir, "templates", "00-deployment-sidecarset-controller-manager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		localNodeCondition + "\n  replicas: 1\n{{- else }}\n  replicas: {{ .Values.replicas }}\n{{- end }}\n",
		localNodeCondition + "\n        - --metrics-bind-address={{ if .Values.metrics.enabled }}127.0.0.1:18443{{ else }}0{{ end }}\n" +
			"{{- else }}\n        - --metrics-bind-address={{ if .Values.metrics.enabled }}:8443{{ else }}0{{ end }}\n{{- end }}\n",
		localNodeCondition + "\n        - --webhook-port=19443\n{{- end }}\n",
		localNodeCondition + "\n      hostNetwork: true\n{{- end }}\n",
	} {
		if !strings.Contains(string(dep), want) {
			t.Errorf("the Deployment template lacks %q:\n%s", want, dep)
		}
	}
	values, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(values), "\nreplicas: 2\n") || !strings.Contains(string(values), "\nlocalNode: false\n") {
		t.Errorf("values.yaml: replicas and localNode are not the default rendering's:\n%s", values)
	}
	role := "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: r\n"
	if err := writeChart(chartSources{Default: []byte(chartDeployment + "---\n" + role), LocalNode: []byte(local)}, t.TempDir(), "1"); err == nil ||
		!strings.Contains(err.Error(), "ClusterRole r is not in the local-node rendering") {
		t.Errorf("a local-node rendering without an object: %v, want it named", err)
	}
}

// TestWriteChartPolicyMode: the objects only policy mode renders, and the lines it adds to the
// others, come under injection=policy; a policy-mode rendering that lacks an object is refused.
func TestWriteChartPolicyMode(t *testing.T) {
	role := "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: sidecarset-policy-mode-role\n"
	policy := strings.Replace(chartDeployment, "        - --metrics-bind-address=:8443\n",
		"        - --metrics-bind-address=:8443\n        - --injection=policy\n", 1) + "---\n" + role
	dir := t.TempDir()
	if err := writeChart(chartSources{Default: []byte(chartDeployment), Policy: []byte(policy)}, dir, "1"); err != nil {
		t.Fatal(err)
	}
	dep, err := os.ReadFile(filepath.Join(dir, "templates", "00-deployment-sidecarset-controller-manager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if want := injectionPolicy + "\n        - --injection=policy\n{{- end }}\n"; !strings.Contains(string(dep), want) {
		t.Errorf("the Deployment template lacks %q:\n%s", want, dep)
	}
	if !strings.HasPrefix(string(dep), injectionCheck) {
		t.Errorf("the Deployment template does not check the injection value first:\n%s", dep)
	}
	extra, err := os.ReadFile(filepath.Join(dir, "templates", "01-clusterrole-sidecarset-policy-mode-role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(extra), injectionPolicy+"\n") || !strings.HasSuffix(string(extra), "{{- end }}\n") {
		t.Errorf("the policy-mode ClusterRole is not conditional:\n%s", extra)
	}
	if err := writeChart(chartSources{Default: []byte(chartDeployment + "---\n" + role), Policy: []byte(chartDeployment)}, t.TempDir(), "1"); err == nil ||
		!strings.Contains(err.Error(), "ClusterRole sidecarset-policy-mode-role") {
		t.Errorf("a policy-mode rendering without an object: %v, want it named", err)
	}
}
