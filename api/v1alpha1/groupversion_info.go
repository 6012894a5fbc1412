// Package v1alpha1 contains the SidecarSet API of the apps.sidecarset.io group.
//
// +kubebuilder:object:generate=true
// +groupName=apps.sidecarset.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every object in this package.
	GroupVersion = schema.GroupVersion{Group: "apps.sidecarset.io", Version: "v1alpha1"}

	// SchemeBuilder registers this package's types with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types in this group-version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &SidecarSet{}, &SidecarSetList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
