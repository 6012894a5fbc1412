package inject_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/podrules"
)

// TestRegression_PatchAddsAnnotationUnderMissingParent: Result.Patch adds annotations key by key
// whenever the input Pod's annotation map is non-nil, but an empty map is not serialized
// (metadata.annotations is omitempty), so the JSON the patch applies to has no
// /metadata/annotations and every "add /metadata/annotations/<key>" fails. A Pod decoded from
// `annotations: {}` has such a map. annotationOps should test len(r.pod.Annotations) == 0,
// not r.pod.Annotations == nil.
func TestRegression_PatchAddsAnnotationUnderMissingParent(t *testing.T) {
	pod := webPod(corev1.Container{Name: "app", Image: "web:1"})
	pod.Annotations = map[string]string{}
	in := inject.Input{Pod: pod, Sets: compile(t, webSet("proxy", corev1.Container{Name: "proxy", Image: "proxy:1"}))}
	res, err := inject.Apply(in)
	if err != nil {
		t.Fatalf("Apply() error = %v", err)
	}
	assertPatchMatchesPod(t, pod, res)
}

// TestRegression_PausingASetReordersInjectedContainers: a Pod injected by two SidecarSets is
// admitted again (a manifest copied from a running Pod, or offline injection of an injected
// manifest) after one of them was paused. The paused set's containers are kept as Pod
// entries while the active set's are stripped and appended again, so they swap places
// although neither changed: the patch is not empty, and for init containers the start order
// changes (a native sidecar can end up starting after the init container that needed it).
// Expected: a paused set's kept entries keep their place in the set-name order, so
// re-injecting unchanged sets changes nothing. A fix is to place kept entries at their set's
// turn (as if injected again from the Pod's copy) instead of treating them as the Pod's own.
func TestRegression_PausingASetReordersInjectedContainers(t *testing.T) {
	type list func(*corev1.Pod) []corev1.Container
	containers := list(func(p *corev1.Pod) []corev1.Container { return p.Spec.Containers })
	initContainers := list(func(p *corev1.Pod) []corev1.Container { return p.Spec.InitContainers })
	tests := []struct {
		name   string
		policy appsv1alpha1.PodInjectPolicy
		init   bool
		pause  string
		list   list
	}{
		{name: "containers after the app, later set paused", policy: appsv1alpha1.AfterAppContainer, pause: "b-metrics", list: containers},
		{name: "containers before the app, earlier set paused", policy: appsv1alpha1.BeforeAppContainer, pause: "a-proxy", list: containers},
		{name: "native sidecars, later set paused", policy: appsv1alpha1.AfterAppContainer, init: true, pause: "b-metrics", list: initContainers},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			build := func() []*appsv1alpha1.SidecarSet {
				var out []*appsv1alpha1.SidecarSet
				for _, name := range []string{"a-proxy", "b-metrics"} {
					sc := appsv1alpha1.SidecarContainer{Container: corev1.Container{Name: name, Image: name + ":1"}, PodInjectPolicy: tt.policy}
					s := webSet(name)
					if tt.init {
						sc.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
						s.Spec.InitContainers = []appsv1alpha1.SidecarContainer{sc}
					} else {
						s.Spec.Containers = []appsv1alpha1.SidecarContainer{sc}
					}
					out = append(out, s)
				}
				return out
			}
			pod := webPod(corev1.Container{Name: "app", Image: "web:1"})
			pod.Spec.InitContainers = []corev1.Container{{Name: "migrate", Image: "migrate:1"}}
			first, err := inject.Apply(inject.Input{Pod: pod, Sets: compile(t, build()...)})
			if err != nil {
				t.Fatalf("first Apply() error = %v", err)
			}
			injected := first.Pod()

			sets := build()
			for _, s := range sets {
				s.Spec.InjectionStrategy.Paused = s.Name == tt.pause
			}
			second, err := inject.Apply(inject.Input{Pod: injected, Sets: compile(t, sets...)})
			if err != nil {
				t.Fatalf("Apply() after pausing %s: %v", tt.pause, err)
			}
			if got, want := containerNames(tt.list(second.Pod())), containerNames(tt.list(injected)); !slices.Equal(got, want) {
				t.Errorf("after pausing %s the order is %v, want it unchanged: %v", tt.pause, got, want)
			}
			if second.Changed() {
				t.Errorf("Changed() = true with patch %s, want false: no set's content changed", mustJSON(t, second.Patch()))
			}
		})
	}
}

