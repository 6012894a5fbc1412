package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// Document is one object read from the input, and where it came from.
type Document struct {
	Object *unstructured.Unstructured
	// Source is "FILE document N" for messages.
	Source string
}

// ReadDocuments reads every object of a YAML or JSON stream (multi-document YAML, a JSON
// object, or a List), in order. Empty documents are skipped.
func ReadDocuments(r io.Reader, name string) ([]Document, error) {
	if name == "-" {
		name = "standard input"
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	var docs []Document
	for n := 1; ; n++ {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return docs, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s document %d: not valid YAML or JSON: %w", name, n, err)
		}
		if len(m) == 0 {
			continue
		}
		obj := &unstructured.Unstructured{Object: m}
		source := fmt.Sprintf("%s document %d", name, n)
		if obj.GetKind() == "" || obj.GetAPIVersion() == "" {
			return nil, fmt.Errorf("%s: no apiVersion and kind; every document must be a Kubernetes object", source)
		}
		docs = append(docs, Document{Object: obj, Source: source})
	}
}

// templatePaths says where each workload kind keeps its pod template; a Pod is its own.
var templatePaths = map[schema.GroupKind][]string{
	{Kind: "Pod"}:                        nil,
	{Kind: "ReplicationController"}:      {"spec", "template"},
	{Group: "apps", Kind: "Deployment"}:  {"spec", "template"},
	{Group: "apps", Kind: "StatefulSet"}: {"spec", "template"},
	{Group: "apps", Kind: "DaemonSet"}:   {"spec", "template"},
	{Group: "apps", Kind: "ReplicaSet"}:  {"spec", "template"},
	{Group: "batch", Kind: "Job"}:        {"spec", "template"},
	{Group: "batch", Kind: "CronJob"}:    {"spec", "jobTemplate", "spec", "template"},
}

// SupportedKinds names the kinds inject and explain read pods from, for messages.
const SupportedKinds = "Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, ReplicationController, Job, CronJob"

// removedVersions are the workload API versions Kubernetes no longer serves, with the release
// that removed them and the version to use instead: such an object cannot be created, so inject
// passes it through unchanged and says so.
var removedVersions = map[schema.GroupVersion]struct{ removedIn, use string }{
	{Group: "extensions", Version: "v1beta1"}: {"1.16", "apps/v1"},
	{Group: "apps", Version: "v1beta1"}:       {"1.16", "apps/v1"},
	{Group: "apps", Version: "v1beta2"}:       {"1.16", "apps/v1"},
	{Group: "batch", Version: "v1beta1"}:      {"1.25", "batch/v1"},
	{Group: "batch", Version: "v2alpha1"}:     {"1.21", "batch/v1"},
}

// PodOf is the pod a document describes: the Pod itself, or a workload's pod template as a Pod
// in the workload's namespace.
type PodOf struct {
	// Raw is the pod's JSON.
	Raw []byte
	// Namespace is where the pod would be created.
	Namespace string
	// Name names the document in messages: "Deployment shop/web".
	Name string

	doc  *unstructured.Unstructured
	path []string
}

// Pod returns the pod a document describes; defaultNamespace applies when it names none. ok is
// false for every other object (PassedThrough says why): a kind without pods (a Service), a
// custom resource or CustomResourceDefinition, a workload of an API version no longer served.
func Pod(doc *unstructured.Unstructured, defaultNamespace string) (*PodOf, bool, error) {
	gvk := doc.GroupVersionKind()
	path, ok := templatePaths[gvk.GroupKind()]
	if _, removed := removedVersions[gvk.GroupVersion()]; !ok || removed {
		return nil, false, nil
	}
	ns := doc.GetNamespace()
	if ns == "" {
		ns = defaultNamespace
	}
	p := &PodOf{Namespace: ns, Name: fmt.Sprintf("%s %s/%s", gvk.Kind, ns, doc.GetName()), doc: doc, path: path}
	pod := doc.Object
	if path != nil {
		tmpl, found, err := unstructured.NestedMap(doc.Object, path...)
		if err != nil || !found {
			return nil, false, fmt.Errorf("%s: %s is missing or not an object", p.Name, strings.Join(path, "."))
		}
		meta, _ := tmpl["metadata"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
		}
		pod = map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": tmpl["spec"]}
	}
	raw, err := json.Marshal(pod)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", p.Name, err)
	}
	p.Raw = raw
	return p, true, nil
}

// PassedThrough says why inject leaves a document that Pod passed over unchanged, for its
// report on standard error.
func PassedThrough(doc *unstructured.Unstructured) string {
	gvk := doc.GroupVersionKind()
	name := doc.GetName()
	if ns := doc.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	what := fmt.Sprintf("%s %s %s: passed through unchanged", doc.GetAPIVersion(), gvk.Kind, name)
	_, hasTemplate, _ := unstructured.NestedSlice(doc.Object, "spec", "template", "spec", "containers")
	switch removed, isRemoved := removedVersions[gvk.GroupVersion()]; {
	case isRemoved:
		return fmt.Sprintf("%s: Kubernetes no longer serves %s (removed in %s), so it cannot be created; convert it to %s",
			what, gvk.GroupVersion(), removed.removedIn, removed.use)
	case !known(gvk) && hasTemplate:
		return fmt.Sprintf("%s: inject reads the pods of %s only; the webhook injects this %s's pods when they are created",
			what, SupportedKinds, gvk.Kind)
	}
	return what + " (no pod template)"
}

