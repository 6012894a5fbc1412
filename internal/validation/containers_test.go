package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

func TestValidateContainers(t *testing.T) {
	runCases(t, []validationCase{
		{name: "name missing", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Name = ""
		}, want: []wantErr{{"spec.containers[0].name", field.ErrorTypeRequired}}},
		{name: "name not a DNS label", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Name = "Log_Agent"
		}, want: []wantErr{{"spec.containers[0].name", field.ErrorTypeInvalid}}},
		{name: "name repeated in containers", mutate: func(s *appsv1alpha1.SidecarSet) {
			second := meshInit()
			second.Name = "log-agent"
			s.Spec.Containers = append(s.Spec.Containers, second)
		}, want: []wantErr{{"spec.containers[1].name", field.ErrorTypeDuplicate}}, detail: `"log-agent"`},
		{name: "name shared by a container and an init container", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InitContainers[1].Name = "log-agent"
		}, want: []wantErr{{"spec.initContainers[1].name", field.ErrorTypeDuplicate}}, detail: "spec.initContainers"},
		{name: "image missing", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InitContainers[1].Image = ""
		}, want: []wantErr{{"spec.initContainers[1].image", field.ErrorTypeRequired}}},
		{name: "image with surrounding whitespace", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Image += " "
		}, want: []wantErr{{"spec.containers[0].image", field.ErrorTypeInvalid}}},
		{name: "podInjectPolicy BeforeAppContainer", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].PodInjectPolicy = appsv1alpha1.BeforeAppContainer
		}},
		{name: "podInjectPolicy unset", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].PodInjectPolicy = ""
		}},
		{name: "podInjectPolicy unknown", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].PodInjectPolicy = "Sideways"
		}, want: []wantErr{{"spec.containers[0].podInjectPolicy", field.ErrorTypeNotSupported}}, detail: "AfterAppContainer"},
		{name: "shareVolumePolicy type unknown", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InitContainers[0].ShareVolumePolicy.Type = "yes"
		}, want: []wantErr{{"spec.initContainers[0].shareVolumePolicy.type", field.ErrorTypeNotSupported}}, detail: "enabled"},
		{name: "shareVolumeDevicePolicy enabled", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InitContainers[0].ShareVolumeDevicePolicy = &appsv1alpha1.ShareVolumePolicy{Type: appsv1alpha1.ShareVolumePolicyEnabled}
		}},
		{name: "shareVolumeDevicePolicy type unknown", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].ShareVolumeDevicePolicy = &appsv1alpha1.ShareVolumePolicy{Type: "Enabled"}
		}, want: []wantErr{{"spec.containers[0].shareVolumeDevicePolicy.type", field.ErrorTypeNotSupported}}, detail: "enabled"},
	})
}

func TestValidateRestartPolicyAndProbes(t *testing.T) {
	runCases(t, []validationCase{
		{name: "restartPolicy on a regular container", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].RestartPolicy = restartPolicy(corev1.ContainerRestartPolicyAlways)
		}, want: []wantErr{{"spec.containers[0].restartPolicy", field.ErrorTypeForbidden}}, detail: "spec.initContainers"},
		{name: "init container restartPolicy other than Always", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InitContainers[1].RestartPolicy = restartPolicy(corev1.ContainerRestartPolicyOnFailure)
		}, want: []wantErr{{"spec.initContainers[1].restartPolicy", field.ErrorTypeNotSupported}}, detail: "Always"},
		{name: "plain init container with liveness probe", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InitContainers[1].LivenessProbe = meshProxy().LivenessProbe
		}, want: []wantErr{{"spec.initContainers[1].livenessProbe", field.ErrorTypeForbidden}}, detail: "restartPolicy: Always"},
		{name: "plain init container with readiness probe", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InitContainers[1].ReadinessProbe = meshProxy().ReadinessProbe
		}, want: []wantErr{{"spec.initContainers[1].readinessProbe", field.ErrorTypeForbidden}}},
		{name: "plain init container with startup probe", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InitContainers[1].StartupProbe = meshProxy().StartupProbe
		}, want: []wantErr{{"spec.initContainers[1].startupProbe", field.ErrorTypeForbidden}}},
		{name: "plain init container with lifecycle", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InitContainers[1].Lifecycle = meshProxy().Lifecycle
		}, want: []wantErr{{"spec.initContainers[1].lifecycle", field.ErrorTypeForbidden}}},
		{name: "native sidecar losing restartPolicy keeps forbidden fields", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InitContainers[0].RestartPolicy = nil
		}, want: []wantErr{
			{"spec.initContainers[0].lifecycle", field.ErrorTypeForbidden},
			{"spec.initContainers[0].livenessProbe", field.ErrorTypeForbidden},
			{"spec.initContainers[0].readinessProbe", field.ErrorTypeForbidden},
			{"spec.initContainers[0].startupProbe", field.ErrorTypeForbidden},
		}},
		{name: "regular container with probes and lifecycle", mutate: func(s *appsv1alpha1.SidecarSet) {
			proxy := meshProxy()
			s.Spec.Containers[0].LivenessProbe = proxy.LivenessProbe
			s.Spec.Containers[0].ReadinessProbe = proxy.ReadinessProbe
			s.Spec.Containers[0].Lifecycle = proxy.Lifecycle
		}},
		{name: "probe without handler", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InitContainers[0].ReadinessProbe.HTTPGet = nil
		}, want: []wantErr{{"spec.initContainers[0].readinessProbe", field.ErrorTypeRequired}}, detail: "httpGet"},
		{name: "probe with two handlers", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InitContainers[0].LivenessProbe.Exec = &corev1.ExecAction{Command: []string{"true"}}
		}, want: []wantErr{{"spec.initContainers[0].livenessProbe.tcpSocket", field.ErrorTypeForbidden}}, detail: "exec"},
		{name: "regular container probe without handler", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].StartupProbe = &corev1.Probe{PeriodSeconds: 5}
		}, want: []wantErr{{"spec.containers[0].startupProbe", field.ErrorTypeRequired}}},
		{name: "lifecycle hook without handler", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InitContainers[0].Lifecycle.PreStop.Sleep = nil
		}, want: []wantErr{{"spec.initContainers[0].lifecycle.preStop", field.ErrorTypeRequired}}},
	})
}

