package inject_test

import (
	"fmt"
	"slices"
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

// FuzzApply builds a Pod, its namespace's labels and up to three SidecarSets from the fuzzed
// bytes (the shape) and string (free text for values), and checks the engine's invariants.
// Names come from small vocabularies so that clashes, shared volumes, re-entries and stale
// records are frequent. Inputs are built afresh for every run, twice: one copy for Apply, one
// for the re-entry.
func FuzzApply(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s.shape, s.text)
	}
	f.Fuzz(func(t *testing.T, shape []byte, text string) {
		in := newFuzzInput(t, shape, text)
		again := newFuzzInput(t, shape, text)
		checkApplyInvariants(t, in, again)
	})
}

// fuzzSeeds are FuzzApply's seed corpus.
var fuzzSeeds = []struct {
	shape []byte
	text  string
}{
	{nil, ""},
	{[]byte{0, 0, 0, 1, 1, 2, 0, 3, 1, 1, 0, 2, 1, 1, 0, 0, 1}, "info"},
	// An earlier injection by other SidecarSets, then today's.
	{[]byte{1, 0, 1, 2, 3, 1, 1, 1, 2, 0, 1, 1, 2, 1, 0, 2, 3, 1, 0, 1, 1, 2, 2, 1, 0, 3, 1, 2, 0, 1, 1, 0, 2, 1}, "checkout"},
	// An earlier injection by today's sets, unpaused: paused sets keep what they added.
	{[]byte{2, 1, 0, 1, 1, 2, 1, 1, 3, 2, 1, 0, 1, 2, 1, 4, 1, 1, 0, 2, 1, 1, 1, 1, 0, 1, 2, 3}, "eu-west-1"},
	// A status annotation written by hand.
	{[]byte{3, 2, 1, 0, 1, 1, 2, 2, 1}, `{"set-a":{"hash":"0","containers":["proxy"],"volumes":["data"]}}`},
	{[]byte{3, 0, 0, 0}, `{"set-a":`},
	{[]byte{7, 255, 128, 64, 32, 16, 8, 4, 2, 1, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97}, "fuzz"},
}

// checkApplyInvariants applies the engine to in and checks what must hold for any input;
// again is an identical, independent input used for the re-entry.
func checkApplyInvariants(t *testing.T, in, again inject.Input) {
	t.Helper()
	before := snapshotInput(in)
	res, err := inject.Apply(in)
	if err != nil {
		requireRefused(t, err)
		before.assertUnchanged(t, in)
		return
	}
	out := res.Pod()
	own := ownContent(t, in.Pod, in.Sets)
	assertOwnContentKept(t, in.Pod, out, own)
	assertUniqueNames(t, out)
	assertEverythingAddedIsRecorded(t, res, out, own)
	assertPatchMatchesPod(t, in.Pod, res)
	assertValidStaysValid(t, in, out)
	assertIdempotent(t, res, again)
	before.assertUnchanged(t, in)
}

// owned is the content of the Pod's own, as opposed to what an earlier injection added
// according to the status annotation.
type owned struct {
	containers, initContainers, volumes, pullSecrets sets.Set[string]
}

// The status annotation proves an earlier injection only for what a known SidecarSet of that
// name declares in the same list; anything else it lists (a forged or stale entry) is the Pod's.
func ownContent(t *testing.T, pod *corev1.Pod, known []*inject.CompiledSet) owned {
	t.Helper()
	recs, err := inject.ParseRecords(pod.Annotations)
	if err != nil {
		t.Fatalf("Apply accepted a status annotation ParseRecords refuses: %v", err)
	}
	injected := owned{sets.New[string](), sets.New[string](), sets.New[string](), sets.New[string]()}
	for _, set := range known {
		r, ok := recs[set.Name()]
		if !ok {
			continue
		}
		spec := &set.Set.Spec
		declared := func(names []string, has func(string) bool) []string {
			return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return !has(n) })
		}
		injected.containers.Insert(declared(r.Containers, func(n string) bool {
			return slices.ContainsFunc(spec.Containers, func(c appsv1alpha1.SidecarContainer) bool { return c.Name == n })
		})...)
		injected.initContainers.Insert(declared(r.InitContainers, func(n string) bool {
			return slices.ContainsFunc(spec.InitContainers, func(c appsv1alpha1.SidecarContainer) bool { return c.Name == n })
		})...)
		injected.volumes.Insert(declared(r.Volumes, func(n string) bool {
			return slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == n })
		})...)
		injected.pullSecrets.Insert(declared(r.ImagePullSecrets, func(n string) bool {
			return slices.ContainsFunc(spec.ImagePullSecrets, func(l corev1.LocalObjectReference) bool { return l.Name == n })
		})...)
	}
	o := owned{sets.New[string](), sets.New[string](), sets.New[string](), sets.New[string]()}
	for _, c := range pod.Spec.Containers {
		if !injected.containers.Has(c.Name) {
			o.containers.Insert(c.Name)
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if !injected.initContainers.Has(c.Name) {
			o.initContainers.Insert(c.Name)
		}
	}
	for _, v := range pod.Spec.Volumes {
		if !injected.volumes.Has(v.Name) {
			o.volumes.Insert(v.Name)
		}
	}
	for _, s := range pod.Spec.ImagePullSecrets {
		if !injected.pullSecrets.Has(s.Name) {
			o.pullSecrets.Insert(s.Name)
		}
	}
	return o
}

