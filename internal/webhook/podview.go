package webhook

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/json"
)

// podView is the part of a Pod that injection reads. Decoding only this much is most of what
// makes the injector cheap: a Pod's status, most of its metadata and every spec field but the
// four lists below are skipped, and the JSON patch never needs the rest.
type podView struct {
	Metadata struct {
		Name         string            `json:"name,omitempty"`
		GenerateName string            `json:"generateName,omitempty"`
		Namespace    string            `json:"namespace,omitempty"`
		Labels       map[string]string `json:"labels,omitempty"`
		Annotations  map[string]string `json:"annotations,omitempty"`
	} `json:"metadata"`
	Spec struct {
		Containers       []corev1.Container            `json:"containers,omitempty"`
		InitContainers   []corev1.Container            `json:"initContainers,omitempty"`
		Volumes          []corev1.Volume               `json:"volumes,omitempty"`
		ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
	} `json:"spec"`
}

// decodePod decodes the fields injection needs into a Pod. Decoding is case-sensitive, as the
// API server's is.
func decodePod(raw []byte) (*corev1.Pod, error) {
	var v podView
	if err := json.UnmarshalCaseSensitivePreserveInts(raw, &v); err != nil {
		return nil, err
	}
	m := &v.Metadata
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, GenerateName: m.GenerateName, Namespace: m.Namespace,
			Labels: m.Labels, Annotations: m.Annotations},
		Spec: corev1.PodSpec{Containers: v.Spec.Containers, InitContainers: v.Spec.InitContainers,
			Volumes: v.Spec.Volumes, ImagePullSecrets: v.Spec.ImagePullSecrets},
	}, nil
}
