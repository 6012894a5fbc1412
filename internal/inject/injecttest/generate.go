package injecttest

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/podrules"
	"github.com/sidecarset/sidecarset-operator/internal/validation"
)

// This file generates engine inputs from bytes: the engine's fuzz test feeds it fuzzed bytes,
// the integration suite random ones whose injected pods it sends to a real API server.

// fuzzGen reads choices from the fuzzed bytes; once they run out every choice is 0, the most
// ordinary option.
type fuzzGen struct {
	data []byte
	text string
}

func (g *fuzzGen) intn(n int) int {
	if len(g.data) == 0 {
		return 0
	}
	b := g.data[0]
	g.data = g.data[1:]
	return int(b) % n
}

func (g *fuzzGen) flag() bool { return g.intn(2) == 1 }

func pick[T any](g *fuzzGen, options ...T) T { return options[g.intn(len(options))] }

// Vocabularies, small on purpose: the same names keep coming back.
var (
	fuzzAppContainers  = []string{"app", "worker", "proxy", "log-agent"}
	fuzzAppInits       = []string{"migrate", "proxy-init", "wait-for-db"}
	fuzzSidecars       = []string{"proxy", "log-agent", "metrics", "app"}
	fuzzSidecarInits   = []string{"proxy-init", "certs-init", "proxy", "migrate"}
	fuzzVolumes        = []string{"data", "logs", "config", "certs"}
	fuzzMountPaths     = []string{"/data", "/var/log", "/etc/config", "/tmp"}
	fuzzEnvNames       = []string{"LOG_LEVEL", "REGION", "POD_NAME"}
	fuzzPullSecrets    = []string{"regcred", "mirror", "proxy-registry"}
	fuzzSetNames       = []string{"set-a", "set-b", "set-c"}
	fuzzSidecarDigest  = "ghcr.io/example/proxy@sha256:4c5ae3d8e1b2f0a9c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4"
	fuzzNamespaceLabel = []map[string]string{nil, {"env": "prod"}, {"env": "dev"}}
)

// Generate builds a fresh Input from shape (the choices; zeros once it runs out) and text
// (free text for values). It may first inject the Pod with other SidecarSets (or with
// today's, unpaused) or write a status annotation from the text, so re-entry is exercised as
// much as first injection. Names come from small vocabularies, so clashes are frequent.
func Generate(t testing.TB, shape []byte, text string) inject.Input {
	t.Helper()
	g := &fuzzGen{data: shape, text: text}
	history := g.intn(4)
	nsLabels := pick(g, fuzzNamespaceLabel...)
	pod := g.pod()
	sets := g.sidecarSets()
	switch history {
	case 1: // injected earlier by other SidecarSets
		pod = g.preInjected(t, pod, g.sidecarSets(), nsLabels)
	case 2: // injected earlier by today's SidecarSets, before any was paused
		earlier := make([]*appsv1alpha1.SidecarSet, 0, len(sets))
		for _, s := range sets {
			s = s.DeepCopy()
			s.Spec.InjectionStrategy.Paused = false
			earlier = append(earlier, s)
		}
		pod = g.preInjected(t, pod, earlier, nsLabels)
	case 3: // a status annotation from elsewhere
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[appsv1alpha1.StatusAnnotation] = g.text
	}
	// The pod's own values of the keys sets patch, chosen last so earlier choices keep their
	// meaning for every stored input.
	for _, k := range fuzzPatchKeys {
		if g.intn(4) == 3 {
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[k] = pick(g, fuzzPatchValues...)
		}
	}
	// And of the annotations sets' overrides read, chosen after those.
	for _, k := range fuzzOverrideKeys {
		if g.intn(3) == 2 {
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[k] = pick(g, fuzzOverrideValues...)
		}
	}
	var ns map[string]string
	if nsLabels != nil {
		ns = map[string]string{}
		for k, v := range nsLabels {
			ns[k] = v
		}
	}
	return inject.Input{Pod: pod, Sets: Compile(t, sets...), NamespaceLabels: ns, AllowedAnnotations: AllowList(t)}
}

