package inject_test

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/podrules"
)

// digest is a well-formed image digest.
const digest = "sha256:4c5ae3d8e1b2f0a9c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4"

// TestDefaultPullPolicy checks the API server's rule (SetDefaults_Container in
// k8s.io/kubernetes pkg/apis/core/v1): Always when the tag is latest or there is neither a
// tag nor a digest, IfNotPresent otherwise.
func TestDefaultPullPolicy(t *testing.T) {
	tests := []struct {
		image string
		want  corev1.PullPolicy
	}{
		{"nginx", corev1.PullAlways},
		{"nginx:latest", corev1.PullAlways},
		{"nginx:1.27", corev1.PullIfNotPresent},
		{"nginx:1.27-alpine", corev1.PullIfNotPresent},
		{"docker.io/library/nginx:1.27", corev1.PullIfNotPresent},
		{"registry.example.com:5000/shop/checkout", corev1.PullAlways},
		{"registry.example.com:5000/shop/checkout:2.14.1", corev1.PullIfNotPresent},
		{"registry.example.com:5000/shop/checkout:latest", corev1.PullAlways},
		{"nginx@" + digest, corev1.PullIfNotPresent},
		{"registry.example.com:5000/shop/checkout@" + digest, corev1.PullIfNotPresent},
		{"nginx:1.27@" + digest, corev1.PullIfNotPresent},
	}
	for _, tt := range tests {
		t.Run(tt.image, func(t *testing.T) {
			got := podrules.DefaultedContainer(&corev1.Container{Name: "c", Image: tt.image}, false, false).ImagePullPolicy
			if got != tt.want {
				t.Errorf("defaultPullPolicy(%q) = %s, want %s", tt.image, got, tt.want)
			}
		})
	}
}

// sidecarAsWritten is a container as a SidecarSet stores it: nothing the API server defaults
// is set.
func sidecarAsWritten() corev1.Container {
	return corev1.Container{
		Name:  "log-agent",
		Image: "fluent/fluent-bit:3.2.4",
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 2020}},
		Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"},
		}}},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
		},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/api/v1/health", Port: intstr.FromInt32(2020),
		}}},
		LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{
			Port: intstr.FromString("http"),
		}}, PeriodSeconds: 30},
	}
}

// sidecarAsStored is sidecarAsWritten as the API server stores it inside a Pod.
func sidecarAsStored() corev1.Container {
	c := sidecarAsWritten()
	c.ImagePullPolicy = corev1.PullIfNotPresent
	c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	c.Ports[0].Protocol = corev1.ProtocolTCP
	c.Env[0].ValueFrom.FieldRef.APIVersion = "v1"
	c.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("64Mi")
	c.ReadinessProbe.TimeoutSeconds = 1
	c.ReadinessProbe.PeriodSeconds = 10
	c.ReadinessProbe.SuccessThreshold = 1
	c.ReadinessProbe.FailureThreshold = 3
	c.ReadinessProbe.HTTPGet.Scheme = corev1.URISchemeHTTP
	c.LivenessProbe.TimeoutSeconds = 1
	c.LivenessProbe.SuccessThreshold = 1
	c.LivenessProbe.FailureThreshold = 3
	return c
}