// assertOwnContentKept checks that the Pod's own containers, init containers, volumes and
// pull secrets are all still there, unchanged and in their order.
func assertOwnContentKept(t *testing.T, in, out *corev1.Pod, own owned) {
	t.Helper()
	keep := func(kind string, names sets.Set[string], before, after []corev1.Container) {
		want := slices.DeleteFunc(slices.Clone(before), func(c corev1.Container) bool { return !names.Has(c.Name) })
		got := slices.DeleteFunc(slices.Clone(after), func(c corev1.Container) bool { return !names.Has(c.Name) })
		if !sameJSONList(t, want, got) {
			t.Errorf("the pod's own %s changed: before %s, after %s", kind, mustJSON(t, want), mustJSON(t, got))
		}
	}
	keep("containers", own.containers, in.Spec.Containers, out.Spec.Containers)
	keep("init containers", own.initContainers, in.Spec.InitContainers, out.Spec.InitContainers)

	wantVolumes := slices.DeleteFunc(slices.Clone(in.Spec.Volumes), func(v corev1.Volume) bool { return !own.volumes.Has(v.Name) })
	gotVolumes := slices.DeleteFunc(slices.Clone(out.Spec.Volumes), func(v corev1.Volume) bool { return !own.volumes.Has(v.Name) })
	if !sameJSONList(t, wantVolumes, gotVolumes) {
		t.Errorf("the pod's own volumes changed: before %s, after %s", mustJSON(t, wantVolumes), mustJSON(t, gotVolumes))
	}
	wantSecrets := slices.DeleteFunc(slices.Clone(in.Spec.ImagePullSecrets), func(r corev1.LocalObjectReference) bool { return !own.pullSecrets.Has(r.Name) })
	gotSecrets := slices.DeleteFunc(slices.Clone(out.Spec.ImagePullSecrets), func(r corev1.LocalObjectReference) bool { return !own.pullSecrets.Has(r.Name) })
	if !slices.Equal(wantSecrets, gotSecrets) {
		t.Errorf("the pod's own image pull secrets changed: before %v, after %v", wantSecrets, gotSecrets)
	}
}

// sameJSONList reports whether two lists hold the same JSON values; nil and empty are the
// same (the API server does not tell them apart).
func sameJSONList[T any](t *testing.T, a, b []T) bool {
	t.Helper()
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return canonicalJSON(t, a) == canonicalJSON(t, b)
}

// assertUniqueNames checks that container names are unique across containers and init
// containers, and that volume and pull secret names are unique.
func assertUniqueNames(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	unique := func(kind string, names []string) {
		seen := sets.New[string]()
		for _, n := range names {
			if seen.Has(n) {
				t.Errorf("%s name %q appears twice in %v", kind, n, names)
			}
			seen.Insert(n)
		}
	}
	unique("container", append(containerNames(pod.Spec.InitContainers), containerNames(pod.Spec.Containers)...))
	var volumes, secrets []string
	for _, v := range pod.Spec.Volumes {
		volumes = append(volumes, v.Name)
	}
	for _, s := range pod.Spec.ImagePullSecrets {
		secrets = append(secrets, s.Name)
	}
	unique("volume", volumes)
	unique("image pull secret", secrets)
}