// preInjected is pod as an earlier Apply with sets left it, or pod itself when that Apply
// refused.
func (g *fuzzGen) preInjected(t testing.TB, pod *corev1.Pod, sets []*appsv1alpha1.SidecarSet, nsLabels map[string]string) *corev1.Pod {
	t.Helper()
	res, err := inject.Apply(inject.Input{Pod: pod, Sets: Compile(t, sets...), NamespaceLabels: nsLabels, AllowedAnnotations: AllowList(t)})
	if err != nil {
		if refused := (*inject.RefusedError)(nil); !errors.As(err, &refused) {
			t.Fatalf("Apply failed with %T (%v), want only *inject.RefusedError", err, err)
		}
		return pod
	}
	return res.Pod()
}

func (g *fuzzGen) pod() *corev1.Pod {
	labels := map[string]string{"app": pick(g, "web", "web", "web", "api")}
	if g.intn(4) != 3 {
		labels[appsv1alpha1.InjectLabel] = appsv1alpha1.InjectLabelValue
	}
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "shop", Labels: labels},
	}
	// Never an empty, non-nil map: TestBug_PatchAddsAnnotationUnderMissingParent covers it.
	switch g.intn(3) {
	case 1:
		pod.Annotations = map[string]string{"team": "shop"}
	case 2:
		pod.Annotations = map[string]string{appsv1alpha1.DefaultContainerAnnotation: pick(g, fuzzAppContainers...)}
	}
	for _, name := range fuzzVolumes {
		if g.flag() {
			pod.Spec.Volumes = append(pod.Spec.Volumes, g.volume(name))
		}
	}
	used := sets.New[string]()
	for range g.intn(3) {
		if name := pick(g, fuzzAppInits...); !used.Has(name) {
			used.Insert(name)
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, g.container(name, pod.Spec.Volumes, true))
		}
	}
	for range 1 + g.intn(3) {
		if name := pick(g, fuzzAppContainers...); !used.Has(name) {
			used.Insert(name)
			pod.Spec.Containers = append(pod.Spec.Containers, g.container(name, pod.Spec.Volumes, false))
		}
	}
	for _, name := range fuzzPullSecrets[:2] {
		if g.intn(4) == 1 {
			pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: name})
		}
	}
	return pod
}

// sidecarSets builds up to three SidecarSets, sorted by name; one when the bytes run out.
func (g *fuzzGen) sidecarSets() []*appsv1alpha1.SidecarSet {
	var out []*appsv1alpha1.SidecarSet
	for _, name := range fuzzSetNames[:pick(g, 1, 2, 3, 0)] {
		out = append(out, g.sidecarSet(name))
	}
	return out
}

func (g *fuzzGen) sidecarSet(name string) *appsv1alpha1.SidecarSet {
	s := &appsv1alpha1.SidecarSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: appsv1alpha1.GroupVersion.String(), Kind: "SidecarSet"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1alpha1.SidecarSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": pick(g, "web", "web", "web", "api")}},
		},
	}
	if g.intn(4) == 3 {
		s.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	}
	s.Spec.InjectionStrategy.Paused = g.intn(5) == 4
	for _, v := range fuzzVolumes {
		if g.flag() {
			s.Spec.Volumes = append(s.Spec.Volumes, g.volume(v))
		}
	}
	// Names are unique across containers and init containers, as the CRD's CEL rule requires.
	used := sets.New[string]()
	for range g.intn(2) {
		if name := pick(g, fuzzSidecarInits...); !used.Has(name) {
			used.Insert(name)
			s.Spec.InitContainers = append(s.Spec.InitContainers, g.sidecar(name, true))
		}
	}
	for range g.intn(3) {
		if name := pick(g, fuzzSidecars...); !used.Has(name) {
			used.Insert(name)
			s.Spec.Containers = append(s.Spec.Containers, g.sidecar(name, false))
		}
	}
	if used.Len() == 0 {
		s.Spec.Containers = append(s.Spec.Containers, g.sidecar("metrics", false))
	}
	for _, name := range fuzzPullSecrets {
		if g.intn(3) == 1 {
			s.Spec.ImagePullSecrets = append(s.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: name})
		}
	}
	s.Spec.PatchPodMetadata = g.patches()
	s.Spec.Overrides = g.overrides(&s.Spec)
	return s
}