func TestValidateVolumesAndMounts(t *testing.T) {
	runCases(t, []validationCase{
		{name: "mount of a Pod volume without shareVolumePolicy", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].ShareVolumePolicy.Type = appsv1alpha1.ShareVolumePolicyDisabled
		}, want: []wantErr{{"spec.containers[0].volumeMounts[1].name", field.ErrorTypeNotFound}}, detail: "app-logs"},
		{name: "mount of an undeclared volume in an init container", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InitContainers[0].VolumeMounts[0].Name = "certs"
		}, want: []wantErr{{"spec.initContainers[0].volumeMounts[0].name", field.ErrorTypeNotFound}}, detail: "spec.volumes"},
		{name: "mount without volume name", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InitContainers[0].VolumeMounts[0].Name = ""
		}, want: []wantErr{{"spec.initContainers[0].volumeMounts[0].name", field.ErrorTypeRequired}}},
		{name: "mount without path", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].VolumeMounts[0].MountPath = ""
		}, want: []wantErr{{"spec.containers[0].volumeMounts[0].mountPath", field.ErrorTypeRequired}}},
		{name: "two mounts at one path", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].VolumeMounts[1].MountPath = "/fluent-bit/etc"
		}, want: []wantErr{{"spec.containers[0].volumeMounts[1].mountPath", field.ErrorTypeDuplicate}}},
		{name: "same path in two containers", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InitContainers[0].VolumeMounts[0].MountPath = "/fluent-bit/etc"
		}},
		{name: "device of an undeclared volume", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InitContainers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "raw-disk", DevicePath: "/dev/xvda"}}
		}, want: []wantErr{{"spec.initContainers[0].volumeDevices[0].name", field.ErrorTypeNotFound}}},
		{name: "device of a Pod volume with shareVolumePolicy", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "raw-disk", DevicePath: "/dev/xvda"}}
		}},
		{name: "device without path", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InitContainers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "proxy-certs"}}
		}, want: []wantErr{{"spec.initContainers[0].volumeDevices[0].devicePath", field.ErrorTypeRequired}}},
		{name: "device at a mount path", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InitContainers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "proxy-certs", DevicePath: "/etc/certs"}}
		}, want: []wantErr{{"spec.initContainers[0].volumeDevices[0].devicePath", field.ErrorTypeDuplicate}}},
		// The ServiceAccount admission plugin names a ServiceAccount in every pod before
		// validation, so Kubernetes accepts this in the pods the set injects (Istio's istio-token).
		{name: "projected serviceAccountToken volume", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Volumes = append(s.Spec.Volumes, corev1.Volume{Name: "istio-token", VolumeSource: corev1.VolumeSource{
				Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
					Audience: "istio-ca", ExpirationSeconds: ptr.To[int64](43200), Path: "istio-token"}}}}}})
			s.Spec.InitContainers[0].VolumeMounts = append(s.Spec.InitContainers[0].VolumeMounts,
				corev1.VolumeMount{Name: "istio-token", MountPath: "/var/run/secrets/tokens"})
		}},
		{name: "volume without name", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Volumes[0].Name = "" // log-agent still mounts fluent-bit-config: as a Pod volume
		}, want: []wantErr{{"spec.volumes[0].name", field.ErrorTypeRequired}}},
		{name: "volume name not a DNS label", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Volumes[0].Name = "Fluent_Bit"
		}, want: []wantErr{{"spec.volumes[0].name", field.ErrorTypeInvalid}}},
		{name: "volume name repeated", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Volumes = append(s.Spec.Volumes, s.Spec.Volumes[0])
		}, want: []wantErr{{"spec.volumes[2].name", field.ErrorTypeDuplicate}}, detail: "fluent-bit-config"},
		{name: "volume without source", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Volumes[0].ConfigMap = nil
		}, want: []wantErr{{"spec.volumes[0]", field.ErrorTypeRequired}}, detail: "emptyDir"},
		{name: "volume with two sources", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Volumes[1].EmptyDir = &corev1.EmptyDirVolumeSource{}
		}, want: []wantErr{{"spec.volumes[1].secret", field.ErrorTypeForbidden}}, detail: "emptyDir"},
	})
}
