package validation_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/podrules"
	"github.com/sidecarset/sidecarset-operator/internal/validation"
	"github.com/sidecarset/sidecarset-operator/internal/validation/validationtest"
)

func corpusSet(spec appsv1alpha1.SidecarSetSpec) *appsv1alpha1.SidecarSet {
	spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "corpus"}}
	return &appsv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "corpus"}, Spec: spec}
}

// corpusPod is the shape inside a pod: the sidecars as the pod's containers, the set's init
// containers and volumes as the pod's.
func corpusPod(spec *appsv1alpha1.SidecarSetSpec) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "corpus", Namespace: "default"}}
	for _, c := range spec.Containers {
		pod.Spec.Containers = append(pod.Spec.Containers, c.Container)
	}
	for _, c := range spec.InitContainers {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, c.Container)
	}
	pod.Spec.Volumes = spec.Volumes
	return pod
}

// TestCorpusRefusedAsPodAndAsSidecarSet: each shape is refused by Kubernetes' pod validation
// inside a pod, and as a SidecarSet with the path of the field the user wrote.
func TestCorpusRefusedAsPodAndAsSidecarSet(t *testing.T) {
	valid := validationtest.Valid()
	if errs := validation.ValidateSidecarSet(corpusSet(valid), nil); len(errs) > 0 {
		t.Fatalf("the corpus's starting set is invalid: %v", errs)
	}
	for _, shape := range validationtest.Corpus {
		t.Run(shape.Name, func(t *testing.T) {
			spec := validationtest.Valid()
			shape.Break(&spec)
			if errs := podrules.ValidateCreate(corpusPod(&spec)); !hasPath(errs.ToAggregate(), shape.PodPath) {
				t.Errorf("as a pod: want an error at %s, got %v", shape.PodPath, errs)
			}
			errs := validation.ValidateSidecarSet(corpusSet(spec), nil)
			var paths []string
			for _, e := range errs {
				paths = append(paths, e.Field)
				if strings.HasPrefix(e.Field, shape.Path) && e.Detail != "" {
					return
				}
			}
			t.Errorf("as a SidecarSet: want an error at %s with a detail, got errors at %v: %v", shape.Path, paths, errs)
		})
	}
}

func hasPath(err error, path string) bool { return err != nil && strings.Contains(err.Error(), path) }

// TestValidSetsHaveNoPlaceholderErrors: valid sets that mount the pod's own volumes, use
// volume devices or native sidecars produce no error (the placeholders make a valid pod).
func TestValidSetsHaveNoPlaceholderErrors(t *testing.T) {
	spec := validationtest.Valid()
	spec.Containers[0].ShareVolumePolicy.Type = appsv1alpha1.ShareVolumePolicyEnabled // may mount the pod's volumes
	c := &spec.Containers[0].Container
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "app-logs", MountPath: "/var/log/app"})
	c.VolumeDevices = []corev1.VolumeDevice{{Name: "raw", DevicePath: "/dev/raw"}}
	always := corev1.ContainerRestartPolicyAlways
	spec.InitContainers = []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "proxy", Image: "registry.example/proxy:1",
		RestartPolicy: &always, StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}}}}
	if errs := validation.ValidateSidecarSet(corpusSet(spec), nil); len(errs) > 0 {
		t.Errorf("valid set refused: %v", errs)
	}
}
