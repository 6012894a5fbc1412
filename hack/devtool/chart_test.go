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
	if err := writeChart([]byte(chartDeployment), dir, "1.2.3"); err != nil {
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
		"{{ toYaml .Values.resources | indent 10 }}\n        securityContext:", "managed-by: {{ .Release.Service }}"} {
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
	if err := writeChart([]byte(moved), t.TempDir(), "1"); err == nil || !strings.Contains(err.Error(), "replicas") {
		t.Errorf("a Deployment without replicas: %v, want the pattern named", err)
	}
}