func TestSameContainer(t *testing.T) {
	tests := []struct {
		name   string
		a, b   func() corev1.Container
		change func(*corev1.Container) // applied to b
		want   bool
	}{
		{name: "identical as written", a: sidecarAsWritten, b: sidecarAsWritten, want: true},
		{name: "identical as stored", a: sidecarAsStored, b: sidecarAsStored, want: true},
		{name: "written and API-server defaulted", a: sidecarAsWritten, b: sidecarAsStored, want: true},
		{name: "defaulted and written", a: sidecarAsStored, b: sidecarAsWritten, want: true},
		{
			name: "untagged image defaults to Always",
			a:    func() corev1.Container { c := sidecarAsWritten(); c.Image = "fluent/fluent-bit"; return c },
			b:    sidecarAsStored,
			change: func(c *corev1.Container) {
				c.Image = "fluent/fluent-bit"
				c.ImagePullPolicy = corev1.PullAlways
			},
			want: true,
		},
		{
			name:   "untagged image stored with IfNotPresent",
			a:      func() corev1.Container { c := sidecarAsWritten(); c.Image = "fluent/fluent-bit"; return c },
			b:      sidecarAsStored,
			change: func(c *corev1.Container) { c.Image = "fluent/fluent-bit" },
		},
		{
			// AlwaysPullImages forces Always on every container: the Pod's Always wins.
			name: "pull policy forced to Always by admission", a: sidecarAsWritten, b: sidecarAsStored,
			change: func(c *corev1.Container) { c.ImagePullPolicy = corev1.PullAlways },
			want:   true,
		},
		{
			name: "pull policy Never where the sidecar has the default", a: sidecarAsWritten, b: sidecarAsStored,
			change: func(c *corev1.Container) { c.ImagePullPolicy = corev1.PullNever },
		},
		{
			name: "service account token mount added by admission", a: sidecarAsWritten, b: sidecarAsStored,
			change: func(c *corev1.Container) {
				c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "kube-api-access-x1y2z",
					MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true})
			},
			want: true,
		},
		{
			name: "LimitRange defaults added by admission", a: sidecarAsWritten, b: sidecarAsStored,
			change: func(c *corev1.Container) {
				c.Resources.Limits[corev1.ResourceCPU] = resource.MustParse("500m")
				c.Resources.Requests[corev1.ResourceEphemeralStorage] = resource.MustParse("1Gi")
			},
			want: true,
		},
		{
			name: "a declared env var missing", a: sidecarAsWritten, b: sidecarAsStored,
			change: func(c *corev1.Container) { c.Env = nil },
		},
		{
			name: "a declared limit changed", a: sidecarAsWritten, b: sidecarAsStored,
			change: func(c *corev1.Container) { c.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("128Mi") },
		},
		{
			name: "image", a: sidecarAsWritten, b: sidecarAsStored,
			change: func(c *corev1.Container) { c.Image = "fluent/fluent-bit:3.2.5" },
		},
		{
			name: "env value", a: sidecarAsWritten, b: sidecarAsStored,
			change: func(c *corev1.Container) { c.Env[0].ValueFrom.FieldRef.FieldPath = "metadata.namespace" },
		},
		{
			name: "port protocol UDP", a: sidecarAsWritten, b: sidecarAsStored,
			change: func(c *corev1.Container) { c.Ports[0].Protocol = corev1.ProtocolUDP },
		},
		{
			name: "request differs from the limit it would default to", a: sidecarAsWritten, b: sidecarAsStored,
			change: func(c *corev1.Container) { c.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("32Mi") },
		},
		{
			name: "probe period", a: sidecarAsWritten, b: sidecarAsStored,
			change: func(c *corev1.Container) { c.ReadinessProbe.PeriodSeconds = 5 },
		},
		{
			name: "probe scheme HTTPS", a: sidecarAsWritten, b: sidecarAsStored,
			change: func(c *corev1.Container) { c.ReadinessProbe.HTTPGet.Scheme = corev1.URISchemeHTTPS },
		},
		{
			name: "termination message policy", a: sidecarAsWritten, b: sidecarAsStored,
			change: func(c *corev1.Container) { c.TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError },
		},
		{
			name: "same quantity written differently", a: sidecarAsWritten, b: sidecarAsStored,
			change: func(c *corev1.Container) { c.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("0.02") },
			want:   true,
		},
		{
			name: "empty and missing env", a: func() corev1.Container { c := sidecarAsWritten(); c.Env = nil; return c },
			b:      sidecarAsWritten,
			change: func(c *corev1.Container) { c.Env = []corev1.EnvVar{} },
			want:   true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := tt.a(), tt.b()
			if tt.change != nil {
				tt.change(&b)
			}
			aBefore, bBefore := a.DeepCopy(), b.DeepCopy()
			if got := inject.SameContainer(&a, &b); got != tt.want {
				t.Errorf("sameContainer() = %v, want %v", got, tt.want)
			}
			if !reflect.DeepEqual(aBefore, &a) || !reflect.DeepEqual(bBefore, &b) {
				t.Errorf("sameContainer modified its arguments")
			}
		})
	}
}

