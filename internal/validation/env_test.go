package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

func TestValidatePorts(t *testing.T) {
	runCases(t, []validationCase{
		{name: "container port zero", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Ports[0].ContainerPort = 0
		}, want: []wantErr{{"spec.containers[0].ports[0].containerPort", field.ErrorTypeInvalid}}},
		{name: "container port above 65535", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InitContainers[0].Ports[1].ContainerPort = 65536
		}, want: []wantErr{{"spec.initContainers[0].ports[1].containerPort", field.ErrorTypeInvalid}}},
		{name: "host port in range", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Ports[0].HostPort = 9000
		}},
		{name: "host port out of range", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Ports[0].HostPort = 70000
		}, want: []wantErr{{"spec.containers[0].ports[0].hostPort", field.ErrorTypeInvalid}}},
		{name: "protocols UDP and SCTP", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InitContainers[0].Ports[0].Protocol = corev1.ProtocolUDP
			s.Spec.InitContainers[0].Ports[1].Protocol = corev1.ProtocolSCTP
		}},
		{name: "protocol unknown", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InitContainers[0].Ports[1].Protocol = "HTTP"
		}, want: []wantErr{{"spec.initContainers[0].ports[1].protocol", field.ErrorTypeNotSupported}}, detail: "TCP"},
		{name: "port without name", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Ports[0].Name = ""
		}},
		{name: "port name not an IANA service name", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Ports[0].Name = "HTTP_METRICS"
		}, want: []wantErr{{"spec.containers[0].ports[0].name", field.ErrorTypeInvalid}}},
		{name: "port name longer than 15 characters", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Ports[0].Name = "prometheus-metrics"
		}, want: []wantErr{{"spec.containers[0].ports[0].name", field.ErrorTypeInvalid}}},
		{name: "port name repeated", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InitContainers[0].Ports[1].Name = "proxy"
		}, want: []wantErr{{"spec.initContainers[0].ports[1].name", field.ErrorTypeDuplicate}}},
	})
}

func TestValidateEnv(t *testing.T) {
	runCases(t, []validationCase{
		{name: "env name missing", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Env[0].Name = ""
		}, want: []wantErr{{"spec.containers[0].env[0].name", field.ErrorTypeRequired}}},
		{name: "env name starting with a digit is accepted, as the API server does", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Env[0].Name = "1LOG_LEVEL"
		}},
		{name: "env name with a non-ASCII character", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Env[0].Name = "LOG_LEVÉL"
		}, want: []wantErr{{"spec.containers[0].env[0].name", field.ErrorTypeInvalid}}},
		{name: "env name with '='", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Env[0].Name = "LOG=LEVEL"
		}, want: []wantErr{{"spec.containers[0].env[0].name", field.ErrorTypeInvalid}}},
		{name: "env with value and valueFrom", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Env[1].Value = "node-1"
		}, want: []wantErr{{"spec.containers[0].env[1].valueFrom", field.ErrorTypeForbidden}}, detail: "value"},
		{name: "env valueFrom without source", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Env[1].ValueFrom.FieldRef = nil
		}, want: []wantErr{{"spec.containers[0].env[1].valueFrom", field.ErrorTypeRequired}}, detail: "secretKeyRef"},
		{name: "env valueFrom with two sources", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Env[1].ValueFrom.SecretKeyRef = &corev1.SecretKeySelector{Key: "node"}
		}, want: []wantErr{{"spec.containers[0].env[1].valueFrom.secretKeyRef", field.ErrorTypeForbidden}}, detail: "fieldRef"},
	})
}