// known reports whether a kind is one Kubernetes or this operator defines.
func known(gvk schema.GroupVersionKind) bool {
	return clientgoscheme.Scheme.Recognizes(gvk) || scheme.Recognizes(gvk)
}

// Replace writes the pod's JSON back into the document it came from, in place: the document
// may be an item of a List, which holds the same map.
func (p *PodOf) Replace(raw []byte) error {
	var pod map[string]any
	if err := json.Unmarshal(raw, &pod); err != nil {
		return err
	}
	if p.path == nil {
		clear(p.doc.Object)
		maps.Copy(p.doc.Object, pod)
		return nil
	}
	tmpl, _, err := unstructured.NestedMap(p.doc.Object, p.path...)
	if err != nil {
		return err
	}
	tmpl["metadata"] = pod["metadata"]
	tmpl["spec"] = pod["spec"]
	return unstructured.SetNestedMap(p.doc.Object, tmpl, p.path...)
}

// eachObject calls fn on every object of the documents in order, source naming it for messages.
// A List, or a typed list such as a PodList (what `kubectl get -o yaml` and the API print), is
// read as its items ("FILE document N item I"), which hold the list's own maps: what fn changes
// in an item is in the list. An item of a typed list without apiVersion and kind (the API
// server leaves them out) gets the list's, as client-go's decoder gives it.
func eachObject(docs []Document, fn func(obj *unstructured.Unstructured, source string) error) error {
	for _, d := range docs {
		if err := eachItem(d.Object, d.Source, fn); err != nil {
			return err
		}
	}
	return nil
}

func eachItem(obj *unstructured.Unstructured, source string, fn func(obj *unstructured.Unstructured, source string) error) error {
	if !obj.IsList() {
		return fn(obj, source)
	}
	items, _ := obj.Object["items"].([]any) // IsList: a slice
	itemKind := strings.TrimSuffix(obj.GetKind(), "List")
	for i, item := range items {
		m, ok := item.(map[string]any)
		itemSource := fmt.Sprintf("%s item %d", source, i)
		if !ok {
			return fmt.Errorf("%s: not an object", itemSource)
		}
		child := &unstructured.Unstructured{Object: m}
		if child.GetKind() == "" && child.GetAPIVersion() == "" && itemKind != "" {
			child.SetAPIVersion(obj.GetAPIVersion())
			child.SetKind(itemKind)
		}
		if err := eachItem(child, itemSource, fn); err != nil {
			return err
		}
	}
	return nil
}

// eachPod is how inject and explain read their input: it calls fn on the pod of every object
// of the documents that describes one (see Pod and eachObject), and other, when not nil, on
// every other object. defaultNamespace applies to objects that name none.
func eachPod(docs []Document, defaultNamespace string, fn func(p *PodOf, source string) error,
	other func(obj *unstructured.Unstructured) error) error {
	return eachObject(docs, func(obj *unstructured.Unstructured, source string) error {
		p, ok, err := Pod(obj, defaultNamespace)
		switch {
		case err != nil:
			return fmt.Errorf("%s: %w", source, err)
		case ok:
			return fn(p, source)
		case other != nil:
			return other(obj)
		}
		return nil
	})
}

// LimitRangesOf returns the LimitRange objects of the documents (lists read as eachObject
// reads them), each in its own namespace or in defaultNamespace: offline, without a cluster to
// read them from, these are the LimitRanges inject and explain judge pods by.
func LimitRangesOf(docs []Document, defaultNamespace string) ([]corev1.LimitRange, error) {
	var out []corev1.LimitRange
	err := eachObject(docs, func(obj *unstructured.Unstructured, source string) error {
		if obj.GroupVersionKind() != corev1.SchemeGroupVersion.WithKind("LimitRange") {
			return nil
		}
		var lr corev1.LimitRange
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, &lr, true); err != nil {
			return fmt.Errorf("%s: LimitRange %q: %w", source, obj.GetName(), err)
		}
		if lr.Namespace == "" {
			lr.Namespace = defaultNamespace
		}
		out = append(out, lr)
		return nil
	})
	return out, err
}

// Inject runs the webhook on every pod the documents describe and writes the results into
// them. It reports, per object that holds a pod, what happened, and names every other object;
// it stops at the first refusal or error, naming the document.
func (e *Engine) Inject(ctx context.Context, docs []Document, defaultNamespace string, report func(string)) error {
	return eachPod(docs, defaultNamespace, func(p *PodOf, source string) error {
		return e.injectOne(ctx, p, source, report)
	}, func(obj *unstructured.Unstructured) error {
		report(PassedThrough(obj))
		return nil
	})
}

func (e *Engine) injectOne(ctx context.Context, p *PodOf, source string, report func(string)) error {
	out, outcome, err := e.InjectPod(ctx, p.Raw, p.Namespace)
	for _, w := range outcome.Warnings {
		report(fmt.Sprintf("%s: warning: %s", p.Name, w))
	}
	if err != nil {
		return fmt.Errorf("%s (%s): %w", source, p.Name, err)
	}
	if !outcome.Changed {
		report(fmt.Sprintf("%s: unchanged: %s", p.Name, outcome.Message))
		return nil
	}
	report(fmt.Sprintf("%s: injected %s", p.Name, strings.Join(injectedSets(out), ", ")))
	return p.Replace(out)
}

// injectedSets names the SidecarSets a pod's status annotation records.
func injectedSets(raw []byte) []string {
	var pod struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if json.Unmarshal(raw, &pod) != nil {
		return nil
	}
	records, err := inject.ParseRecords(pod.Metadata.Annotations)
	if err != nil {
		return nil
	}
	return records.Names()
}
