package integration

import (
	eventsv1 "k8s.io/api/events/v1"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/test/builders"
	"github.com/sidecarset/sidecarset-operator/test/testutil"
)

// newNamespace creates a namespace with a generated name and deletes it after the test.
func newNamespace(t *testing.T, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "it-", Labels: labels}}
	must(t, k8s.Create(ctx, ns))
	t.Cleanup(func() { deleteIgnoreNotFound(t, ns) })
	ensureDefaultServiceAccount(t, ns.Name)
	return ns.Name
}

// ensureDefaultServiceAccount creates the namespace's default ServiceAccount, as
// kube-controller-manager would: the ServiceAccount admission plugin refuses pods without it.
func ensureDefaultServiceAccount(t *testing.T, ns string) {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}
	if err := k8s.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating the default ServiceAccount of %s: %v", ns, err)
	}
}

// createSet creates a SidecarSet through the API server, waits until the webhook injects with
// it (a pod created earlier would not get its sidecars: the informer has not delivered the set
// yet, as in any cluster), and deletes it after the test.
func createSet(t *testing.T, set *appsv1alpha1.SidecarSet) *appsv1alpha1.SidecarSet {
	t.Helper()
	must(t, k8s.Create(ctx, set))
	t.Cleanup(func() { deleteIgnoreNotFound(t, set) })
	waitForSet(t, set)
	return set
}

func deleteIgnoreNotFound(t *testing.T, obj client.Object) {
	testutil.DeleteIgnoreNotFound(ctx, t, k8s, obj)
}

var must = testutil.Must

// agentSet returns the suite's sample SidecarSet, changed by opts: it selects app=<app> and
// injects one sidecar, <name>-agent, with CPU requests and limits, that mounts the set's
// ConfigMap volume <name>-config.
func agentSet(name, app string, opts ...builders.SetOption) *appsv1alpha1.SidecarSet {
	return builders.SidecarSet(name, append([]builders.SetOption{
		builders.Selecting(app),
		builders.WithContainers(corev1.Container{
			Name:  name + "-agent",
			Image: "registry.example/agent:1.0",
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
			},
			VolumeMounts: []corev1.VolumeMount{{Name: name + "-config", MountPath: "/etc/agent"}},
		}),
		builders.WithVolumes(corev1.Volume{Name: name + "-config", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "agent-config"}},
		}}),
	}, opts...)...)
}

// appPod returns the suite's sample Pod: labelled app=<app> (and opted in when optIn), with
// one app container that mounts an emptyDir volume.
func appPod(ns, name, app string, optIn bool) *corev1.Pod {
	opts := []builders.PodOption{
		builders.WithLabels(map[string]string{"app": app}),
		builders.WithContainers(corev1.Container{
			Name: "app", Image: "registry.example/app:2.1",
			Env:          []corev1.EnvVar{{Name: "APP_NAME", Value: name}},
			VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
		}),
		builders.WithVolumes(corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}),
	}
	if optIn {
		opts = append(opts, builders.OptedIn())
	}
	return builders.Pod(ns, name, opts...)
}

func containerNames(cs []corev1.Container) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

// eventually polls cond until it holds or 60 seconds pass; the message says what was last seen.
// The bound only ends a test that waits for what never comes: a loaded CI machine (two cores,
// several API servers) takes seconds for what takes milliseconds alone, and a tight bound
// turned that into failures.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	testutil.Eventually(t, 60*time.Second, 50*time.Millisecond, what, cond)
}

// webhookRequests returns how many requests the webhook server has answered on a path, from
// controller-runtime's own metric.
func webhookRequests(t *testing.T, path string) float64 {
	t.Helper()
	return metricSum(t, "controller_runtime_webhook_requests_total", "webhook", path)
}

// metricSum adds up the values of a metric family of this process (counters and gauges) over
// the series whose labels have the values (name, value pairs).
func metricSum(t *testing.T, family string, labels ...string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	must(t, err)
	total := 0.0
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
		for _, m := range f.GetMetric() {
			if matchesLabels(m, labels) {
				total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return total
}

func matchesLabels(m *dto.Metric, pairs []string) bool {
	for i := 0; i+1 < len(pairs); i += 2 {
		if labelValue(m, pairs[i]) != pairs[i+1] {
			return false
		}
	}
	return true
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func contains(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// waitForSetEvent waits for an event on the SidecarSet with the reason and a note holding
// every part.
func waitForSetEvent(t *testing.T, set *appsv1alpha1.SidecarSet, reason string, parts ...string) {
	t.Helper()
	waitForEvent(t, "SidecarSet", "", set.Name, reason, parts...)
}

// waitForEvent waits for an event regarding the object with the reason and a note holding every
// part.
func waitForEvent(t *testing.T, kind, namespace, name, reason string, parts ...string) {
	t.Helper()
	eventually(t, "a "+reason+" event on "+kind+" "+name, func() (bool, string) {
		var list eventsv1.EventList
		if err := k8s.List(ctx, &list); err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Kind == kind && e.Regarding.Namespace == namespace && e.Regarding.Name == name {
				seen = append(seen, e.Namespace+"/"+e.Reason+": "+e.Note)
				if e.Reason == reason && contains(e.Note, parts...) {
					return true, ""
				}
			}
		}
		return false, strings.Join(seen, "; ")
	})
}
