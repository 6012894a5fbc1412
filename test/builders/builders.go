package builders

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// SetOption changes a SidecarSet being built.
type SetOption interface {
	applyToSet(*appsv1alpha1.SidecarSet)
}

// PodOption changes a Pod being built.
type PodOption interface {
	applyToPod(*corev1.Pod)
}

// Option changes a SidecarSet or a Pod alike: their metadata and the lists both specs have.
type Option interface {
	SetOption
	PodOption
}

// SidecarSet returns a SidecarSet with only its name set, then changed by the options in
// order. Without Selecting or WithSelector it has no selector, which validation refuses.
func SidecarSet(name string, opts ...SetOption) *appsv1alpha1.SidecarSet {
	set := &appsv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, o := range opts {
		o.applyToSet(set)
	}
	return set
}

// Pod returns a Pod with only its namespace and name set, then changed by the options in
// order.
func Pod(namespace, name string, opts ...PodOption) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	for _, o := range opts {
		o.applyToPod(pod)
	}
	return pod
}

type setFunc func(*appsv1alpha1.SidecarSet)

func (f setFunc) applyToSet(s *appsv1alpha1.SidecarSet) { f(s) }

type podFunc func(*corev1.Pod)

func (f podFunc) applyToPod(p *corev1.Pod) { f(p) }

// either is an Option with one change for a set and one for a pod.
type either struct {
	setFunc
	podFunc
}

// metaFunc is an Option that changes the object's metadata, whatever its kind.
type metaFunc func(*metav1.ObjectMeta)

func (f metaFunc) applyToSet(s *appsv1alpha1.SidecarSet) { f(&s.ObjectMeta) }
func (f metaFunc) applyToPod(p *corev1.Pod)              { f(&p.ObjectMeta) }

// Typed sets the object's apiVersion and kind, as a decoded manifest or admission request has
// them (objects read through a typed client have none).
func Typed() Option {
	return either{
		func(s *appsv1alpha1.SidecarSet) {
			s.TypeMeta = metav1.TypeMeta{APIVersion: appsv1alpha1.GroupVersion.String(), Kind: "SidecarSet"}
		},
		func(p *corev1.Pod) { p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"} },
	}
}

// ResourceVersion sets metadata.resourceVersion, as the API server would.
func ResourceVersion(rv string) Option {
	return metaFunc(func(m *metav1.ObjectMeta) { m.ResourceVersion = rv })
}

// Generation sets metadata.generation, as the API server would.
func Generation(g int64) Option {
	return metaFunc(func(m *metav1.ObjectMeta) { m.Generation = g })
}

// WithContainers appends to spec.containers: a set's sidecars, a pod's own containers.
func WithContainers(containers ...corev1.Container) Option {
	sidecars := make([]appsv1alpha1.SidecarContainer, len(containers))
	for i, c := range containers {
		sidecars[i].Container = c
	}
	return either{
		appendSidecars(sidecars),
		func(p *corev1.Pod) { p.Spec.Containers = append(p.Spec.Containers, containers...) },
	}
}

// WithVolumes appends to spec.volumes: the volumes a set adds, or a pod's own.
func WithVolumes(volumes ...corev1.Volume) Option {
	return either{
		func(s *appsv1alpha1.SidecarSet) { s.Spec.Volumes = append(s.Spec.Volumes, volumes...) },
		func(p *corev1.Pod) { p.Spec.Volumes = append(p.Spec.Volumes, volumes...) },
	}
}

// Selecting makes the set select the pods labelled app=<app> (spec.selector).
func Selecting(app string) SetOption {
	return WithSelector(&metav1.LabelSelector{MatchLabels: map[string]string{"app": app}})
}

// WithSelector sets the set's spec.selector.
func WithSelector(selector *metav1.LabelSelector) SetOption {
	return setFunc(func(s *appsv1alpha1.SidecarSet) { s.Spec.Selector = selector })
}

// WithImage appends a sidecar named after the set that runs image, and nothing else.
func WithImage(image string) SetOption {
	return setFunc(func(s *appsv1alpha1.SidecarSet) {
		appendSidecars([]appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: s.Name, Image: image}}})(s)
	})
}

// WithSidecars appends sidecars with their SidecarSet-only fields (shareVolumePolicy,
// transferEnv, podInjectPolicy) to spec.containers.
func WithSidecars(sidecars ...appsv1alpha1.SidecarContainer) SetOption {
	return appendSidecars(sidecars)
}

func appendSidecars(sidecars []appsv1alpha1.SidecarContainer) setFunc {
	return func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers = append(s.Spec.Containers, sidecars...) }
}

// WithPullSecrets appends the named secrets to the set's spec.imagePullSecrets.
func WithPullSecrets(names ...string) SetOption {
	return setFunc(func(s *appsv1alpha1.SidecarSet) {
		for _, n := range names {
			s.Spec.ImagePullSecrets = append(s.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: n})
		}
	})
}

// Rolling makes the set update the pods it injected when its spec changes
// (spec.updateStrategy.type RollingUpdate).
func Rolling() SetOption {
	return setFunc(func(s *appsv1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Type = appsv1alpha1.RollingUpdate })
}

// WithLabels adds labels to the pod (a copy: the pod never shares the caller's map).
func WithLabels(labels map[string]string) PodOption {
	return podFunc(func(p *corev1.Pod) {
		if len(labels) == 0 {
			return
		}
		if p.Labels == nil {
			p.Labels = make(map[string]string, len(labels))
		}
		maps.Copy(p.Labels, labels)
	})
}

// OptedIn labels the pod for injection (the InjectLabel a set's pods must carry).
func OptedIn() PodOption {
	return WithLabels(map[string]string{appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue})
}

// WithSpec replaces the pod's spec built so far.
func WithSpec(spec corev1.PodSpec) PodOption {
	return podFunc(func(p *corev1.Pod) { p.Spec = spec })
}

// KwokPodSpec is the spec of the benchmarks' app pod: one container that runs on a kwok node
// and passes the restricted Pod Security Standard.
func KwokPodSpec() corev1.PodSpec {
	return corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1.0",
			SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		NodeSelector: map[string]string{"type": "kwok"},
		Tolerations: []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpEqual, Value: "fake",
			Effect: corev1.TaintEffectNoSchedule}},
		TerminationGracePeriodSeconds: ptr.To[int64](0),
	}
}