// overrides are a set's overrides of its own containers, each annotation at most once, as
// validation requires; a field set twice is refused by validation (ValidInput).
func (g *fuzzGen) overrides(spec *appsv1alpha1.SidecarSetSpec) []appsv1alpha1.Override {
	var names []string
	for _, list := range [][]appsv1alpha1.SidecarContainer{spec.InitContainers, spec.Containers} {
		for i := range list {
			names = append(names, list[i].Name)
		}
	}
	var out []appsv1alpha1.Override
	for _, k := range fuzzOverrideKeys {
		if g.intn(3) != 2 {
			continue
		}
		o := appsv1alpha1.Override{Annotation: k, Container: pick(g, names...), Field: pick(g, fuzzOverrideFields...)}
		if o.Field == appsv1alpha1.OverrideEnv {
			o.EnvName = pick(g, fuzzEnvNames...)
			o.Rule = pick(g, "", "value in ['debug', 'info']")
		} else {
			o.Rule = pick(g, "", "amount.compareTo(quantity('1')) <= 0")
		}
		out = append(out, o)
	}
	return out
}

var (
	fuzzOverrideKeys   = []string{"proxy.example.com/cpu", "proxy.example.com/memory", "proxy.example.com/level"}
	fuzzOverrideValues = []string{"500m", "2", "64Mi", "debug", "0", "x"}
	fuzzOverrideFields = []appsv1alpha1.OverrideField{appsv1alpha1.OverrideRequestsCPU, appsv1alpha1.OverrideLimitsCPU,
		appsv1alpha1.OverrideRequestsMemory, appsv1alpha1.OverrideLimitsMemory, appsv1alpha1.OverrideEnv}
)

// patches are a set's patchPodMetadata: each key at most once, as validation requires, and a
// JSON object for every MergePatchJson value.
func (g *fuzzGen) patches() []appsv1alpha1.PatchPodMetadata {
	var out []appsv1alpha1.PatchPodMetadata
	for _, k := range fuzzPatchKeys {
		if g.intn(3) != 2 {
			continue
		}
		policy := pick(g, "", appsv1alpha1.PatchPolicyRetain, appsv1alpha1.PatchPolicyOverwrite, appsv1alpha1.PatchPolicyMergePatchJSON)
		value := pick(g, fuzzPatchValues...)
		if policy == appsv1alpha1.PatchPolicyMergePatchJSON {
			value = pick(g, fuzzPatchObjects...)
		}
		out = append(out, appsv1alpha1.PatchPodMetadata{PatchPolicy: policy, Annotations: map[string]string{k: value}})
	}
	return out
}

var (
	// fuzzPatchKeys: two keys the golden allow-list allows, one it does not.
	fuzzPatchKeys    = []string{"logging.example.com/config", "prometheus.io/scrape", "team.example.com/owner"}
	fuzzPatchObjects = []string{`{"a":1}`, `{"a":null,"b":{"c":2}}`, `{}`}
	fuzzPatchValues  = append([]string{"true", "not json"}, fuzzPatchObjects...)
)

