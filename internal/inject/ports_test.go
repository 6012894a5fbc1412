package inject_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// TestPortsOfContainersRunningTogether: a sidecar's container port (number and protocol) that
// a container running alongside it declares is refused, whoever declares it; a port name of the
// pod's own is refused where the sidecar comes first and warned of otherwise. Plain init
// containers run alone and are never compared.
func TestPortsOfContainersRunningTogether(t *testing.T) {
	port := func(name string, number int32, proto corev1.Protocol) corev1.ContainerPort {
		return corev1.ContainerPort{Name: name, ContainerPort: number, Protocol: proto}
	}
	app := func(ports ...corev1.ContainerPort) corev1.Container {
		return corev1.Container{Name: "app", Image: "web:1", Ports: ports}
	}
	native := func(c corev1.Container) corev1.Container {
		c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		return c
	}
	sidecar := func(ports ...corev1.ContainerPort) corev1.Container {
		return corev1.Container{Name: "agent", Image: "agent:1", Ports: ports}
	}
	tests := []struct {
		name       string
		pod        *corev1.Pod
		containers []appsv1alpha1.SidecarContainer // of set "agent"
		inits      []appsv1alpha1.SidecarContainer
		other      *corev1.Container // a regular sidecar of set "b-other", injected after "agent"
		refused    string            // the refusal's field; "" when injected
		warned     bool
	}{
		{name: "same number and protocol as the app", pod: webPod(app(port("", 4317, ""))),
			containers: []appsv1alpha1.SidecarContainer{{Container: sidecar(port("otlp", 4317, corev1.ProtocolTCP))}},
			refused:    "spec.containers[0].ports[0].containerPort"},
		{name: "same number, other protocol", pod: webPod(app(port("", 8125, corev1.ProtocolTCP))),
			containers: []appsv1alpha1.SidecarContainer{{Container: sidecar(port("", 8125, corev1.ProtocolUDP))}}},
		{name: "a native sidecar's number the app declares", pod: webPod(app(port("", 15001, ""))),
			inits:   []appsv1alpha1.SidecarContainer{{Container: native(sidecar(port("", 15001, "")))}},
			refused: "spec.initContainers[0].ports[0].containerPort"},
		{name: "the app's native sidecar declares the number", pod: withInit(webPod(app()), native(corev1.Container{Name: "mesh", Image: "m:1", Ports: []corev1.ContainerPort{port("", 9090, "")}})),
			containers: []appsv1alpha1.SidecarContainer{{Container: sidecar(port("", 9090, ""))}},
			refused:    "spec.containers[0].ports[0].containerPort"},
		{name: "the app's plain init container declares the number", pod: withInit(webPod(app()), corev1.Container{Name: "migrate", Image: "m:1", Ports: []corev1.ContainerPort{port("", 9090, "")}}),
			containers: []appsv1alpha1.SidecarContainer{{Container: sidecar(port("", 9090, ""))}}},
		{name: "a plain init sidecar declares the app's number", pod: webPod(app(port("http", 8080, ""))),
			inits: []appsv1alpha1.SidecarContainer{{Container: sidecar(port("http", 8080, ""))}}},
		{name: "another set's sidecar declares the number", pod: webPod(app()),
			containers: []appsv1alpha1.SidecarContainer{{Container: sidecar(port("", 9090, ""))}},
			other:      &corev1.Container{Name: "other", Image: "o:1", Ports: []corev1.ContainerPort{port("", 9090, corev1.ProtocolTCP)}},
			refused:    "spec.containers[0].ports[0].containerPort"},
		{name: "port name, sidecar after the app", pod: webPod(app(port("http", 8080, ""))),
			containers: []appsv1alpha1.SidecarContainer{{Container: sidecar(port("http", 9102, ""))}}, warned: true},
		{name: "port name, sidecar before the app", pod: webPod(app(port("http", 8080, ""))),
			containers: []appsv1alpha1.SidecarContainer{{Container: sidecar(port("http", 9102, "")), PodInjectPolicy: appsv1alpha1.BeforeAppContainer}},
			refused:    "spec.containers[0].ports[0].name"},
		{name: "port name, native sidecar and the app's container", pod: webPod(app(port("http", 8080, ""))),
			inits:   []appsv1alpha1.SidecarContainer{{Container: native(sidecar(port("http", 9102, "")))}},
			refused: "spec.initContainers[0].ports[0].name"},
		{name: "port name, regular sidecar and the app's native sidecar", pod: withInit(webPod(app()), native(corev1.Container{Name: "mesh", Image: "m:1", Ports: []corev1.ContainerPort{port("admin", 15000, "")}})),
			containers: []appsv1alpha1.SidecarContainer{{Container: sidecar(port("admin", 9102, ""))}},
			refused:    "spec.containers[0].ports[0].name"},
		{name: "port name, native sidecars, the app's first", pod: withInit(webPod(app()), native(corev1.Container{Name: "mesh", Image: "m:1", Ports: []corev1.ContainerPort{port("admin", 15000, "")}})),
			inits: []appsv1alpha1.SidecarContainer{{Container: native(sidecar(port("admin", 9102, "")))}}, warned: true},
		{name: "port name, native sidecars, the sidecar first", pod: withInit(webPod(app()), native(corev1.Container{Name: "mesh", Image: "m:1", Ports: []corev1.ContainerPort{port("admin", 15000, "")}})),
			inits:   []appsv1alpha1.SidecarContainer{{Container: native(sidecar(port("admin", 9102, ""))), PodInjectPolicy: appsv1alpha1.BeforeAppContainer}},
			refused: "spec.initContainers[0].ports[0].name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := webSet("agent")
			set.Spec.Containers, set.Spec.InitContainers = tt.containers, tt.inits
			sets := []*appsv1alpha1.SidecarSet{set}
			if tt.other != nil {
				sets = append(sets, webSet("b-other", *tt.other))
			}
			in := inject.Input{Pod: tt.pod, Sets: compile(t, sets...)}
			res, err := inject.Apply(in)
			if tt.refused != "" {
				if err == nil {
					t.Fatalf("injected, want a refusal at %s", tt.refused)
				}
				refused := requireRefused(t, err)
				if want := "agent"; tt.other != nil {
					want = "b-other" // the later set finds the port taken
					if refused.SidecarSet != want || !strings.Contains(refused.Detail, `SidecarSet "agent"`) {
						t.Errorf("refusal %v should be b-other's and name agent's container", err)
					}
				} else if refused.SidecarSet != want || refused.Field != tt.refused {
					t.Errorf("refusal %v, want one of SidecarSet %q at %s", err, want, tt.refused)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if got := len(res.Warnings) > 0; got != tt.warned {
				t.Errorf("warnings %q, want a warning: %v", res.Warnings, tt.warned)
			}
			if len(res.Injected) != len(sets) {
				t.Errorf("injected %v, want every set", res.Injected)
			}
		})
	}
}

func withInit(pod *corev1.Pod, inits ...corev1.Container) *corev1.Pod {
	pod.Spec.InitContainers = inits
	return pod
}

// TestPortsOnTheHostNetwork: in a pod on the host's network every container port is a node
// port too. A sidecar port that does not declare its hostPort is refused (every pod the set
// injects on a node would claim it), in any list; one that declares it is injected.
func TestPortsOnTheHostNetwork(t *testing.T) {
	metrics := corev1.ContainerPort{Name: "metrics", ContainerPort: 9100}
	declared := corev1.ContainerPort{Name: "metrics", ContainerPort: 9100, HostPort: 9100}
	agent := func(init, native bool, p corev1.ContainerPort) *appsv1alpha1.SidecarSet {
		set := webSet("agent")
		sc := appsv1alpha1.SidecarContainer{Container: corev1.Container{Name: "agent", Image: "agent:1", Ports: []corev1.ContainerPort{p}}}
		if native {
			sc.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		}
		if init {
			set.Spec.InitContainers = []appsv1alpha1.SidecarContainer{sc}
		} else {
			set.Spec.Containers = []appsv1alpha1.SidecarContainer{sc}
		}
		return set
	}
	tests := []struct {
		name        string
		set         *appsv1alpha1.SidecarSet
		hostNetwork bool
		refused     string
	}{
		{"regular sidecar", agent(false, false, metrics), true, "spec.containers[0].ports[0].hostPort"},
		{"native sidecar", agent(true, true, metrics), true, "spec.initContainers[0].ports[0].hostPort"},
		{"plain init container", agent(true, false, metrics), true, "spec.initContainers[0].ports[0].hostPort"},
		{"host port declared", agent(false, false, declared), true, ""},
		{"off the host network", agent(false, false, metrics), false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := webPod(corev1.Container{Name: "app", Image: "web:1"})
			pod.Spec.HostNetwork = tt.hostNetwork
			res, err := inject.Apply(inject.Input{Pod: pod, Sets: compile(t, tt.set)})
			if tt.refused == "" {
				if err != nil || len(res.Injected) != 1 {
					t.Fatalf("want the sidecar injected, got %v (injected %v)", err, res)
				}
				return
			}
			if err == nil {
				t.Fatalf("injected, want a refusal at %s", tt.refused)
			}
			if refused := requireRefused(t, err); refused.SidecarSet != "agent" || refused.Field != tt.refused ||
				!strings.Contains(refused.Detail, "hostPort: 9100") {
				t.Errorf("refusal %v, want one of SidecarSet agent at %s saying how to declare the host port", err, tt.refused)
			}
		})
	}
}
