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
	if err := writeChart([]byte(chartDeployment), nil, nil, dir, "1.2.3"); err != nil {
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
		// The manager leaves out the namespaces the webhook's registration leaves out.
		"{{ end }}\n{{- with .Values.webhook.excludedNamespaces }}\n        - --excluded-namespaces={{ join \",\" . }}\n{{- end }}\n",
		// The allow-list of patched annotation keys reaches the manager.
		"{{- with .Values.webhook.patchPodMetadataAllowedKeys }}\n        - --patch-pod-metadata-allowed-keys={{ join \",\" . }}\n{{- end }}\n"} {
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
	if err := writeChart([]byte(moved), nil, nil, t.TempDir(), "1"); err == nil || !strings.Contains(err.Error(), "replicas") {
		t.Errorf("a Deployment without replicas: %v, want the pattern named", err)
	}
}

// TestWithInsertions: the lines a variant adds come under the condition, wherever they are;
// a variant that drops or changes a line of the base is refused, naming the line.
func TestWithInsertions(t *testing.T) {
	const cond = "{{- if .V }}"
	tests := []struct {
		name, base, variant, want, err string
	}{
		{name: "same", base: "a\nb\n", variant: "a\nb\n", want: "a\nb\n"},
		{name: "appended", base: "a\nb\n", variant: "a\nb\nc\n", want: "a\nb\n" + cond + "\nc\n{{- end }}\n"},
		{name: "inside, twice", base: "a\nb\nc\n", variant: "x\na\ny\nz\nb\nc\n",
			want: cond + "\nx\n{{- end }}\na\n" + cond + "\ny\nz\n{{- end }}\nb\nc\n"},
		{name: "a repeated line", base: "- a\n- b\n", variant: "- a\n- a\n- b\n", want: "- a\n" + cond + "\n- a\n{{- end }}\n- b\n"},
		{name: "changed", base: "a\nb\n", variant: "a\nB\n", err: `line "b"`},
		{name: "removed", base: "a\nb\nc\n", variant: "a\nc\n", err: `line "b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := withInsertions(tt.base, tt.variant, cond)
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

// TestWriteChartPolicyMode: the objects only policy mode renders, and the lines it adds to the
// others, come under injection=policy; a policy-mode rendering that lacks an object is refused.
func TestWriteChartPolicyMode(t *testing.T) {
	role := "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: sidecarset-policy-mode-role\n"
	policy := strings.Replace(chartDeployment, "        - --metrics-bind-address=:8443\n",
		"        - --metrics-bind-address=:8443\n        - --injection=policy\n", 1) + "---\n" + role
	dir := t.TempDir()
	if err := writeChart([]byte(chartDeployment), []byte(policy), nil, dir, "1"); err != nil {
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
	if err := writeChart([]byte(chartDeployment+"---\n"+role), []byte(chartDeployment), nil, t.TempDir(), "1"); err == nil ||
		!strings.Contains(err.Error(), "ClusterRole sidecarset-policy-mode-role") {
		t.Errorf("a policy-mode rendering without an object: %v, want it named", err)
	}
}
