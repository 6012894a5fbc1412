package validation

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// validSidecarSet is a realistic SidecarSet without a single error, built fresh on every call
// so that each test case may change it freely:
//   - spec.containers[0] "log-agent": a log shipper that mounts the app's volumes
//     (shareVolumePolicy), copies APP_NAME from the app container (transferEnv), and mounts
//     "app-logs", a volume only the Pod defines;
//   - spec.initContainers[0] "mesh-proxy": a native sidecar (restartPolicy Always) with
//     probes and a preStop hook;
//   - spec.initContainers[1] "mesh-init": a plain init container that runs to completion.
func validSidecarSet() *appsv1alpha1.SidecarSet {
	return &appsv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "observability"},
		Spec: appsv1alpha1.SidecarSetSpec{
			Selector: &metav1.LabelSelector{
				MatchLabels:      map[string]string{"app.kubernetes.io/part-of": "shop"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"frontend", "backend"}}},
			},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"mesh": "enabled"}},
			Containers:        []appsv1alpha1.SidecarContainer{logAgent()},
			InitContainers:    []appsv1alpha1.SidecarContainer{meshProxy(), meshInit()},
			Volumes: []corev1.Volume{
				{Name: "fluent-bit-config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "fluent-bit"}}}},
				{Name: "proxy-certs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "mesh-certs"}}},
			},
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "registry-credentials"}},
		},
	}
}

func logAgent() appsv1alpha1.SidecarContainer {
	return appsv1alpha1.SidecarContainer{
		Container: corev1.Container{
			Name:  "log-agent",
			Image: "cr.fluentbit.io/fluent/fluent-bit:3.1.9",
			Ports: []corev1.ContainerPort{{Name: "http-metrics", ContainerPort: 2020, Protocol: corev1.ProtocolTCP}},
			Env: []corev1.EnvVar{
				{Name: "LOG_LEVEL", Value: "info"},
				{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
			},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "fluent-bit-config", MountPath: "/fluent-bit/etc", ReadOnly: true},
				{Name: "app-logs", MountPath: "/var/log/app", ReadOnly: true},
			},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
			},
		},
		PodInjectPolicy:   appsv1alpha1.AfterAppContainer,
		ShareVolumePolicy: appsv1alpha1.ShareVolumePolicy{Type: appsv1alpha1.ShareVolumePolicyEnabled},
		TransferEnv:       []appsv1alpha1.TransferEnvVar{{SourceContainerName: "app", EnvName: "APP_NAME"}},
	}
}

func meshProxy() appsv1alpha1.SidecarContainer {
	ready := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(15021)}}}
	return appsv1alpha1.SidecarContainer{
		Container: corev1.Container{
			Name:          "mesh-proxy",
			Image:         "docker.io/envoyproxy/envoy:v1.31.2",
			RestartPolicy: restartPolicy(corev1.ContainerRestartPolicyAlways),
			Ports: []corev1.ContainerPort{
				{Name: "proxy", ContainerPort: 15001},
				{Name: "health", ContainerPort: 15021, Protocol: corev1.ProtocolTCP},
			},
			ReadinessProbe: ready,
			StartupProbe:   ready.DeepCopy(),
			LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(15001)}}},
			Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
				Sleep: &corev1.SleepAction{Seconds: 5}}},
			VolumeMounts: []corev1.VolumeMount{{Name: "proxy-certs", MountPath: "/etc/certs", ReadOnly: true}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
			},
		},
		PodInjectPolicy: appsv1alpha1.AfterAppContainer,
	}
}

func meshInit() appsv1alpha1.SidecarContainer {
	return appsv1alpha1.SidecarContainer{Container: corev1.Container{
		Name:    "mesh-init",
		Image:   "docker.io/example/mesh-init:1.0.0",
		Command: []string{"mesh-init", "--redirect-outbound"},
	}}
}

// otherSet is a SidecarSet that selects the same Pods as validSidecarSet, in every namespace,
// and injects containers of the given names.
func otherSet(name string, containers ...string) appsv1alpha1.SidecarSet {
	s := appsv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1alpha1.SidecarSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "frontend"}},
		},
	}
	for _, c := range containers {
		s.Spec.Containers = append(s.Spec.Containers, appsv1alpha1.SidecarContainer{
			Container: corev1.Container{Name: c, Image: "example.com/" + c + ":1"}})
	}
	return s
}

func restartPolicy(p corev1.ContainerRestartPolicy) *corev1.ContainerRestartPolicy {
	return &p
}
