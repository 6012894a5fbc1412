// Package validationtest holds the corpus of container and volume shapes that the API server
// refuses inside a pod, shared by the validation unit tests and the integration test that
// first shows each shape refused by a real kube-apiserver.
package validationtest

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// Shape is one invalid shape: what it does to a valid SidecarSet spec, and the path of the
// field that must be named in the refusal (as a SidecarSet; PodPath is the same field in a pod
// whose first container is the sidecar and whose volumes are the set's).
type Shape struct {
	Name    string
	Break   func(*appsv1alpha1.SidecarSetSpec)
	Path    string
	PodPath string
}

// Valid is a SidecarSet spec every Shape starts from: one sidecar mounting one volume of the set.
func Valid() appsv1alpha1.SidecarSetSpec {
	return appsv1alpha1.SidecarSetSpec{
		Containers: []appsv1alpha1.SidecarContainer{{Container: corev1.Container{
			Name: "agent", Image: "registry.example/agent:1.0",
			VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/agent"}},
		}}},
		Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "agent-config"}}}}},
	}
}

func c0(s *appsv1alpha1.SidecarSetSpec) *corev1.Container { return &s.Containers[0].Container }

func httpProbe() *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}}}
}

// Corpus is every shape, from the trust issue's list and more.
var Corpus = []Shape{
	{"pull policy Sometimes", func(s *appsv1alpha1.SidecarSetSpec) { c0(s).ImagePullPolicy = "Sometimes" },
		"spec.containers[0].imagePullPolicy", "spec.containers[0].imagePullPolicy"},
	{"negative runAsUser", func(s *appsv1alpha1.SidecarSetSpec) {
		c0(s).SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](-1)}
	}, "spec.containers[0].securityContext.runAsUser", "spec.containers[0].securityContext.runAsUser"},
	{"subPath escaping the volume", func(s *appsv1alpha1.SidecarSetSpec) { c0(s).VolumeMounts[0].SubPath = "../x" },
		"spec.containers[0].volumeMounts", "spec.containers[0].volumeMounts"},
	{"configMap volume without a name", func(s *appsv1alpha1.SidecarSetSpec) { s.Volumes[0].ConfigMap.Name = "" },
		"spec.volumes[0].configMap.name", "spec.volumes[0].configMap.name"},
	{"probe without a handler", func(s *appsv1alpha1.SidecarSetSpec) { c0(s).ReadinessProbe = &corev1.Probe{PeriodSeconds: 5} },
		"spec.containers[0].readinessProbe", "spec.containers[0].readinessProbe"},
	{"preStop without a handler", func(s *appsv1alpha1.SidecarSetSpec) {
		c0(s).Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{}}
	}, "spec.containers[0].lifecycle.preStop", "spec.containers[0].lifecycle.preStop"},
	{"liveness successThreshold 2", func(s *appsv1alpha1.SidecarSetSpec) {
		p := httpProbe()
		p.SuccessThreshold = 2
		c0(s).LivenessProbe = p
	}, "spec.containers[0].livenessProbe.successThreshold", "spec.containers[0].livenessProbe.successThreshold"},
	{"fieldRef to an unknown field", func(s *appsv1alpha1.SidecarSetSpec) {
		c0(s).Env = []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nope"}}}}
	}, "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath", "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath"},
	{"resourceFieldRef to an unknown resource", func(s *appsv1alpha1.SidecarSetSpec) {
		c0(s).Env = []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.gpu"}}}}
	}, "spec.containers[0].env[0].valueFrom.resourceFieldRef.resource", "spec.containers[0].env[0].valueFrom.resourceFieldRef.resource"},
	{"value and valueFrom", func(s *appsv1alpha1.SidecarSetSpec) {
		c0(s).Env = []corev1.EnvVar{{Name: "X", Value: "v", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	}, "spec.containers[0].env[0].valueFrom", "spec.containers[0].env[0].valueFrom"},
	{"two sidecars on one host port", func(s *appsv1alpha1.SidecarSetSpec) {
		c0(s).Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
		s.Containers = append(s.Containers, appsv1alpha1.SidecarContainer{Container: corev1.Container{Name: "agent2", Image: "registry.example/agent:1.0",
			Ports: []corev1.ContainerPort{{ContainerPort: 81, HostPort: 8080}}}})
	}, "spec.containers[1].ports[0].hostPort", "spec.containers[1].ports[0].hostPort"},
	{"invalid port name", func(s *appsv1alpha1.SidecarSetSpec) {
		c0(s).Ports = []corev1.ContainerPort{{Name: "Not_A_Name", ContainerPort: 80}}
	}, "spec.containers[0].ports[0].name", "spec.containers[0].ports[0].name"},
	{"unsupported protocol", func(s *appsv1alpha1.SidecarSetSpec) {
		c0(s).Ports = []corev1.ContainerPort{{ContainerPort: 80, Protocol: "ICMP"}}
	}, "spec.containers[0].ports[0].protocol", "spec.containers[0].ports[0].protocol"},
	{"Bidirectional propagation unprivileged", func(s *appsv1alpha1.SidecarSetSpec) {
		c0(s).VolumeMounts[0].MountPropagation = ptr.To(corev1.MountPropagationBidirectional)
	}, "spec.containers[0].volumeMounts", "spec.containers[0].volumeMounts"},
	{"startup probe on a plain init container", func(s *appsv1alpha1.SidecarSetSpec) {
		s.InitContainers = []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "init", Image: "registry.example/init:1", StartupProbe: httpProbe()}}}
	}, "spec.initContainers[0].startupProbe", "spec.initContainers[0].startupProbe"},
	{"request above limit", func(s *appsv1alpha1.SidecarSetSpec) {
		c0(s).Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
	}, "spec.containers[0].resources.requests", "spec.containers[0].resources.requests"},
	{"two volume sources", func(s *appsv1alpha1.SidecarSetSpec) { s.Volumes[0].EmptyDir = &corev1.EmptyDirVolumeSource{} },
		"spec.volumes[0]", "spec.volumes[0]"},
	{"hostPath not absolute", func(s *appsv1alpha1.SidecarSetSpec) {
		s.Volumes[0].VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "relative/../x"}}
	}, "spec.volumes[0].hostPath.path", "spec.volumes[0].hostPath.path"},
	{"duplicate mount path", func(s *appsv1alpha1.SidecarSetSpec) {
		c0(s).VolumeMounts = append(c0(s).VolumeMounts, corev1.VolumeMount{Name: "config", MountPath: "/etc/agent"})
	}, "spec.containers[0].volumeMounts[1]", "spec.containers[0].volumeMounts[1].mountPath"},
	{"unsupported restartPolicy on an init container", func(s *appsv1alpha1.SidecarSetSpec) {
		s.InitContainers = []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "init", Image: "registry.example/init:1",
			RestartPolicy: ptr.To(corev1.ContainerRestartPolicy("Sometimes"))}}}
	}, "spec.initContainers[0].restartPolicy", "spec.initContainers[0].restartPolicy"},
	{"negative preStop sleep", func(s *appsv1alpha1.SidecarSetSpec) {
		c0(s).Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: -5}}}
	}, "spec.containers[0].lifecycle.preStop.sleep", "spec.containers[0].lifecycle.preStop.sleep"},
	{"invalid image with spaces", func(s *appsv1alpha1.SidecarSetSpec) { c0(s).Image = " registry.example/agent:1.0" },
		"spec.containers[0].image", "spec.containers[0].image"},
	{"Localhost seccomp without a profile", func(s *appsv1alpha1.SidecarSetSpec) {
		c0(s).SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: "Localhost"}}
	}, "spec.containers[0].securityContext.seccompProfile.localhostProfile", "spec.containers[0].securityContext.seccompProfile.localhostProfile"},
	{"emptyDir with a negative size", func(s *appsv1alpha1.SidecarSetSpec) {
		q := resource.MustParse("-1Gi")
		s.Volumes[0].VolumeSource = corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &q}}
	}, "spec.volumes[0].emptyDir", "spec.volumes[0].emptyDir"},
	{"secret volume with a bad mode", func(s *appsv1alpha1.SidecarSetSpec) {
		s.Volumes[0].VolumeSource = corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s", DefaultMode: ptr.To[int32](0o1000)}}
	}, "spec.volumes[0].secret.defaultMode", "spec.volumes[0].secret.defaultMode"},
}
