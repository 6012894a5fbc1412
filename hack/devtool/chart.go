package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The names the kustomize sources use, which the chart turns into values.
const (
	kustomizeNamespace = "sidecarset-system"
	managedByKustomize = "app.kubernetes.io/managed-by: kustomize"
)

// injectionPolicy is the condition under which a template renders policy mode.
const injectionPolicy = `{{- if eq .Values.injection "policy" }}`

// helmLiteral makes Helm print template delimiters as they are.
var helmLiteral = strings.NewReplacer("{{", "{{`{{`}}", "}}", "{{`}}`}}")

// monitoringCondition renders the Prometheus Operator objects (config/monitoring) with metrics
// on, and metrics.monitoring "true", or "auto" (the default) where the cluster serves
// monitoring.coreos.com/v1: the alert rules are on by default wherever they can be.
const monitoringCondition = `{{- if and .Values.metrics.enabled (or (eq (toString .Values.metrics.monitoring) "true") ` +
	`(and (eq (toString .Values.metrics.monitoring) "auto") (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1/PrometheusRule"))) }}`

// writeChart turns `kustomize build config/default` (rendered) into a Helm chart in dir: the
// same objects, with the release namespace for sidecarset-system and values for the image,
// replicas, resources, the pod webhook's failurePolicy and extra excluded namespaces, and
// metrics. The CRD goes to crds/; the Namespace is left to `helm install --create-namespace`.
// With policyRendered (`kustomize build config/policy-mode`), the value injection=policy renders
// that instead: its extra objects, and the lines it adds to the default's, under a condition.
// Every substitution must apply exactly where expected: a change in the kustomize sources that
// moves one fails here instead of producing a chart that silently ignores a value.
//
// monitoringRendered (`kustomize build config/monitoring`, may be nil) are the ServiceMonitor
// and the alert rules, rendered under monitoringCondition.
func writeChart(rendered, policyRendered, monitoringRendered []byte, dir, version string) error {
	objs, err := decodeAll(rendered)
	if err != nil {
		return err
	}
	monitoring, err := decodeAll(monitoringRendered)
	if err != nil {
		return err
	}
	policyObjs, err := decodeAll(policyRendered)
	if err != nil {
		return err
	}
	policyTexts := map[string]string{}
	for _, obj := range policyObjs {
		raw, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		policyTexts[kindAndName(obj)] = string(raw)
	}
	var extra []map[string]any // objects only policy mode has, in its order
	for _, obj := range policyObjs {
		if !slices.ContainsFunc(objs, func(o map[string]any) bool { return kindAndName(o) == kindAndName(obj) }) {
			extra = append(extra, obj)
		}
	}
	files := map[string]string{}
	var image, replicas, resources string
	all := append(append(objs, extra...), monitoring...)
	for i, obj := range all {
		kind, _ := obj["kind"].(string)
		meta, _ := obj["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		raw, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		text := string(raw)
		switch policy, ok := policyTexts[kindAndName(obj)]; {
		case i >= len(objs)+len(extra):
			// The alert rules hold Prometheus' own templates ({{ $labels.x }}): Helm prints them.
			text = monitoringCondition + "\n" + helmLiteral.Replace(text) + "{{- end }}\n"
		case i >= len(objs):
			text = injectionPolicy + "\n" + text + "{{- end }}\n"
		case ok:
			if text, err = withInsertions(text, policy, injectionPolicy); err != nil {
				return fmt.Errorf("%s in policy mode: %w", kindAndName(obj), err)
			}
		case policyRendered != nil:
			return fmt.Errorf("%s is not in the policy-mode rendering: the chart cannot leave objects out", kindAndName(obj))
		}
		switch kind {
		case "Namespace":
			continue
		case "CustomResourceDefinition":
			files[filepath.Join("crds", name+".yaml")] = text
			continue
		case "Deployment":
			if image, replicas, resources, text, err = templateDeployment(text); err != nil {
				return fmt.Errorf("the Deployment %s: %w", name, err)
			}
			text = injectionCheck + text
		case "MutatingWebhookConfiguration":
			if text, err = templateInjectorWebhook(text); err != nil {
				return fmt.Errorf("the MutatingWebhookConfiguration %s: %w", name, err)
			}
		case "Service":
			if strings.Contains(name, "metrics") {
				text = "{{- if .Values.metrics.enabled }}\n" + text + "{{- end }}\n"
			}
		}
		text = strings.ReplaceAll(text, kustomizeNamespace, "{{ .Release.Namespace }}")
		text = strings.ReplaceAll(text, managedByKustomize, "app.kubernetes.io/managed-by: {{ .Release.Service }}")
		files[filepath.Join("templates", fmt.Sprintf("%02d-%s-%s.yaml", i, strings.ToLower(kind), name))] = text
	}
	if image == "" {
		return errors.New("the rendered manifests hold no Deployment")
	}
	repo, tag, ok := strings.Cut(image, ":")
	if !ok {
		return fmt.Errorf("the manager image %q has no tag", image)
	}
	files["Chart.yaml"] = fmt.Sprintf(`# Generated by hack/devtool chart from config/default (make chart); do not edit.
apiVersion: v2
name: sidecarset-operator
description: Injects sidecar containers into opted-in Pods, declared by cluster-scoped SidecarSets.
type: application
version: %s
appVersion: %q
`, version, tag)
	files["values.yaml"] = fmt.Sprintf(`# Generated by hack/devtool chart from config/default (make chart); do not edit.
# The defaults render exactly what `+"`make deploy`"+` applies (cert-manager is required).

image:
  repository: %s
  tag: %s
  # Empty: Kubernetes' default (IfNotPresent for a tag, Always for :latest).
  pullPolicy: ""

# Both replicas serve the webhooks; the elected leader writes status.
replicas: %s

# The manager container's resources.
resources:
%s
webhook:
  # The pod injector's failurePolicy. Fail (the default) refuses an opted-in pod when the
  # injector is unreachable rather than creating it without its sidecars; only pods labelled
  # sidecarset.io/inject=true are ever sent to it.
  failurePolicy: Fail
  # Namespaces never injected, besides kube-system and the release namespace: the API server
  # never sends their pods to the pod injector, the manager (--excluded-namespaces) leaves them
  # out of its policies (injection=policy) and rollouts, and SidecarSet status counts their
  # pods as excluded, as for a namespace labelled sidecarset.io/injection=disabled.
  excludedNamespaces: []
  # Annotation keys SidecarSets may patch onto the pods they inject (spec.patchPodMetadata):
  # exact keys or prefix/* (--patch-pod-metadata-allowed-keys). Empty allows none.
  patchPodMetadataAllowedKeys: []

metrics:
  # Serve metrics over HTTPS on 8443 behind Kubernetes authn/authz, with their Service.
  enabled: true
  # The ServiceMonitor and the alert rules (PrometheusRule) for the Prometheus Operator:
  # "auto" renders them where the cluster serves monitoring.coreos.com/v1, "true" always,
  # "false" never.
  monitoring: auto

# How opted-in pods get their sidecars: "webhook" (the pod webhook injects every one) or
# "policy" (each SidecarSet is compiled into a MutatingAdmissionPolicy that the API server runs,
# so most pods are injected with no webhook call, even while the operator is down; needs
# Kubernetes 1.36 or later and lets the operator write admission policies). What
# config/policy-mode renders; see docs/design/policy-mode.md.
injection: webhook
`, repo, tag, replicas, indent(resources, "  "))
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// injectionCheck refuses a value of injection the chart does not know, naming it.
const injectionCheck = `{{- if not (or (eq .Values.injection "webhook") (eq .Values.injection "policy")) }}
{{- fail (printf "injection: %q is not a mode; use webhook or policy" .Values.injection) }}
{{- end }}
`

func kindAndName(obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	return fmt.Sprintf("%v %v", obj["kind"], meta["name"])
}

// withInsertions returns base with the lines that variant adds to it, each run of them under
// condition. variant must keep every line of base, in order: a chart value can add lines, not
// take any away.
func withInsertions(base, variant, condition string) (string, error) {
	// Each base line is matched to its first occurrence in variant after the previous match:
	// if base is a subsequence of variant at all, this finds it.
	a, b := strings.SplitAfter(base, "\n"), strings.SplitAfter(variant, "\n")
	var out strings.Builder
	i, j := 0, 0
	for j < len(b) {
		if i < len(a) && a[i] == b[j] {
			out.WriteString(a[i])
			i, j = i+1, j+1
			continue
		}
		out.WriteString(condition + "\n")
		for ; j < len(b) && (i >= len(a) || a[i] != b[j]); j++ {
			out.WriteString(b[j])
		}
		out.WriteString("{{- end }}\n")
	}
	if i < len(a) {
		return "", fmt.Errorf("it changes or removes the default rendering's line %q; the chart can only add lines", strings.TrimSpace(a[i]))
	}
	return out.String(), nil
}

func decodeAll(rendered []byte) ([]map[string]any, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(rendered), 4096)
	var objs []map[string]any
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, err
		}
		if len(obj) > 0 {
			objs = append(objs, obj)
		}
	}
}