func (g *fuzzGen) sidecar(name string, init bool) appsv1alpha1.SidecarContainer {
	// A sidecar mounts volumes by name, defined by its set, by the pod, or by nobody.
	var volumes []corev1.Volume
	for _, v := range fuzzVolumes {
		volumes = append(volumes, corev1.Volume{Name: v})
	}
	native := init && g.flag()
	sc := appsv1alpha1.SidecarContainer{
		Container:       g.container(name, volumes, init && !native),
		PodInjectPolicy: pick(g, "", appsv1alpha1.AfterAppContainer, appsv1alpha1.BeforeAppContainer),
	}
	sc.ShareVolumePolicy.Type = pick(g, "", appsv1alpha1.ShareVolumePolicyDisabled, appsv1alpha1.ShareVolumePolicyEnabled)
	if g.flag() {
		sc.TransferEnv = []appsv1alpha1.TransferEnvVar{{
			SourceContainerName: pick(g, fuzzAppContainers...),
			EnvName:             pick(g, fuzzEnvNames...),
		}}
	}
	if native {
		sc.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	}
	// Fields added to the API later read their choices last.
	if g.intn(4) == 3 {
		sc.ShareVolumeDevicePolicy = &appsv1alpha1.ShareVolumePolicy{
			Type: pick(g, appsv1alpha1.ShareVolumePolicyDisabled, appsv1alpha1.ShareVolumePolicyEnabled)}
	}
	if (!init || native) && g.intn(4) == 3 {
		sc.Resources, sc.ResourcesPolicy = corev1.ResourceRequirements{}, g.resourcesPolicy()
	}
	if len(sc.TransferEnv) > 0 {
		t := &sc.TransferEnv[0]
		if g.flag() {
			// The pod's default-container annotation, when it has one, names an app container.
			t.SourceContainerName = ""
			t.SourceContainerNameFrom = &appsv1alpha1.SourceContainerNameSource{FieldRef: &corev1.ObjectFieldSelector{
				FieldPath: pick(g, "metadata.annotations['"+appsv1alpha1.DefaultContainerAnnotation+"']", "metadata.name")}}
		}
		if g.flag() {
			t.EnvName, t.EnvNames = "", sets.List(sets.New(t.EnvName, pick(g, fuzzEnvNames...)))
		}
	}
	return sc
}

// resourcesPolicy builds a sidecar's resourcesPolicy: targets that may match no container,
// and expressions that may go negative or give a request above the limit.
func (g *fuzzGen) resourcesPolicy() *appsv1alpha1.ResourcesPolicy {
	p := &appsv1alpha1.ResourcesPolicy{
		TargetContainersMode:      pick(g, "", appsv1alpha1.TargetContainersSum, appsv1alpha1.TargetContainersMax),
		TargetContainersNameRegex: pick(g, "", ".*", "^web", "^nothing$"),
	}
	if g.flag() {
		p.ResourcesExpr.Requests = map[corev1.ResourceName]appsv1alpha1.ResourceExpression{
			corev1.ResourceCPU:    pick[appsv1alpha1.ResourceExpression](g, "cpu * 0.5", "max(cpu, quantity('10m'))", "cpu - quantity('100m')"),
			corev1.ResourceMemory: pick[appsv1alpha1.ResourceExpression](g, "memory", "memory / 4.0"),
		}
	}
	if g.flag() || len(p.ResourcesExpr.Requests) == 0 {
		p.ResourcesExpr.Limits = map[corev1.ResourceName]appsv1alpha1.ResourceExpression{
			corev1.ResourceMemory: pick[appsv1alpha1.ResourceExpression](g, "memory * 2.0", "quantity('64Mi')"),
		}
	}
	return p
}