// TestRegression_DefaultPullPolicyLatestTagWithDigest: the API server parses the image reference
// (k8s.io/kubernetes pkg/util/parsers.ParseImageName) and pulls Always when the tag is
// "latest", even with a digest; defaultPullPolicy answers IfNotPresent as soon as it sees
// "@". A sidecar image such as proxy:latest@sha256:... is then never "the same" as its stored
// copy (pullPolicy Always): re-entry rewrites it and an identical app container is refused.
// Fix: only treat a digest as a tag when there is no tag.
func TestRegression_DefaultPullPolicyLatestTagWithDigest(t *testing.T) {
	image := "ghcr.io/example/proxy:latest@" + digest
	if got := podrules.DefaultedContainer(&corev1.Container{Name: "c", Image: image}, false, false).ImagePullPolicy; got != corev1.PullAlways {
		t.Errorf("defaultPullPolicy(%q) = %s, want Always (the API server's default)", image, got)
	}
}

// Containers and volumes as a SidecarSet holds them, and the one default each misses of
// those the API server applies (SetObjectDefaults_Pod, k8s.io/kubernetes pkg/apis/core/v1).
var (
	grpcProbeSidecar = corev1.Container{Name: "proxy", Image: "ghcr.io/example/proxy:1.22",
		LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 15020}}}}
	rootPathProbeSidecar = corev1.Container{Name: "proxy", Image: "ghcr.io/example/proxy:1.22",
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Port: intstr.FromInt32(15021), Scheme: corev1.URISchemeHTTP}}}}
	preStopSidecar = corev1.Container{Name: "proxy", Image: "ghcr.io/example/proxy:1.22",
		Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/drain", Port: intstr.FromInt32(15000)}}}}
	// A sidecar on the host network declares its host port (the engine refuses a port that
	// would become one only through the pod's hostNetwork); the protocol is still defaulted.
	hostPortSidecar = corev1.Container{Name: "node-agent", Image: "ghcr.io/example/node-agent:2.1",
		Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9100, HostPort: 9100}}}
	tokenVolume = corev1.Volume{Name: "mesh-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "mesh", Path: "token"}}},
	}}}
	sourcelessVolume = corev1.Volume{Name: "scratch"}

	// The defaults normalize.go misses.
	grpcServiceDefault     = func(c *corev1.Container) { c.LivenessProbe.GRPC.Service = ptr.To("") }
	httpGetPathDefault     = func(c *corev1.Container) { c.ReadinessProbe.HTTPGet.Path = "/" }
	preStopSchemeDefault   = func(c *corev1.Container) { c.Lifecycle.PreStop.HTTPGet.Scheme = corev1.URISchemeHTTP }
	tokenExpirationDefault = func(v *corev1.Volume) {
		v.Projected.Sources[0].ServiceAccountToken.ExpirationSeconds = ptr.To[int64](3600)
	}
	emptyDirDefault = func(v *corev1.Volume) { v.EmptyDir = &corev1.EmptyDirVolumeSource{} }
)

// stored returns c as the API server stores it: with the defaults normalize.go knows, then
// with missed.
func stored(c corev1.Container, missed ...func(*corev1.Container)) corev1.Container {
	c = *c.DeepCopy()
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = corev1.PullIfNotPresent
	}
	c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	for i := range c.Ports {
		c.Ports[i].Protocol = corev1.ProtocolTCP
	}
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		if p != nil {
			p.TimeoutSeconds, p.PeriodSeconds, p.SuccessThreshold, p.FailureThreshold = 1, 10, 1, 3
		}
	}
	for _, m := range missed {
		m(&c)
	}
	return c
}

// storedVolume is stored for volumes.
func storedVolume(v corev1.Volume, missed ...func(*corev1.Volume)) corev1.Volume {
	v = *v.DeepCopy()
	if v.Projected != nil {
		v.Projected.DefaultMode = ptr.To[int32](corev1.ProjectedVolumeSourceDefaultMode)
	}
	for _, m := range missed {
		m(&v)
	}
	return v
}

// TestRegression_SameContainerMissesAPIServerDefaults: defaultedContainer leaves out defaults the
// API server applies to every Pod container: HTTPGetAction.Path "/" (probes), Scheme HTTP on
// lifecycle handlers' HTTPGetAction (it is only set on probes), and GRPCAction.Service "". A
// sidecar written without them is then "different" from its stored copy: a Pod that already
// runs it is refused, and re-entry rewrites it (see TestRegression_ReinvocationAfterAPIServerDefaulting).
// Fix: default these fields in defaultedContainer too.
func TestRegression_SameContainerMissesAPIServerDefaults(t *testing.T) {
	tests := []struct {
		name    string
		written corev1.Container
		missed  func(*corev1.Container)
	}{
		{"readiness probe on the root path", rootPathProbeSidecar, httpGetPathDefault},
		{"gRPC liveness probe without service", grpcProbeSidecar, grpcServiceDefault},
		{"preStop httpGet without scheme", preStopSidecar, preStopSchemeDefault},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := stored(tt.written, tt.missed)
			// Control: given the missed default, the written form matches, so the missed
			// default is the whole difference.
			withDefault := *tt.written.DeepCopy()
			tt.missed(&withDefault)
			if !inject.SameContainer(&withDefault, &st) {
				t.Fatalf("test bug: the stored form differs by more than the missed default")
			}
			if !inject.SameContainer(&tt.written, &st) {
				t.Errorf("sameContainer(as written, as stored) = false, want true:\nwritten: %s\nstored:  %s",
					mustJSON(t, tt.written), mustJSON(t, st))
			}
		})
	}
}