var (
	imageLine     = regexp.MustCompile(`(?m)^(\s+)image: (\S+)\n`)
	replicasLine  = regexp.MustCompile(`(?m)^  replicas: (\d+)\n`)
	metricsArg    = regexp.MustCompile(`(?m)^(\s+- --metrics-bind-address=):8443\n`)
	resourcesKey  = regexp.MustCompile(`(?m)^(\s+)resources:\n`)
	failurePolicy = regexp.MustCompile(`(?m)^  failurePolicy: Fail\n`)
	excludedList  = regexp.MustCompile(`(?m)^(\s+)- kube-system\n\s+- ` + kustomizeNamespace + `\n`)
)

// templateDeployment puts the image, replicas, resources, the metrics flag and the extra
// excluded namespaces under values, and returns their rendered defaults.
func templateDeployment(text string) (image, replicas, resources, out string, err error) {
	m := imageLine.FindStringSubmatch(text)
	r := replicasLine.FindStringSubmatch(text)
	if err := once(text, imageLine, replicasLine, metricsArg, resourcesKey); err != nil {
		return "", "", "", "", err
	}
	image, replicas = m[2], r[1]
	text = imageLine.ReplaceAllString(text, "${1}image: \"{{ .Values.image.repository }}:{{ .Values.image.tag }}\"\n{{- with .Values.image.pullPolicy }}\n${1}imagePullPolicy: {{ . }}\n{{- end }}\n")
	text = replicasLine.ReplaceAllString(text, "  replicas: {{ .Values.replicas }}\n")
	// The extra excluded namespaces reach the manager too (--excluded-namespaces), after the
	// metrics flag: status, rollouts and policies leave out what the webhook leaves out.
	text = metricsArg.ReplaceAllStringFunc(text, func(line string) string {
		flag := metricsArg.FindStringSubmatch(line)[1]
		item := flag[:strings.Index(flag, "- ")+len("- ")]
		return flag + "{{ if .Values.metrics.enabled }}:8443{{ else }}0{{ end }}\n" +
			"{{- with .Values.webhook.excludedNamespaces }}\n" + item + "--excluded-namespaces={{ join \",\" . }}\n{{- end }}\n" +
			"{{- with .Values.webhook.patchPodMetadataAllowedKeys }}\n" + item + "--patch-pod-metadata-allowed-keys={{ join \",\" . }}\n{{- end }}\n"
	})
	// The resources block: the lines after "resources:" indented deeper than the key.
	loc := resourcesKey.FindStringSubmatchIndex(text)
	keyIndent := loc[3] - loc[2]
	start := loc[1]
	end := start
	for _, line := range strings.SplitAfter(text[start:], "\n") {
		if len(line)-len(strings.TrimLeft(line, " ")) <= keyIndent || strings.TrimSpace(line) == "" {
			break
		}
		end += len(line)
	}
	resources = dedent(text[start:end])
	text = text[:start] + fmt.Sprintf("{{ toYaml .Values.resources | indent %d }}\n", keyIndent+2) + text[end:]
	return image, replicas, resources, text, nil
}