func configMapVolume(name string, mode *int32) corev1.Volume {
	return corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: name}, DefaultMode: mode,
	}}}
}

func TestSameVolume(t *testing.T) {
	volume := func(src corev1.VolumeSource) corev1.Volume { return corev1.Volume{Name: "v", VolumeSource: src} }
	podInfo := func(mode *int32, apiVersion string) corev1.Volume {
		return volume(corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{DefaultMode: mode, Items: []corev1.DownwardAPIVolumeFile{{
			Path: "labels", FieldRef: &corev1.ObjectFieldSelector{APIVersion: apiVersion, FieldPath: "metadata.labels"},
		}}}})
	}
	secret := func(mode *int32) corev1.Volume {
		return volume(corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tls", DefaultMode: mode}})
	}
	projected := func(mode *int32) corev1.Volume {
		return volume(corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: mode, Sources: []corev1.VolumeProjection{{
			ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "ca"}},
		}}}})
	}
	hostPath := func(typ *corev1.HostPathType) corev1.Volume {
		return volume(corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log/pods", Type: typ}})
	}
	emptyDir := func(medium corev1.StorageMedium) corev1.Volume {
		return volume(corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: medium}})
	}
	tests := []struct {
		name string
		a, b corev1.Volume
		want bool
	}{
		{"configMap written and defaulted", configMapVolume("fluent-bit", nil), configMapVolume("fluent-bit", ptr.To[int32](0o644)), true},
		{"configMap other name", configMapVolume("fluent-bit", nil), configMapVolume("fluent-bit-v2", nil), false},
		{"configMap explicit mode", configMapVolume("fluent-bit", ptr.To[int32](0o400)), configMapVolume("fluent-bit", nil), false},
		{"secret written and defaulted", secret(nil), secret(ptr.To[int32](0o644)), true},
		{"secret explicit mode", secret(nil), secret(ptr.To[int32](0o400)), false},
		{"downwardAPI written and defaulted", podInfo(nil, ""), podInfo(ptr.To[int32](0o644), "v1"), true},
		{"downwardAPI other field", podInfo(nil, ""), volume(corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{{
			Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations"},
		}}}}), false},
		{"projected written and defaulted", projected(nil), projected(ptr.To[int32](0o644)), true},
		{"hostPath written and defaulted", hostPath(nil), hostPath(ptr.To(corev1.HostPathUnset)), true},
		{"hostPath explicit type", hostPath(nil), hostPath(ptr.To(corev1.HostPathDirectoryOrCreate)), false},
		{"emptyDir", emptyDir(""), emptyDir(""), true},
		{"emptyDir medium", emptyDir(""), emptyDir(corev1.StorageMediumMemory), false},
		{"different sources", emptyDir(""), secret(nil), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			aBefore, bBefore := tt.a.DeepCopy(), tt.b.DeepCopy()
			if got := inject.SameVolume(&tt.a, &tt.b); got != tt.want {
				t.Errorf("sameVolume() = %v, want %v", got, tt.want)
			}
			if got := inject.SameVolume(&tt.b, &tt.a); got != tt.want {
				t.Errorf("sameVolume() with arguments swapped = %v, want %v", got, tt.want)
			}
			if !reflect.DeepEqual(aBefore, &tt.a) || !reflect.DeepEqual(bBefore, &tt.b) {
				t.Errorf("sameVolume modified its arguments")
			}
		})
	}
}
