package cli

import (
	"fmt"
	"io"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/config/crd/bases"
)

// ReadSidecarSets reads SidecarSets from a file (multi-document YAML, JSON, a List or a
// SidecarSetList) and defaults them with the CRD's schema, as the API server would have: their
// hashes, and so the records injected pods carry, are the ones the cluster's copies would have.
func ReadSidecarSets(r io.Reader, name string) ([]*appsv1alpha1.SidecarSet, error) {
	docs, err := ReadDocuments(r, name)
	if err != nil {
		return nil, err
	}
	schema, err := sidecarSetSchema()
	if err != nil {
		return nil, err
	}
	var out []*appsv1alpha1.SidecarSet
	err = eachObject(docs, func(obj *unstructured.Unstructured, source string) error {
		if gvk := obj.GroupVersionKind(); gvk != appsv1alpha1.GroupVersion.WithKind("SidecarSet") {
			return fmt.Errorf("%s: %s %q is not a SidecarSet (%s)", source, gvk.Kind, obj.GetName(), appsv1alpha1.GroupVersion)
		}
		structuraldefaulting.Default(obj.Object, schema)
		set := &appsv1alpha1.SidecarSet{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, set, true); err != nil {
			return fmt.Errorf("%s: SidecarSet %q: %w", source, obj.GetName(), err)
		}
		if set.Name == "" {
			return fmt.Errorf("%s: a SidecarSet without metadata.name", source)
		}
		out = append(out, set)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// sidecarSetSchema is the structural schema of the served version of the embedded CRD.
func sidecarSetSchema() (*structuralschema.Structural, error) {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(bases.SidecarSets, &crd); err != nil {
		return nil, fmt.Errorf("reading the embedded CRD: %w", err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name != appsv1alpha1.GroupVersion.Version || v.Schema == nil {
			continue
		}
		var internal apiextensionsinternal.JSONSchemaProps
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &internal, nil); err != nil {
			return nil, err
		}
		return structuralschema.NewStructural(&internal)
	}
	return nil, fmt.Errorf("the embedded CRD has no schema for %s", appsv1alpha1.GroupVersion)
}