func TestValidateTransferEnv(t *testing.T) {
	transfer := func(s *appsv1alpha1.SidecarSet, source, env string) {
		s.Spec.Containers[0].TransferEnv = append(s.Spec.Containers[0].TransferEnv,
			appsv1alpha1.TransferEnvVar{SourceContainerName: source, EnvName: env})
	}
	runCases(t, []validationCase{
		{name: "source container missing", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].TransferEnv[0].SourceContainerName = ""
		}, want: []wantErr{{"spec.containers[0].transferEnv[0].sourceContainerName", field.ErrorTypeRequired}}},
		{name: "source container name impossible", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].TransferEnv[0].SourceContainerName = "App"
		}, want: []wantErr{{"spec.containers[0].transferEnv[0].sourceContainerName", field.ErrorTypeInvalid}}},
		{name: "env name missing", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].TransferEnv[0].EnvName = ""
		}, want: []wantErr{{"spec.containers[0].transferEnv[0].envName", field.ErrorTypeRequired}}},
		{name: "env name invalid", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].TransferEnv[0].EnvName = "APP\tNAME"
		}, want: []wantErr{{"spec.containers[0].transferEnv[0].envName", field.ErrorTypeInvalid}}},
		{name: "env name the container sets in env", mutate: func(s *appsv1alpha1.SidecarSet) {
			transfer(s, "app", "POD_IP")
			transfer(s, "app", "LOG_LEVEL")
		}, want: []wantErr{{"spec.containers[0].transferEnv[2].envName", field.ErrorTypeDuplicate}}, detail: "env[0]"},
		{name: "env name transferred twice", mutate: func(s *appsv1alpha1.SidecarSet) {
			transfer(s, "worker", "APP_NAME")
		}, want: []wantErr{{"spec.containers[0].transferEnv[1].envName", field.ErrorTypeDuplicate}}, detail: "earlier transferEnv"},
		{name: "same env name transferred into two containers", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InitContainers[0].TransferEnv = s.Spec.Containers[0].TransferEnv
		}},
		{name: "envNames", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].TransferEnv[0].EnvName = ""
			s.Spec.Containers[0].TransferEnv[0].EnvNames = []string{"APP_NAME", "APP_VERSION"}
		}},
		{name: "envName and envNames", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].TransferEnv[0].EnvNames = []string{"APP_VERSION"}
		}, want: []wantErr{{"spec.containers[0].transferEnv[0].envNames", field.ErrorTypeForbidden}}, detail: "envName"},
		{name: "envNames item empty", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].TransferEnv[0].EnvName = ""
			s.Spec.Containers[0].TransferEnv[0].EnvNames = []string{"APP_NAME", ""}
		}, want: []wantErr{{"spec.containers[0].transferEnv[0].envNames[1]", field.ErrorTypeRequired}}},
		{name: "envNames item invalid", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].TransferEnv[0].EnvName = ""
			s.Spec.Containers[0].TransferEnv[0].EnvNames = []string{"APP=NAME"}
		}, want: []wantErr{{"spec.containers[0].transferEnv[0].envNames[0]", field.ErrorTypeInvalid}}},
		{name: "envNames item repeated", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].TransferEnv[0].EnvName = ""
			s.Spec.Containers[0].TransferEnv[0].EnvNames = []string{"APP_NAME", "APP_NAME"}
		}, want: []wantErr{{"spec.containers[0].transferEnv[0].envNames[1]", field.ErrorTypeDuplicate}}, detail: "envNames"},
		{name: "envNames item the container sets in env", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].TransferEnv[0].EnvName = ""
			s.Spec.Containers[0].TransferEnv[0].EnvNames = []string{"APP_NAME", "LOG_LEVEL"}
		}, want: []wantErr{{"spec.containers[0].transferEnv[0].envNames[1]", field.ErrorTypeDuplicate}}, detail: "env[0]"},
		{name: "envNames item an earlier entry transfers", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].TransferEnv = append(s.Spec.Containers[0].TransferEnv,
				appsv1alpha1.TransferEnvVar{SourceContainerName: "worker", EnvNames: []string{"QUEUE", "APP_NAME"}})
		}, want: []wantErr{{"spec.containers[0].transferEnv[1].envNames[1]", field.ErrorTypeDuplicate}}, detail: "earlier transferEnv"},
		{name: "neither envName nor envNames", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].TransferEnv[0].EnvName = ""
		}, want: []wantErr{{"spec.containers[0].transferEnv[0].envName", field.ErrorTypeRequired}}, detail: "envNames"},
	})
}

