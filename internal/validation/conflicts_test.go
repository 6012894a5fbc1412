package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// withSelector returns the SidecarSet with its pod selector replaced.
func withSelector(s appsv1alpha1.SidecarSet, sel *metav1.LabelSelector) appsv1alpha1.SidecarSet {
	s.Spec.Selector = sel
	return s
}

// withVolume returns the SidecarSet with one more volume.
func withVolume(s appsv1alpha1.SidecarSet, v corev1.Volume) appsv1alpha1.SidecarSet {
	s.Spec.Volumes = append(s.Spec.Volumes, v)
	return s
}

func TestValidateSidecarSetConflicts(t *testing.T) {
	certs := func(secret string) corev1.Volume {
		return corev1.Volume{Name: "proxy-certs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}}
	}
	runCases(t, []validationCase{
		{name: "overlapping set without shared names", others: []appsv1alpha1.SidecarSet{
			otherSet("tracing", "otel-collector"),
		}},
		{name: "container name shared with an overlapping set", others: []appsv1alpha1.SidecarSet{
			otherSet("tracing", "log-agent"),
		}, want: []wantErr{{"spec.containers[0].name", field.ErrorTypeInvalid}}, detail: `SidecarSet "tracing"`},
		{name: "init container name shared with a container of an overlapping set", others: []appsv1alpha1.SidecarSet{
			otherSet("tracing", "mesh-init"),
		}, want: []wantErr{{"spec.initContainers[1].name", field.ErrorTypeInvalid}}, detail: "disjoint"},
		{name: "names shared with two overlapping sets", others: []appsv1alpha1.SidecarSet{
			otherSet("tracing", "log-agent"), otherSet("audit", "log-agent", "mesh-proxy"),
		}, want: []wantErr{
			{"spec.containers[0].name", field.ErrorTypeInvalid},
			{"spec.containers[0].name", field.ErrorTypeInvalid},
			{"spec.initContainers[0].name", field.ErrorTypeInvalid},
		}},
		{name: "the stored version of the same set is skipped", others: []appsv1alpha1.SidecarSet{
			otherSet("observability", "log-agent", "mesh-proxy", "mesh-init"),
		}},
		{name: "disjoint by matchLabels value", others: []appsv1alpha1.SidecarSet{
			withSelector(otherSet("db", "log-agent"), matchLabels("tier", "db")),
		}},
		{name: "disjoint by In and NotIn", others: []appsv1alpha1.SidecarSet{
			withSelector(otherSet("db", "log-agent"), expr(req("tier", notIn, "frontend", "backend"))),
		}},
		{name: "disjoint by Exists and DoesNotExist", others: []appsv1alpha1.SidecarSet{
			withSelector(otherSet("legacy", "log-agent"), expr(req("app.kubernetes.io/part-of", doesNotExist))),
		}},
		{name: "disjoint by namespace selector", others: []appsv1alpha1.SidecarSet{
			func() appsv1alpha1.SidecarSet {
				s := otherSet("no-mesh", "log-agent")
				s.Spec.NamespaceSelector = matchLabels("mesh", "disabled")
				return s
			}(),
		}},
		{name: "other set excludes opted-in pods", others: []appsv1alpha1.SidecarSet{
			withSelector(otherSet("opted-out", "log-agent"), expr(req(appsv1alpha1.InjectLabel, doesNotExist))),
		}},
		{name: "other set selecting a superset", others: []appsv1alpha1.SidecarSet{
			withSelector(otherSet("everything-shop", "log-agent"), expr(req("tier", exists))),
		}, want: []wantErr{{"spec.containers[0].name", field.ErrorTypeInvalid}}},
		{name: "volume name with a different definition", others: []appsv1alpha1.SidecarSet{
			withVolume(otherSet("tracing"), certs("tracing-certs")),
		}, want: []wantErr{{"spec.volumes[1].name", field.ErrorTypeInvalid}}, detail: "proxy-certs"},
		{name: "volume name with the same definition", others: []appsv1alpha1.SidecarSet{
			withVolume(otherSet("tracing"), certs("mesh-certs")),
		}},
		{name: "volume with a different definition in a disjoint set", others: []appsv1alpha1.SidecarSet{
			withVolume(withSelector(otherSet("db"), matchLabels("tier", "db")), certs("db-certs")),
		}},
		{name: "volume the same once defaulted", others: []appsv1alpha1.SidecarSet{
			withVolume(otherSet("tracing"), corev1.Volume{Name: "proxy-certs", VolumeSource: corev1.VolumeSource{
				Secret: &corev1.SecretVolumeSource{SecretName: "mesh-certs", DefaultMode: ptr.To[int32](0o644)}}}),
		}},
		{name: "volume differing in a defaulted field", others: []appsv1alpha1.SidecarSet{
			withVolume(otherSet("tracing"), corev1.Volume{Name: "proxy-certs", VolumeSource: corev1.VolumeSource{
				Secret: &corev1.SecretVolumeSource{SecretName: "mesh-certs", DefaultMode: ptr.To[int32](0o400)}}}),
		}, want: []wantErr{{"spec.volumes[1].name", field.ErrorTypeInvalid}}},
		{name: "host port bound by an overlapping set", mutate: hostPort(9100, ""), others: []appsv1alpha1.SidecarSet{
			withHostPort(otherSet("node-exporter", "exporter"), 9100, corev1.ProtocolTCP),
		}, want: []wantErr{{"spec.containers[0].ports[0].hostPort", field.ErrorTypeInvalid}}, detail: `SidecarSet "node-exporter" also binds host port TCP//9100 (its spec.containers[0].ports[0])`},
		{name: "host port on another protocol", mutate: hostPort(9100, ""), others: []appsv1alpha1.SidecarSet{
			withHostPort(otherSet("node-exporter", "exporter"), 9100, corev1.ProtocolUDP),
		}},
		{name: "host port on another host IP", mutate: hostPort(9100, "127.0.0.1"), others: []appsv1alpha1.SidecarSet{
			withHostPort(otherSet("node-exporter", "exporter"), 9100, corev1.ProtocolTCP),
		}},
		{name: "host port bound by a disjoint set", mutate: hostPort(9100, ""), others: []appsv1alpha1.SidecarSet{
			withSelector(withHostPort(otherSet("node-exporter", "exporter"), 9100, corev1.ProtocolTCP), matchLabels("tier", "db")),
		}},
		{name: "other set with a selector that cannot be parsed", others: []appsv1alpha1.SidecarSet{
			withSelector(otherSet("broken", "x"), expr(req("tier", in))),
		}, want: []wantErr{{"spec.selector", field.ErrorTypeInternal}}, detail: `SidecarSet "broken" selects the same Pods, its spec.selector is invalid`},
		{name: "own selector invalid: conflicts not checked", mutate: func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Selector.MatchExpressions[0].Operator = "Like"
		}, others: []appsv1alpha1.SidecarSet{
			otherSet("tracing", "log-agent"),
		}, want: []wantErr{{"spec.selector.matchExpressions[0].operator", field.ErrorTypeInvalid}}},
	})
}

// hostPort makes the set's first container bind a host port (protocol left to its default).
func hostPort(port int32, hostIP string) func(*appsv1alpha1.SidecarSet) {
	return func(s *appsv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Ports[0].HostPort, s.Spec.Containers[0].Ports[0].HostIP = port, hostIP
		s.Spec.Containers[0].Ports[0].Protocol = ""
	}
}

// withHostPort returns the SidecarSet with its first container binding a host port.
func withHostPort(s appsv1alpha1.SidecarSet, port int32, protocol corev1.Protocol) appsv1alpha1.SidecarSet {
	s.Spec.Containers[0].Ports = append(s.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: 9100, HostPort: port, Protocol: protocol})
	return s
}
