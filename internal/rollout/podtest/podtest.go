// Package podtest builds the SidecarSets and Pods that the rollout's and the status's table
// tests classify: a compiled set selecting app=demo, and Pods shaped by options the way the
// API server and the kubelet would leave them. It is for tests only.
package podtest

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// Scope is the gate scope the tests run under: the operator's namespace is sidecarset-system.
var Scope = inject.Scope{OperatorNamespace: "sidecarset-system"}

// Set compiles a SidecarSet selecting app=demo (and namespaces with nsLabels when given) at
// generation 3, with one sidecar named like the set.
func Set(t testing.TB, name string, nsLabels map[string]string, mutate ...func(*appsv1alpha1.SidecarSet)) *inject.CompiledSet {
	t.Helper()
	set := &appsv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 3, ResourceVersion: "7"},
		Spec: appsv1alpha1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "demo"}},
			Containers: []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: name, Image: "registry.example/" + name + ":1"}}},
		},
	}
	if nsLabels != nil {
		set.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: nsLabels}
	}
	for _, m := range mutate {
		m(set)
	}
	c, err := inject.Compile(set)
	if err != nil {
		t.Fatalf("compiling %s: %v", name, err)
	}
	return c
}

// Opt shapes a test Pod.
type Opt func(*corev1.Pod)

// Pod is a running, opted-in app=demo Pod in namespace "shop", neither injected nor Ready,
// shaped by opts.
func Pod(opts ...Opt) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "shop",
			Labels: map[string]string{"app": "demo", appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(pod)
	}
	return pod
}

// InjectedWith records that each set injected the Pod with the given hash.
func InjectedWith(hashes map[string]string) Opt {
	return func(p *corev1.Pod) {
		recs := inject.Records{}
		for set, hash := range hashes {
			recs[set] = inject.Record{Hash: hash, Containers: []string{set}}
		}
		SetAnnotation(p, appsv1alpha1.StatusAnnotation, recs.Encode())
	}
}

// SetAnnotation sets one annotation of the Pod.
func SetAnnotation(p *corev1.Pod, k, v string) {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[k] = v
}

// Ready schedules the Pod and gives it a Ready condition of that status.
func Ready(status corev1.ConditionStatus) Opt {
	return func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions,
			corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			corev1.PodCondition{Type: corev1.PodReady, Status: status})
	}
}

// Phase sets the Pod's phase.
func Phase(ph corev1.PodPhase) Opt { return func(p *corev1.Pod) { p.Status.Phase = ph } }

// Label sets one label of the Pod.
func Label(k, v string) Opt { return func(p *corev1.Pod) { p.Labels[k] = v } }

// InNamespace moves the Pod to namespace ns.
func InNamespace(ns string) Opt { return func(p *corev1.Pod) { p.Namespace = ns } }

// Running reports the container as running image, Ready, as the kubelet does.
func Running(name, image string) Opt {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: name, Image: image, Ready: true})
	}
}

// Stopping reports the container's old instance as still running image, Ready, as the
// kubelet does while it waits for it to exit after SIGTERM.
func Stopping(name, image string) Opt {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: name, Image: image, Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}})
	}
}

// Spec gives the Pod a container of that image in its spec.
func Spec(name, image string) Opt {
	return func(p *corev1.Pod) {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: name, Image: image})
	}
}

// Generations sets the Pod's generation and the one its kubelet reports observing.
func Generations(generation, observed int64) Opt {
	return func(p *corev1.Pod) {
		p.Generation, p.Status.ObservedGeneration = generation, observed
	}
}

// Resize gives the Pod a resize condition of the type, with the reason.
func Resize(typ corev1.PodConditionType, reason string) Opt {
	return func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: typ, Status: corev1.ConditionTrue,
			Reason: reason, Message: "Node didn't have enough capacity"})
	}
}

// RollingSet is the log-agent set with updateStrategy RollingUpdate, and its sidecar's image.
func RollingSet(t testing.TB) (*inject.CompiledSet, string) {
	t.Helper()
	set := Set(t, "log-agent", nil, func(s *appsv1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy = appsv1alpha1.UpdateStrategy{Type: appsv1alpha1.RollingUpdate}
	})
	return set, set.Set.Spec.Containers[0].Image
}

// Named gives the Pod a name.
func Named(name string) Opt { return func(p *corev1.Pod) { p.Name = name } }

// NotReadySidecar reports the container running image, not ready.
func NotReadySidecar(name, image string) Opt {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: name, Image: image,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}})
	}
}

// WaitingSidecar reports the container waiting for reason, the kubelet still naming the old
// image (as while it backs off pulling the new one).
func WaitingSidecar(name, image, reason string) Opt {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: name, Image: image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}})
	}
}