// assertEverythingAddedIsRecorded checks the status annotation: it equals Result.Records,
// whatever is not the Pod's own is listed in it (or the next re-entry could not strip it),
// and what the SidecarSets injected this time is really in the Pod.
func assertEverythingAddedIsRecorded(t *testing.T, res *inject.Result, out *corev1.Pod, own owned) {
	t.Helper()
	recs, err := inject.ParseRecords(out.Annotations)
	if err != nil {
		t.Fatalf("the injected pod's status annotation does not parse: %v", err)
	}
	if len(res.Records) > 0 && recs.Encode() != res.Records.Encode() {
		t.Errorf("status annotation %s, want Result.Records %s", recs.Encode(), res.Records.Encode())
	}
	recorded := owned{sets.New[string](), sets.New[string](), sets.New[string](), sets.New[string]()}
	for _, r := range recs {
		recorded.containers.Insert(r.Containers...)
		recorded.initContainers.Insert(r.InitContainers...)
		recorded.volumes.Insert(r.Volumes...)
		recorded.pullSecrets.Insert(r.ImagePullSecrets...)
	}
	check := func(kind string, names []string, own, recorded sets.Set[string]) {
		for _, n := range names {
			if !own.Has(n) && !recorded.Has(n) {
				t.Errorf("%s %q is neither the pod's own nor recorded in %s", kind, n, recs.Encode())
			}
		}
	}
	var volumes, secrets []string
	for _, v := range out.Spec.Volumes {
		volumes = append(volumes, v.Name)
	}
	for _, s := range out.Spec.ImagePullSecrets {
		secrets = append(secrets, s.Name)
	}
	check("container", containerNames(out.Spec.Containers), own.containers, recorded.containers)
	check("init container", containerNames(out.Spec.InitContainers), own.initContainers, recorded.initContainers)
	check("volume", volumes, own.volumes, recorded.volumes)
	check("image pull secret", secrets, own.pullSecrets, recorded.pullSecrets)

	present := func(kind string, names, in []string) {
		for _, n := range names {
			if !slices.Contains(in, n) {
				t.Errorf("%s %q is recorded as injected but missing from the pod", kind, n)
			}
		}
	}
	for _, set := range res.Injected {
		r := res.Records[set]
		present("container", r.Containers, containerNames(out.Spec.Containers))
		present("init container", r.InitContainers, containerNames(out.Spec.InitContainers))
		present("volume", r.Volumes, volumes)
		present("image pull secret", r.ImagePullSecrets, secrets)
	}
}

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

// newFuzzInput builds a fresh Input from the fuzzed values. It may first inject the Pod with
// other SidecarSets (or with today's, unpaused) or write a status annotation from the text,
// so re-entry is exercised as much as first injection.
func newFuzzInput(t *testing.T, shape []byte, text string) inject.Input {
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
	var ns map[string]string
	if nsLabels != nil {
		ns = map[string]string{}
		for k, v := range nsLabels {
			ns[k] = v
		}
	}
	return inject.Input{Pod: pod, Sets: compile(t, sets...), NamespaceLabels: ns}
}

// preInjected is pod as an earlier Apply with sets left it, or pod itself when that Apply
// refused.
func (g *fuzzGen) preInjected(t *testing.T, pod *corev1.Pod, sets []*appsv1alpha1.SidecarSet, nsLabels map[string]string) *corev1.Pod {
	t.Helper()
	res, err := inject.Apply(inject.Input{Pod: pod, Sets: compile(t, sets...), NamespaceLabels: nsLabels})
	if err != nil {
		requireRefused(t, err)
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
	return s
}

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
	return sc
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
	return v
}

// assertValidStaysValid checks the engine's promise that a valid SidecarSet never breaks a
// valid pod: when the API server would accept the pod (Kubernetes' own pod validation, through
// internal/podrules) and every set passes the validating webhook's rules, the injected pod is
// accepted too.
func assertValidStaysValid(t *testing.T, in inject.Input, out *corev1.Pod) {
	t.Helper()
	if !validInput(in) {
		return
	}
	if errs := podrules.ValidateCreate(out); len(errs) > 0 {
		t.Errorf("a valid pod became invalid by injection: %v", errs.ToAggregate())
	}
}

// validInput reports whether the pod and every SidecarSet of the input are valid.
func validInput(in inject.Input) bool {
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

// TestFuzzSeedsHoldValidInputs keeps assertValidStaysValid from passing vacuously: some seeds
// must build a valid pod and valid sets that Apply accepts.
func TestFuzzSeedsHoldValidInputs(t *testing.T) {
	valid := 0
	for _, s := range fuzzSeeds {
		in := newFuzzInput(t, s.shape, s.text)
		if _, err := inject.Apply(in); err == nil && validInput(in) {
			valid++
		}
	}
	if valid == 0 {
		t.Errorf("none of the %d seeds builds a valid pod and valid SidecarSets that Apply accepts", len(fuzzSeeds))
	}
	t.Logf("%d of %d seeds are valid inputs", valid, len(fuzzSeeds))
}