func TestValidateTransferEnvSourceFrom(t *testing.T) {
	from := func(s *appsv1alpha1.SidecarSet, apiVersion, fieldPath string) {
		s.Spec.Containers[0].TransferEnv[0].SourceContainerName = ""
		s.Spec.Containers[0].TransferEnv[0].SourceContainerNameFrom = &appsv1alpha1.SourceContainerNameSource{
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: apiVersion, FieldPath: fieldPath}}
	}
	const entry = "spec.containers[0].transferEnv[0]"
	runCases(t, []validationCase{
		{name: "label", mutate: func(s *appsv1alpha1.SidecarSet) { from(s, "", "metadata.labels['app.kubernetes.io/name']") }},
		{name: "annotation", mutate: func(s *appsv1alpha1.SidecarSet) { from(s, "v1", "metadata.annotations['example.com/Main']") }},
		{name: "pod name", mutate: func(s *appsv1alpha1.SidecarSet) { from(s, "", "metadata.name") }},
		{name: "with sourceContainerName", mutate: func(s *appsv1alpha1.SidecarSet) {
			from(s, "", "metadata.name")
			s.Spec.Containers[0].TransferEnv[0].SourceContainerName = "app"
		}, want: []wantErr{{entry + ".sourceContainerNameFrom", field.ErrorTypeForbidden}}, detail: "sourceContainerName"},
		{name: "without fieldRef", mutate: func(s *appsv1alpha1.SidecarSet) {
			from(s, "", "metadata.name")
			s.Spec.Containers[0].TransferEnv[0].SourceContainerNameFrom.FieldRef = nil
		}, want: []wantErr{{entry + ".sourceContainerNameFrom.fieldRef", field.ErrorTypeRequired}}, detail: "metadata.labels['<key>']"},
		{name: "fieldPath empty", mutate: func(s *appsv1alpha1.SidecarSet) { from(s, "", "") },
			want: []wantErr{{entry + ".sourceContainerNameFrom.fieldRef.fieldPath", field.ErrorTypeRequired}}, detail: "metadata.name"},
		{name: "fieldPath of a field that names no container", mutate: func(s *appsv1alpha1.SidecarSet) { from(s, "", "spec.nodeName") },
			want: []wantErr{{entry + ".sourceContainerNameFrom.fieldRef.fieldPath", field.ErrorTypeInvalid}}, detail: "metadata.annotations['<key>']"},
		{name: "fieldPath of all labels", mutate: func(s *appsv1alpha1.SidecarSet) { from(s, "", "metadata.labels") },
			want: []wantErr{{entry + ".sourceContainerNameFrom.fieldRef.fieldPath", field.ErrorTypeInvalid}}},
		{name: "fieldPath subscript of a field without keys", mutate: func(s *appsv1alpha1.SidecarSet) { from(s, "", "metadata.name['x']") },
			want: []wantErr{{entry + ".sourceContainerNameFrom.fieldRef.fieldPath", field.ErrorTypeInvalid}}},
		{name: "label key invalid", mutate: func(s *appsv1alpha1.SidecarSet) { from(s, "", "metadata.labels['not a key']") },
			want: []wantErr{{entry + ".sourceContainerNameFrom.fieldRef.fieldPath", field.ErrorTypeInvalid}}, detail: "label key"},
		{name: "annotation key empty", mutate: func(s *appsv1alpha1.SidecarSet) { from(s, "", "metadata.annotations['']") },
			want: []wantErr{{entry + ".sourceContainerNameFrom.fieldRef.fieldPath", field.ErrorTypeInvalid}}, detail: "annotation key"},
		{name: "apiVersion other than v1", mutate: func(s *appsv1alpha1.SidecarSet) { from(s, "v2", "metadata.name") },
			want: []wantErr{{entry + ".sourceContainerNameFrom.fieldRef.apiVersion", field.ErrorTypeNotSupported}}, detail: "v1"},
		{name: "neither sourceContainerName nor sourceContainerNameFrom", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].TransferEnv[0].SourceContainerName = ""
		}, want: []wantErr{{entry + ".sourceContainerName", field.ErrorTypeRequired}}, detail: "sourceContainerNameFrom"},
	})
}

func TestValidateResources(t *testing.T) {
	runCases(t, []validationCase{
		{name: "request above limit", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("256Mi")
		}, want: []wantErr{{"spec.containers[0].resources.requests[memory]", field.ErrorTypeInvalid}}, detail: "128Mi"},
		{name: "request equal to limit", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("128Mi")
		}},
		{name: "limit without request", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InitContainers[1].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		}},
		{name: "negative limit", mutate: func(s *appsv1alpha1.SidecarSet) {
			r := &s.Spec.InitContainers[0].Resources
			delete(r.Requests, corev1.ResourceCPU)
			r.Limits[corev1.ResourceCPU] = resource.MustParse("-100m")
		}, want: []wantErr{{"spec.initContainers[0].resources.limits[cpu]", field.ErrorTypeInvalid}}, detail: "negative"},
		{name: "negative request", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("-1")
		}, want: []wantErr{{"spec.containers[0].resources.requests[cpu]", field.ErrorTypeInvalid}}},
		{name: "several requests above limits", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.InitContainers[0].Resources.Requests = corev1.ResourceList{
				corev1.ResourceCPU:              resource.MustParse("2"),
				corev1.ResourceMemory:           resource.MustParse("1Gi"),
				corev1.ResourceEphemeralStorage: resource.MustParse("1Gi"),
			}
		}, want: []wantErr{
			{"spec.initContainers[0].resources.requests[cpu]", field.ErrorTypeInvalid},
			{"spec.initContainers[0].resources.requests[memory]", field.ErrorTypeInvalid},
		}},
	})
}
