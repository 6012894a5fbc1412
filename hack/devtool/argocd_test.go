package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const argoWebhooks = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  annotations:
    cert-manager.io/inject-ca-from: sidecarset-system/sidecarset-serving-cert
  name: sidecarset-mutating-webhook-configuration
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  annotations:
    cert-manager.io/inject-ca-from: sidecarset-system/sidecarset-serving-cert
  name: sidecarset-validating-webhook-configuration
`

// TestWriteArgoCD: both snippets carry health.lua as written and ignore the caBundle of both
// webhook configuration kinds, naming the install's objects for a per-Application setting; an
// install whose caBundle cert-manager does not fill, or without one of the kinds, is refused, and
// so is a script YAML would print on one quoted line.
func TestWriteArgoCD(t *testing.T) {
	dir := t.TempDir()
	const health = "-- check\n\nlocal hs = {}\nhs.status = \"Healthy\"\nreturn hs\n"
	if err := os.WriteFile(filepath.Join(dir, "health.lua"), []byte(health), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := writeArgoCD([]byte(argoWebhooks), dir); err != nil {
		t.Fatal(err)
	}
	for file, path := range map[string][]string{"argocd-cm.yaml": {"data"}, "argo-cd-values.yaml": {"configs", "cm"}} {
		raw, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		data := doc
		for _, key := range path {
			data, _ = data[key].(map[string]any)
		}
		if got := data["resource.customizations.health.apps.sidecarset.io_SidecarSet"]; got != health {
			t.Errorf("%s: the health check is %q, want health.lua", file, got)
		}
		for _, kind := range []string{"Mutating", "Validating"} {
			key := "resource.customizations.ignoreDifferences.admissionregistration.k8s.io_" + kind + "WebhookConfiguration"
			if got := data[key]; got != "jqPathExpressions:\n- .webhooks[]?.clientConfig.caBundle\n" {
				t.Errorf("%s: %s is %q", file, key, got)
			}
			if !strings.Contains(string(raw), "#     name: sidecarset-"+strings.ToLower(kind)+"-webhook-configuration\n") {
				t.Errorf("%s does not name the %s webhook configuration for an Application", file, kind)
			}
		}
		if strings.Contains(string(raw), " \n") {
			t.Errorf("%s has trailing spaces", file)
		}
	}
	for name, install := range map[string]string{
		"no cert-manager":        strings.Replace(argoWebhooks, "cert-manager.io/inject-ca-from", "example.com/other", 1),
		"no validating webhooks": strings.Split(argoWebhooks, "---")[0],
		"not YAML":               "kind: [",
		"no webhooks at all":     "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n",
	} {
		if err := writeArgoCD([]byte(install), dir); err == nil {
			t.Errorf("%s: written", name)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "health.lua"), []byte("return {} \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := writeArgoCD([]byte(argoWebhooks), dir); err == nil || !strings.Contains(err.Error(), "remove the spaces") {
		t.Errorf("a script with a trailing space: %v", err)
	}
}