// TestRegression_SameVolumeMissesAPIServerDefaults: defaultVolume leaves out
// ServiceAccountTokenProjection.ExpirationSeconds (3600) and the emptyDir a volume without a
// source becomes (SetDefaults_Volume). Fix: default them in defaultVolume.
func TestRegression_SameVolumeMissesAPIServerDefaults(t *testing.T) {
	tests := []struct {
		name    string
		written corev1.Volume
		missed  func(*corev1.Volume)
	}{
		{"projected service account token", tokenVolume, tokenExpirationDefault},
		{"volume without a source", sourcelessVolume, emptyDirDefault},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := storedVolume(tt.written, tt.missed)
			written := *tt.written.DeepCopy()
			withDefault := *written.DeepCopy()
			tt.missed(&withDefault)
			if !inject.SameVolume(&withDefault, &st) {
				t.Fatalf("test bug: the stored form differs by more than the missed default")
			}
			if !inject.SameVolume(&written, &st) {
				t.Errorf("sameVolume(as written, as stored) = false, want true:\nwritten: %s\nstored:  %s",
					mustJSON(t, written), mustJSON(t, st))
			}
		})
	}
}

// TestRegression_ReinvocationAfterAPIServerDefaulting shows what the defaulting gaps above cost. The
// API server defaults the Pod after each webhook's patch (admission/plugin/webhook/mutating
// dispatcher.go) and, with reinvocationPolicy IfNeeded, calls the webhook again with that
// Pod. The engine must then find nothing to do, yet it strips and re-adds the sidecar. The
// hostNetwork case needs the Pod's context: on such Pods the API server defaults a port's
// hostPort to its containerPort (the sidecar here declares it, as the engine requires there).
func TestRegression_ReinvocationAfterAPIServerDefaulting(t *testing.T) {
	tests := []struct {
		name        string
		hostNetwork bool
		sidecar     corev1.Container
		volume      *corev1.Volume
		// defaulted turns the injected Pod into what the API server stores.
		defaulted func(*corev1.Pod)
	}{
		{
			name: "gRPC probe", sidecar: grpcProbeSidecar,
			defaulted: func(p *corev1.Pod) { p.Spec.Containers[1] = stored(grpcProbeSidecar, grpcServiceDefault) },
		},
		{
			name: "service account token volume", volume: &tokenVolume,
			sidecar: corev1.Container{Name: "proxy", Image: "ghcr.io/example/proxy:1.22",
				VolumeMounts: []corev1.VolumeMount{{Name: "mesh-token", MountPath: "/var/run/secrets/tokens"}}},
			defaulted: func(p *corev1.Pod) {
				p.Spec.Containers[1] = stored(p.Spec.Containers[1])
				p.Spec.Volumes[0] = storedVolume(tokenVolume, tokenExpirationDefault)
			},
		},
		{
			name: "port on a hostNetwork pod", hostNetwork: true, sidecar: hostPortSidecar,
			defaulted: func(p *corev1.Pod) {
				p.Spec.Containers[1] = stored(hostPortSidecar, func(c *corev1.Container) {
					c.Ports[0].HostPort = c.Ports[0].ContainerPort // defaultHostNetworkPorts
				})
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := webSet("proxy", *tt.sidecar.DeepCopy())
			if tt.volume != nil {
				set.Spec.Volumes = []corev1.Volume{*tt.volume.DeepCopy()}
			}
			app := stored(corev1.Container{Name: "app", Image: "registry.example.com/web:1.0"})
			pod := webPod(app)
			pod.Spec.HostNetwork = tt.hostNetwork
			first, err := inject.Apply(inject.Input{Pod: pod, Sets: compile(t, set)})
			if err != nil {
				t.Fatalf("first Apply() error = %v", err)
			}
			reinvoked := first.Pod()
			tt.defaulted(reinvoked)
			second, err := inject.Apply(inject.Input{Pod: reinvoked, Sets: compile(t, set)})
			if err != nil {
				t.Fatalf("Apply() of the defaulted pod: %v", err)
			}
			if second.Changed() {
				t.Errorf("Apply() of the injected pod as the API server stored it: Changed() = true, patch %s; want no change",
					mustJSON(t, second.Patch()))
			}
		})
	}
}
