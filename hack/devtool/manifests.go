package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// installedKinds are what an operator running on the host needs from config/default, in the
// order they are applied; the last two are rewritten.
var installedKinds = []string{"Namespace", "CustomResourceDefinition", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}

// installManifests selects the Namespace(s), CRD(s) and webhook configurations of the rendered
// kustomize YAML and points every webhook at urlBase+path with caBundle ca, instead of the
// in-cluster Service cert-manager would serve; cert-manager's CA-injection annotation goes.
// Selectors, rules and everything else stay as rendered. The result is a JSON List.
func installManifests(rendered []byte, urlBase string, ca []byte) ([]byte, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(rendered), 4096)
	var objs []map[string]any
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, err
		}
		if kind, _ := obj["kind"].(string); slices.Contains(installedKinds, kind) {
			objs = append(objs, obj)
		}
	}
	for _, kind := range installedKinds {
		if !slices.ContainsFunc(objs, func(o map[string]any) bool { return o["kind"] == kind }) {
			return nil, fmt.Errorf("no %s in the rendered manifests", kind)
		}
	}
	caBundle := base64.StdEncoding.EncodeToString(ca)
	for _, o := range objs {
		if kind := o["kind"].(string); strings.HasSuffix(kind, "WebhookConfiguration") {
			if err := pointWebhooks(o, urlBase, caBundle); err != nil {
				return nil, err
			}
		}
	}
	slices.SortStableFunc(objs, func(a, b map[string]any) int {
		return slices.Index(installedKinds, a["kind"].(string)) - slices.Index(installedKinds, b["kind"].(string))
	})
	return json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": objs})
}

func pointWebhooks(o map[string]any, urlBase, caBundle string) error {
	meta, _ := o["metadata"].(map[string]any)
	if ann, ok := meta["annotations"].(map[string]any); ok {
		delete(ann, "cert-manager.io/inject-ca-from")
		if len(ann) == 0 {
			delete(meta, "annotations")
		}
	}
	hooks, _ := o["webhooks"].([]any)
	for _, h := range hooks {
		hook, _ := h.(map[string]any)
		cc, _ := hook["clientConfig"].(map[string]any)
		svc, ok := cc["service"].(map[string]any)
		if !ok {
			return fmt.Errorf("%s %v: webhook %v has no clientConfig.service to rewrite", o["kind"], meta["name"], hook["name"])
		}
		path, _ := svc["path"].(string)
		if path == "" {
			path = "/"
		}
		hook["clientConfig"] = map[string]any{"url": urlBase + path, "caBundle": caBundle}
	}
	return nil
}

// jsonField returns the string (or number, or bool) at the dot-separated path of a JSON object;
// def when it is missing and hasDef, an error otherwise.
func jsonField(doc []byte, path, def string, hasDef bool) (string, error) {
	var v any
	if err := yaml.Unmarshal(doc, &v); err != nil {
		return "", err
	}
	for _, key := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			v = nil
			break
		}
		v = m[key]
	}
	switch t := v.(type) {
	case nil:
		if hasDef {
			return def, nil
		}
		return "", fmt.Errorf("json-field: no %s in the document", path)
	case string:
		return t, nil
	default:
		return fmt.Sprint(t), nil
	}
}

// listNames returns resource/name for every item of the JSON List whose kind is kind.
func listNames(doc []byte, kind, resource string) ([]string, error) {
	var list struct {
		Items []struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal(doc, &list); err != nil {
		return nil, err
	}
	var out []string
	for _, it := range list.Items {
		if it.Kind == kind {
			out = append(out, resource+"/"+it.Metadata.Name)
		}
	}
	return out, nil
}