// container builds a container mounting some of volumes at distinct paths.
// container builds an app container or a sidecar; a plain init container (one that runs to
// completion) gets no probe, which only restartable containers may have.
func (g *fuzzGen) container(name string, volumes []corev1.Volume, plainInit bool) corev1.Container {
	c := corev1.Container{
		Name:  name,
		Image: pick(g, "nginx:1.27", "nginx", "busybox:latest", fuzzSidecarDigest, "registry.example.com/"+name+":"+fmt.Sprint(len(g.text))),
	}
	envs := sets.New[string]()
	for range g.intn(3) {
		name := pick(g, fuzzEnvNames...)
		if envs.Has(name) {
			continue
		}
		envs.Insert(name)
		switch g.intn(3) {
		case 0:
			c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: "info"})
		case 1:
			c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: g.text})
		case 2:
			c.Env = append(c.Env, corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: pick(g, "", "v1"), FieldPath: "metadata.name"},
			}})
		}
	}
	paths := sets.New[string]()
	for range g.intn(3) {
		if len(volumes) == 0 {
			break
		}
		v, path := volumes[g.intn(len(volumes))], pick(g, fuzzMountPaths...)
		if !paths.Has(path) {
			paths.Insert(path)
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: v.Name, MountPath: path, ReadOnly: g.flag()})
		}
	}
	if !plainInit && g.flag() {
		c.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: pick(g, "", corev1.ProtocolTCP)}}
		c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/healthz", Port: intstr.FromString("http"),
		}}, PeriodSeconds: int32(g.intn(3) * 5)}
	}
	if g.flag() {
		c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(pick(g, "64Mi", "128Mi"))}
	}
	// A raw block device (read last, as a later field): of a claim (or of a volume a sidecar
	// names), usually valid in the container, at a path that may clash with another container's.
	var claims []string
	for _, v := range volumes {
		if v.PersistentVolumeClaim != nil || v.VolumeSource == (corev1.VolumeSource{}) {
			claims = append(claims, v.Name)
		}
	}
	if len(claims) > 0 && g.intn(3) == 2 {
		c.VolumeDevices = []corev1.VolumeDevice{{Name: pick(g, claims...), DevicePath: pick(g, "/dev/xvda", "/dev/xvdb", "/data")}}
	}
	// A cpu request, which a sidecar's resourcesPolicy reads (read last, as a later field).
	if g.intn(3) == 2 {
		c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(pick(g, "100m", "250m", "1"))}
	}
	return c
}

// volume builds one of a few definitions, some equal to others once defaulted.
func (g *fuzzGen) volume(name string) corev1.Volume {
	v := corev1.Volume{Name: name}
	switch g.intn(8) {
	case 0:
		v.EmptyDir = &corev1.EmptyDirVolumeSource{}
	case 1:
		v.EmptyDir = &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}
	case 2:
		v.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "config"}}
	case 3:
		v.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "config"},
			DefaultMode: ptr.To[int32](corev1.ConfigMapVolumeSourceDefaultMode)}
	case 4:
		v.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: g.text}}
	case 5:
		v.Secret = &corev1.SecretVolumeSource{SecretName: "certs"}
	case 6:
		v.Secret = &corev1.SecretVolumeSource{SecretName: "certs", DefaultMode: ptr.To[int32](0o400)}
	case 7:
		v.HostPath = &corev1.HostPathVolumeSource{Path: "/var/log"}
	}
	// A claim, which a volume device needs (read last, as a later kind of volume).
	if g.intn(4) == 3 {
		v.VolumeSource = corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}
	}
	return v
}

// ValidInput reports whether the pod and every SidecarSet of the input are valid.
func ValidInput(in inject.Input) bool {
	if len(podrules.ValidateCreate(in.Pod)) > 0 {
		return false
	}
	for _, c := range in.Sets {
		if len(validation.ValidateSidecarSet(c.Set, nil)) > 0 {
			return false
		}
	}
	return true
}

// Compile compiles SidecarSets in the order given, failing the test on error.
func Compile(t testing.TB, sets ...*appsv1alpha1.SidecarSet) []*inject.CompiledSet {
	t.Helper()
	out := make([]*inject.CompiledSet, 0, len(sets))
	for _, s := range sets {
		c, err := inject.Compile(s)
		if err != nil {
			t.Fatalf("compiling SidecarSet %q: %v", s.Name, err)
		}
		out = append(out, c)
	}
	return out
}
