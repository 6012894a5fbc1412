package builders_test

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/test/builders"
)

// TestSidecarSet: each option changes exactly the field its doc names, options apply in order
// and lists grow rather than being replaced.
func TestSidecarSet(t *testing.T) {
	agent := corev1.Container{Name: "agent", Image: "agent:1"}
	config := corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	for _, tc := range []struct {
		name string
		opts []builders.SetOption
		want appsv1alpha1.SidecarSet
	}{
		{"name only", nil, appsv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "s"}}},
		{"no containers leave the list nil", []builders.SetOption{builders.WithContainers()}, appsv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "s"}}},
		{"typed", []builders.SetOption{builders.Typed()}, appsv1alpha1.SidecarSet{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps.sidecarset.io/v1alpha1", Kind: "SidecarSet"},
			ObjectMeta: metav1.ObjectMeta{Name: "s"}}},
		{"metadata", []builders.SetOption{builders.ResourceVersion("7"), builders.Generation(3)},
			appsv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "s", ResourceVersion: "7", Generation: 3}}},
		{"selecting, rolling", []builders.SetOption{builders.Selecting("web"), builders.Rolling()}, appsv1alpha1.SidecarSet{
			ObjectMeta: metav1.ObjectMeta{Name: "s"},
			Spec: appsv1alpha1.SidecarSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				UpdateStrategy: appsv1alpha1.UpdateStrategy{Type: appsv1alpha1.RollingUpdate}}}},
		{"sidecars in order", []builders.SetOption{
			builders.WithImage("img:1"), builders.WithContainers(agent),
			builders.WithSidecars(appsv1alpha1.SidecarContainer{Container: agent, PodInjectPolicy: appsv1alpha1.BeforeAppContainer}),
		}, appsv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: appsv1alpha1.SidecarSetSpec{Containers: []appsv1alpha1.SidecarContainer{
			{Container: corev1.Container{Name: "s", Image: "img:1"}}, {Container: agent},
			{Container: agent, PodInjectPolicy: appsv1alpha1.BeforeAppContainer}}}}},
		{"volumes and pull secrets", []builders.SetOption{builders.WithVolumes(config), builders.WithPullSecrets("a", "b")},
			appsv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: appsv1alpha1.SidecarSetSpec{Volumes: []corev1.Volume{config},
				ImagePullSecrets: []corev1.LocalObjectReference{{Name: "a"}, {Name: "b"}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := builders.SidecarSet("s", tc.opts...); !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("got\n%#v\nwant\n%#v", *got, tc.want)
			}
		})
	}
}

// TestPod: the options build the Pod their docs say; labels are merged in any order and
// copied, so a map shared by many pods is never written through one of them.
func TestPod(t *testing.T) {
	app := corev1.Container{Name: "app", Image: "app:1"}
	data := corev1.Volume{Name: "data"}
	shared := map[string]string{"app": "web"}
	got := builders.Pod("ns", "p", builders.Typed(), builders.WithLabels(shared), builders.OptedIn(),
		builders.WithContainers(app), builders.WithVolumes(data), builders.ResourceVersion("2"))
	want := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", ResourceVersion: "2",
			Labels: map[string]string{"app": "web", appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{app}, Volumes: []corev1.Volume{data}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%#v\nwant\n%#v", got, want)
	}
	got.Labels["app"] = "changed"
	if shared["app"] != "web" {
		t.Error("the pod shares the caller's labels map")
	}
	spec := corev1.PodSpec{NodeName: "n"}
	if got := builders.Pod("ns", "p", builders.WithContainers(app), builders.WithSpec(spec)); !reflect.DeepEqual(got.Spec, spec) {
		t.Errorf("WithSpec kept %#v, want the spec replaced by %#v", got.Spec, spec)
	}
	if got := builders.Pod("ns", "p", builders.WithLabels(nil)); got.Labels != nil {
		t.Errorf("no labels: got %v, want nil", got.Labels)
	}
}

// TestKwokPodSpec: the benchmarks' pod goes to a kwok node (its selector and toleration) and
// passes the restricted Pod Security Standard the operator's namespace enforces.
func TestKwokPodSpec(t *testing.T) {
	spec := builders.KwokPodSpec()
	app := spec.Containers[0].SecurityContext
	switch {
	case spec.NodeSelector["type"] != "kwok" || len(spec.Tolerations) != 1 || spec.Tolerations[0].Key != "kwok.x-k8s.io/node":
		t.Errorf("not scheduled to kwok nodes: %v, %v", spec.NodeSelector, spec.Tolerations)
	case spec.SecurityContext.RunAsNonRoot == nil || !*spec.SecurityContext.RunAsNonRoot ||
		spec.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("the pod's security context is not restricted: %+v", spec.SecurityContext)
	case app.AllowPrivilegeEscalation == nil || *app.AllowPrivilegeEscalation || len(app.Capabilities.Drop) != 1 || app.Capabilities.Drop[0] != "ALL":
		t.Errorf("the app's security context is not restricted: %+v", app)
	}
}