// templateInjectorWebhook puts the pod injector's failurePolicy and extra excluded namespaces
// under values.
func templateInjectorWebhook(text string) (string, error) {
	if err := once(text, failurePolicy, excludedList); err != nil {
		return "", err
	}
	text = failurePolicy.ReplaceAllString(text, "  failurePolicy: {{ .Values.webhook.failurePolicy }}\n")
	return excludedList.ReplaceAllStringFunc(text, func(list string) string {
		indentation := excludedList.FindStringSubmatch(list)[1]
		return list + "{{- range .Values.webhook.excludedNamespaces }}\n" + indentation + "- {{ . }}\n{{- end }}\n"
	}), nil
}

// once checks that every pattern matches exactly once.
func once(text string, patterns ...*regexp.Regexp) error {
	for _, p := range patterns {
		if n := len(p.FindAllStringIndex(text, -1)); n != 1 {
			return fmt.Errorf("the pattern %q matches %d times, want once: the kustomize sources changed; update hack/devtool/chart.go", p, n)
		}
	}
	return nil
}

// dedent removes the common leading spaces of the lines.
func dedent(block string) string {
	lines := strings.Split(strings.TrimRight(block, "\n"), "\n")
	common := -1
	for _, l := range lines {
		if n := len(l) - len(strings.TrimLeft(l, " ")); common < 0 || n < common {
			common = n
		}
	}
	for i := range lines {
		lines[i] = lines[i][common:]
	}
	return strings.Join(lines, "\n") + "\n"
}

func indent(block, prefix string) string {
	lines := strings.Split(strings.TrimRight(block, "\n"), "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}
