package integration

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/validation/validationtest"
)

// TestValidationCorpus proves, shape by shape, that a SidecarSet the API server would make
// every matching pod fail is refused: first the shape is refused by the real kube-apiserver
// inside a pod (server-side dry run), then as a new SidecarSet, then as an update of a valid
// one, each time naming the field.
func TestValidationCorpus(t *testing.T) {
	ns := newNamespace(t, nil)
	valid := &appsv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "corpus-base"}, Spec: validationtest.Valid()}
	valid.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "corpus"}}
	createSet(t, valid)
	for i, shape := range validationtest.Corpus {
		t.Run(shape.Name, func(t *testing.T) {
			spec := validationtest.Valid()
			shape.Break(&spec)
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("corpus-%d", i)}}
			for _, c := range spec.Containers {
				pod.Spec.Containers = append(pod.Spec.Containers, c.Container)
			}
			for _, c := range spec.InitContainers {
				pod.Spec.InitContainers = append(pod.Spec.InitContainers, c.Container)
			}
			pod.Spec.Volumes = spec.Volumes
			err := k8s.Create(ctx, pod, client.DryRunAll)
			if strings.HasSuffix(shape.PodPath, "imagePullPolicy") {
				// AlwaysPullImages, on in this suite as in multi-tenant clusters, sets every
				// container's policy before validation, so this shape only fails pods in
				// clusters without it; the unit corpus shows Kubernetes' validation refusing it.
				if err != nil {
					t.Errorf("the shape in a pod under AlwaysPullImages: %v, want it rewritten and admitted", err)
				}
			} else if dropped := droppedRestartPolicy(shape.PodPath, pod); err == nil && dropped != "" {
				// Kubernetes 1.34 drops a container's restartPolicy other than Always while
				// ContainerRestartRules is off (and later ones with it turned off), before
				// validation: the pod is admitted without it. The SidecarSet is refused all
				// the same (below).
				t.Logf("the shape in a pod: Kubernetes 1.%d admitted it with %s dropped", kubernetesMinor, dropped)
			} else {
				assertRefusedAt(t, "the shape in a pod", err, shape.PodPath)
			}

			set := &appsv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("corpus-%d", i)}, Spec: spec}
			set.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "corpus"}}
			err = k8s.Create(ctx, set)
			if err == nil {
				t.Cleanup(func() { deleteIgnoreNotFound(t, set) })
			}
			assertRefusedAt(t, "the shape as a new SidecarSet", err, shape.Path)

			err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				var current appsv1alpha1.SidecarSet
				if err := k8s.Get(ctx, client.ObjectKeyFromObject(valid), &current); err != nil {
					return err
				}
				current.Spec.Containers, current.Spec.InitContainers, current.Spec.Volumes = spec.Containers, spec.InitContainers, spec.Volumes
				return k8s.Update(ctx, &current)
			})
			assertRefusedAt(t, "the shape as an update", err, shape.Path)
		})
	}
}

func assertRefusedAt(t *testing.T, what string, err error, path string) {
	t.Helper()
	if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) && !apierrors.IsBadRequest(err) {
		t.Errorf("%s: want a refusal, got %v", what, err)
		return
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("%s: refusal does not name %s: %v", what, path, err)
	}
}

// droppedRestartPolicy names the restartPolicy field of the shape's init container when the
// API server dropped it from the admitted pod, as 1.34 does (ContainerRestartRules, alpha and off
// there, beta and on from 1.35), and later ones with the gate turned off; empty when the shape is
// another, or the field is still there, or the server is one that refuses it.
func droppedRestartPolicy(podPath string, admitted *corev1.Pod) string {
	gated := kubernetesMinor == 34 || kubernetesMinor > 34 && gateOff("ContainerRestartRules")
	if !gated || podPath != "spec.initContainers[0].restartPolicy" ||
		len(admitted.Spec.InitContainers) == 0 || admitted.Spec.InitContainers[0].RestartPolicy != nil {
		return ""
	}
	return podPath
}
