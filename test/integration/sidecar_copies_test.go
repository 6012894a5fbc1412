package integration

import (
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/test/builders"
)

// warnings records the warnings the API server returns (admission warnings among them).
type warnings struct {
	mu   sync.Mutex
	seen []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, message string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, message)
}

// take returns the warnings recorded since the last call.
func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.seen
	w.seen = nil
	return out
}

// warningClient is an uncached admin client that records the API server's warnings.
func warningClient(t *testing.T) (client.Client, *warnings) {
	t.Helper()
	cfg := rest.CopyConfig(adminConfig)
	w := &warnings{}
	cfg.WarningHandler = w
	c, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
	must(t, err)
	return c, w
}

// sidecarOf returns the named container of the pod as stored.
func sidecarOf(t *testing.T, pod *corev1.Pod, name string) corev1.Container {
	t.Helper()
	var got corev1.Pod
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(pod), &got))
	i := slices.IndexFunc(got.Spec.Containers, func(c corev1.Container) bool { return c.Name == name })
	if i < 0 {
		t.Fatalf("pod %s has no container %s: %v", pod.Name, name, containerNames(got.Spec.Containers))
	}
	return got.Spec.Containers[i]
}

func envOf(c corev1.Container) []string {
	out := make([]string, len(c.Env))
	for i, e := range c.Env {
		out[i] = e.Name + "=" + e.Value
	}
	return out
}

// TestTransferEnvFromPodFieldAndEnvNames creates, through the API server's admission chain,
// pods whose sidecar copies variables from app containers that the pod names in a label and
// an annotation (sourceContainerNameFrom), several in one entry (envNames): the injected pod is
// valid and stored. A pod that lacks the label is stored too, without those variables, and
// its creator is warned.
func TestTransferEnvFromPodFieldAndEnvNames(t *testing.T) {
	ns := newNamespace(t, nil)
	agent := appsv1alpha1.SidecarContainer{
		Container: corev1.Container{Name: "copy-env-agent", Image: "registry.example/agent:1.0"},
		TransferEnv: []appsv1alpha1.TransferEnvVar{
			{EnvNames: []string{"APP_NAME", "LOG_LEVEL"}, SourceContainerNameFrom: &appsv1alpha1.SourceContainerNameSource{
				FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['example.com/main-container']"}}},
			{EnvName: "QUEUE", SourceContainerNameFrom: &appsv1alpha1.SourceContainerNameSource{
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.annotations['example.com/queue-container']"}}},
		},
	}
	createSet(t, builders.SidecarSet("copy-env", builders.Selecting("copy-env"), builders.WithSidecars(agent)))
	c, warned := warningClient(t)
	pod := func(name string, labels map[string]string) *corev1.Pod {
		p := appPod(ns, name, "copy-env", true)
		for k, v := range labels {
			p.Labels[k] = v
		}
		p.Annotations = map[string]string{"example.com/queue-container": "worker"}
		p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: "LOG_LEVEL", Value: "debug"})
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "worker", Image: "registry.example/worker:1.0",
			Env: []corev1.EnvVar{{Name: "QUEUE", Value: "amqp://queue:5672"}}})
		return p
	}

	named := pod("named-0", map[string]string{"example.com/main-container": "app"})
	must(t, c.Create(ctx, named))
	if w := warned.take(); len(w) > 0 {
		t.Errorf("warnings %q, want none", w)
	}
	want := []string{"APP_NAME=named-0", "LOG_LEVEL=debug", "QUEUE=amqp://queue:5672"}
	if got := envOf(sidecarOf(t, named, "copy-env-agent")); !slices.Equal(got, want) {
		t.Errorf("sidecar env %q, want %q", got, want)
	}

	unnamed := pod("unnamed-0", nil)
	must(t, c.Create(ctx, unnamed))
	w := warned.take()
	if len(w) != 1 || !strings.Contains(w[0], `SidecarSet "copy-env" container "copy-env-agent": transferEnv of "APP_NAME", "LOG_LEVEL"`) ||
		!strings.Contains(w[0], "the pod has no such label") {
		t.Errorf("warnings %q, want one saying the pod has no label example.com/main-container", w)
	}
	want = []string{"QUEUE=amqp://queue:5672"}
	if got := envOf(sidecarOf(t, unnamed, "copy-env-agent")); !slices.Equal(got, want) {
		t.Errorf("sidecar env %q, want %q", got, want)
	}
}

// TestShareVolumeDevicePolicyInjectsBlockDevices creates, through the API server's admission
// chain, a pod whose app container uses a raw block volume (a PersistentVolumeClaim of
// volumeMode Block; the claim need not exist for the pod to be admitted): the sidecar gets the
// device at the same path, and the pod is valid and stored. A device at the path where the
// sidecar mounts its config is left out, recorded and warned about, and that pod is stored
// too.
func TestShareVolumeDevicePolicyInjectsBlockDevices(t *testing.T) {
	ns := newNamespace(t, nil)
	set := agentSet("share-devices", "share-devices")
	set.Spec.Containers[0].ShareVolumeDevicePolicy = &appsv1alpha1.ShareVolumePolicy{Type: appsv1alpha1.ShareVolumePolicyEnabled}
	createSet(t, set)
	c, warned := warningClient(t)
	pod := func(name, devicePath string) *corev1.Pod {
		p := appPod(ns, name, "share-devices", true)
		p.Spec.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "block", DevicePath: devicePath}}
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "block", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "block-data"}}})
		return p
	}

	shared := pod("shared-0", "/dev/xvda")
	must(t, c.Create(ctx, shared))
	if w := warned.take(); len(w) > 0 {
		t.Errorf("warnings %q, want none", w)
	}
	if got := sidecarOf(t, shared, "share-devices-agent").VolumeDevices; !slices.Equal(got, shared.Spec.Containers[0].VolumeDevices) {
		t.Errorf("sidecar devices %v, want the app's %v", got, shared.Spec.Containers[0].VolumeDevices)
	}

	// The agent mounts its config at /etc/agent.
	clashing := pod("clashing-0", "/etc/agent")
	must(t, c.Create(ctx, clashing))
	w := warned.take()
	if len(w) != 1 || !strings.Contains(w[0], `SidecarSet "share-devices" shareVolumeDevicePolicy left out share-devices-agent: device /etc/agent`) {
		t.Errorf("warnings %q, want one saying the device at /etc/agent was left out", w)
	}
	if got := sidecarOf(t, clashing, "share-devices-agent").VolumeDevices; len(got) > 0 {
		t.Errorf("sidecar devices %v, want none", got)
	}
	var stored corev1.Pod
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(clashing), &stored))
	recs, err := inject.ParseRecords(stored.Annotations)
	must(t, err)
	if notShared := recs["share-devices"].NotShared; len(notShared) != 1 || !strings.Contains(notShared[0], "device /etc/agent") {
		t.Errorf("record's notShared %q, want the device at /etc/agent", notShared)
	}
}
