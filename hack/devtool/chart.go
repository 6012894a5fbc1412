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

// localNodeCondition renders what config/local-node changes in config/default: the local
// cluster's real node (hack/node.sh), which has no pod network.
const localNodeCondition = `{{- if .Values.localNode }}`

// chartSources are the kustomize renderings a chart is generated from.
type chartSources struct {
	// Default is config/default: the chart with its default values.
	Default []byte
	// Policy is config/policy-mode, rendered under injection=policy: its extra objects, and
	// the lines it adds to the default's. Nil: no policy mode.
	Policy []byte
	// Monitoring is config/monitoring (the ServiceMonitor and alert rules), rendered under
	// monitoringCondition. Nil: none.
	Monitoring []byte
	// LocalNode is config/local-node, rendered under localNode=true: the lines it changes in
	// the default's objects. Nil: no such value.
	LocalNode []byte
}

// writeChart turns `kustomize build config/default` (rendered) into a Helm chart in dir: the
// same objects, with the release namespace for sidecarset-system and values for the image,
// replicas, resources, extra environment, the pod webhook's failurePolicy and extra excluded
// namespaces, and metrics. The CRD goes to crds/; the Namespace is left to `helm install
// --create-namespace`. The other renderings of src come under their values' conditions (see
// chartSources). Every substitution must apply exactly where expected: a change in the kustomize
// sources that moves one fails here instead of producing a chart that silently ignores a value.
func writeChart(src chartSources, dir, version string) error {
	objs, err := decodeAll(src.Default)
	if err != nil {
		return err
	}
	monitoring, err := decodeAll(src.Monitoring)
	if err != nil {
		return err
	}
	policyTexts, policyObjs, err := textsByObject(src.Policy)
	if err != nil {
		return err
	}
	localTexts, _, err := textsByObject(src.LocalNode)
	if err != nil {
		return err
	}
	var extra []map[string]any // objects only policy mode has, in its order
	for _, obj := range policyObjs {
		if !slices.ContainsFunc(objs, func(o map[string]any) bool { return kindAndName(o) == kindAndName(obj) }) {
			extra = append(extra, obj)
		}
	}
	files := map[string]string{}
	var values deploymentValues
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
		switch kind {
		case "Namespace":
			continue
		case "CustomResourceDefinition":
			files[filepath.Join("crds", name+".yaml")] = text
			continue
		}
		switch {
		case i >= len(objs)+len(extra):
			// The alert rules hold Prometheus' own templates ({{ $labels.x }}): Helm prints them.
			text = monitoringCondition + "\n" + helmLiteral.Replace(text) + "{{- end }}\n"
		case i >= len(objs):
			text = injectionPolicy + "\n" + text + "{{- end }}\n"
		default:
			// One of config/default's objects: the same templating for each rendering of it,
			// then the lines the others change, under their conditions.
			var rendered deploymentValues
			if text, rendered, err = templateObject(kind, text, true); err != nil {
				return fmt.Errorf("the %s %s: %w", kind, name, err)
			}
			if kind == "Deployment" {
				values = rendered
			}
			var variants []variant
			if src.Policy != nil {
				policy, ok := policyTexts[kindAndName(obj)]
				if !ok {
					return fmt.Errorf("%s is not in the policy-mode rendering: the chart cannot leave objects out", kindAndName(obj))
				}
				if policy, _, err = templateObject(kind, policy, true); err != nil {
					return fmt.Errorf("the %s %s in policy mode: %w", kind, name, err)
				}
				variants = append(variants, variant{text: policy, condition: injectionPolicy, insertOnly: true})
			}
			if local, ok := localTexts[kindAndName(obj)]; ok {
				// The local node runs the one replica config/local-node says, whatever
				// the replicas value.
				if local, _, err = templateObject(kind, local, false); err != nil {
					return fmt.Errorf("the %s %s on the local node: %w", kind, name, err)
				}
				variants = append(variants, variant{text: local, condition: localNodeCondition})
			} else if src.LocalNode != nil {
				return fmt.Errorf("%s is not in the local-node rendering: the chart cannot leave objects out", kindAndName(obj))
			}
			if text, err = withVariants(text, variants...); err != nil {
				return fmt.Errorf("%s: %w", kindAndName(obj), err)
			}
		}
		switch kind {
		case "Deployment":
			text = injectionCheck + text
		case "Service":
			if strings.Contains(name, "metrics") {
				text = "{{- if .Values.metrics.enabled }}\n" + text + "{{- end }}\n"
			}
		case "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			text = "{{- if .Values.pinnedImagesPolicy }}\n" + text + "{{- end }}\n"
		}
		text = strings.ReplaceAll(text, kustomizeNamespace, "{{ .Release.Namespace }}")
		text = strings.ReplaceAll(text, managedByKustomize, "app.kubernetes.io/managed-by: {{ .Release.Service }}")
		files[filepath.Join("templates", fmt.Sprintf("%02d-%s-%s.yaml", i, strings.ToLower(kind), name))] = text
	}
	if values.image == "" {
		return errors.New("the rendered manifests hold no Deployment")
	}
	repo, tag, ok := strings.Cut(values.image, ":")
	if !ok {
		return fmt.Errorf("the manager image %q has no tag", values.image)
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
# Environment variables for the manager container, after the ones it always sets
# (a list of EnvVar, as in a container spec).
env: []

# The final-state check of pinned sidecar images: a ValidatingAdmissionPolicy refusing a pod
# whose sidecar injected with a digest (annotation sidecarset.io/images) runs another image,
# changed by a mutating webhook called after the pod injector. It reads only the pod.
pinnedImagesPolicy: true

# Registries (host:port) from which the operator reads the digests of SidecarSets' images
# (spec.imagePolicy.pin: Digest) over plain HTTP rather than HTTPS (--insecure-registries).
insecureRegistries: []

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

# Run on the local cluster's real node (make local-cluster, hack/node.sh), which has no pod
# network: the host's network, one replica whatever replicas says (replaced, not rolled: a second
# would need the same ports), every server on 127.0.0.1 on ports of its own (webhook 19443,
# metrics 18443, probes 18081), and the API server calling the webhooks at
# https://127.0.0.1:19443, the address the serving certificate names. What config/local-node
# renders. The release namespace must allow host networking (Pod Security "privileged"), and
# the manager needs the API server's address in env (hack/node.sh helm-values writes both
# values). For that node only.
localNode: false
`, repo, tag, values.replicas, indent(values.resources, "  "))
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

// A variant is another rendering of an object, rendered under a condition.
type variant struct {
	text, condition string
	// insertOnly refuses a variant that changes or removes a line of the base.
	insertOnly bool
}

// withVariants returns base with each variant's differences from it under the variant's
// condition: lines a variant adds as an if block, lines it changes as if/else. Two variants may
// not change the same lines, nor may one add lines inside lines another changes.
func withVariants(base string, variants ...variant) (string, error) {
	a := strings.SplitAfter(base, "\n")
	var hunks []hunk
	for _, v := range variants {
		for _, h := range diffLines(a, strings.SplitAfter(v.text, "\n")) {
			if v.insertOnly && h.to > h.from {
				return "", fmt.Errorf("it changes or removes the default rendering's line %q; the chart can only add lines", strings.TrimSpace(a[h.from]))
			}
			h.condition = v.condition
			hunks = append(hunks, h)
		}
	}
	// In base order; at one place, additions before changes.
	slices.SortStableFunc(hunks, func(x, y hunk) int {
		if x.from != y.from {
			return x.from - y.from
		}
		return (x.to - x.from) - (y.to - y.from)
	})
	var out strings.Builder
	i := 0
	for _, h := range hunks {
		if h.from < i {
			return "", fmt.Errorf("two renderings change the default rendering's line %q", strings.TrimSpace(a[h.from]))
		}
		out.WriteString(strings.Join(a[i:h.from], ""))
		out.WriteString(h.condition + "\n" + strings.Join(h.lines, ""))
		if h.to > h.from {
			out.WriteString("{{- else }}\n" + strings.Join(a[h.from:h.to], ""))
		}
		out.WriteString("{{- end }}\n")
		i = h.to
	}
	out.WriteString(strings.Join(a[i:], ""))
	return out.String(), nil
}

// A hunk replaces the base lines [from, to) by lines (from == to: adds them before from).
type hunk struct {
	from, to  int
	lines     []string
	condition string
}

// diffLines returns the hunks that turn a into b, from their longest common subsequence, each
// line matched as early as it can be.
func diffLines(a, b []string) []hunk {
	// common[i][j] is the length of the longest common subsequence of a[i:] and b[j:].
	common := make([][]int, len(a)+1)
	for i := range common {
		common[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				common[i][j] = common[i+1][j+1] + 1
			} else {
				common[i][j] = max(common[i+1][j], common[i][j+1])
			}
		}
	}
	var hunks []hunk
	i, j := 0, 0
	same := func() bool { return i < len(a) && j < len(b) && a[i] == b[j] }
	for i < len(a) || j < len(b) {
		if same() {
			i, j = i+1, j+1
			continue
		}
		h := hunk{from: i}
		for (i < len(a) || j < len(b)) && !same() {
			if j < len(b) && (i == len(a) || common[i][j+1] >= common[i+1][j]) {
				h.lines = append(h.lines, b[j])
				j++
			} else {
				i++
			}
		}
		h.to = i
		hunks = append(hunks, h)
	}
	return hunks
}

// textsByObject decodes a rendering and marshals each object, by kind and name.
func textsByObject(rendered []byte) (map[string]string, []map[string]any, error) {
	objs, err := decodeAll(rendered)
	if err != nil {
		return nil, nil, err
	}
	texts := map[string]string{}
	for _, obj := range objs {
		raw, err := yaml.Marshal(obj)
		if err != nil {
			return nil, nil, err
		}
		texts[kindAndName(obj)] = string(raw)
	}
	return texts, objs, nil
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
	metricsArg    = regexp.MustCompile(`(?m)^(\s+- --metrics-bind-address=)(\S+)\n`)
	resourcesKey  = regexp.MustCompile(`(?m)^(\s+)resources:\n`)
	envKey        = regexp.MustCompile(`(?m)^(\s+)env:\n`)
	failurePolicy = regexp.MustCompile(`(?m)^  failurePolicy: Fail\n`)
	excludedList  = regexp.MustCompile(`(?m)^(\s+)- kube-system\n\s+- ` + kustomizeNamespace + `\n`)
)

// deploymentValues are the rendered defaults of the manager Deployment's values.
type deploymentValues struct {
	image, replicas, resources string
}

// templateObject puts the values of an object of config/default, in any of its renderings,
// under values: the Deployment's (its replicas only with replicas set) and the pod injector's.
func templateObject(kind, text string, replicas bool) (string, deploymentValues, error) {
	switch kind {
	case "Deployment":
		return templateDeployment(text, replicas)
	case "MutatingWebhookConfiguration":
		text, err := templateInjectorWebhook(text)
		return text, deploymentValues{}, err
	}
	return text, deploymentValues{}, nil
}

// templateDeployment puts the image, replicas (with replicas set), resources, extra
// environment, the metrics flag and the extra excluded namespaces under values, and returns
// their rendered defaults.
func templateDeployment(text string, replicas bool) (string, deploymentValues, error) {
	m := imageLine.FindStringSubmatch(text)
	r := replicasLine.FindStringSubmatch(text)
	if err := once(text, imageLine, replicasLine, metricsArg, resourcesKey, envKey); err != nil {
		return "", deploymentValues{}, err
	}
	values := deploymentValues{image: m[2], replicas: r[1]}
	text = imageLine.ReplaceAllString(text, "${1}image: \"{{ .Values.image.repository }}:{{ .Values.image.tag }}\"\n{{- with .Values.image.pullPolicy }}\n${1}imagePullPolicy: {{ . }}\n{{- end }}\n")
	if replicas {
		text = replicasLine.ReplaceAllString(text, "  replicas: {{ .Values.replicas }}\n")
	}
	// The extra excluded namespaces reach the manager too (--excluded-namespaces), after the
	// metrics flag: status, rollouts and policies leave out what the webhook leaves out.
	text = metricsArg.ReplaceAllStringFunc(text, func(line string) string {
		m := metricsArg.FindStringSubmatch(line)
		flag := m[1]
		item := flag[:strings.Index(flag, "- ")+len("- ")]
		return flag + "{{ if .Values.metrics.enabled }}" + m[2] + "{{ else }}0{{ end }}\n" +
			"{{- with .Values.webhook.excludedNamespaces }}\n" + item + "--excluded-namespaces={{ join \",\" . }}\n{{- end }}\n" +
			"{{- with .Values.webhook.patchPodMetadataAllowedKeys }}\n" + item + "--patch-pod-metadata-allowed-keys={{ join \",\" . }}\n{{- end }}\n" +
			"{{- with .Values.insecureRegistries }}\n" + item + "--insecure-registries={{ join \",\" . }}\n{{- end }}\n"
	})
	// The resources block: the lines after "resources:" indented deeper than the key.
	start, end, keyIndent := block(text, resourcesKey)
	values.resources = dedent(text[start:end])
	text = text[:start] + fmt.Sprintf("{{ toYaml .Values.resources | indent %d }}\n", keyIndent+2) + text[end:]
	// The extra environment, after the container's own.
	_, end, keyIndent = block(text, envKey)
	text = text[:end] + fmt.Sprintf("{{- with .Values.env }}\n{{ toYaml . | indent %d }}\n{{- end }}\n", keyIndent) + text[end:]
	return text, values, nil
}

// block returns where the value of the key key matches (once) starts and ends in text, and the
// key's indentation: the lines after it indented deeper, or as deep when they are list items.
func block(text string, key *regexp.Regexp) (start, end, keyIndent int) {
	loc := key.FindStringSubmatchIndex(text)
	keyIndent = loc[3] - loc[2]
	start, end = loc[1], loc[1]
	for _, line := range strings.SplitAfter(text[start:], "\n") {
		lineIndent := len(line) - len(strings.TrimLeft(line, " "))
		if strings.TrimSpace(line) == "" || lineIndent < keyIndent || lineIndent == keyIndent && !strings.HasPrefix(line[lineIndent:], "- ") {
			break
		}
		end += len(line)
	}
	return start, end, keyIndent
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
