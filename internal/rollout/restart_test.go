package rollout

import (
	"strings"
	"testing"
	"time"

	"github.com/sidecarset/sidecarset-operator/internal/rollout/podtest"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestRestartOf: what a Pod whose kubelet does not yet run its spec waits for, as explain and
// the rollout plan say it.
func TestRestartOf(t *testing.T) {
	set, image := podtest.RollingSet(t)
	current := map[string]string{"log-agent": set.Hash}
	patchedAt := time.Date(2026, 11, 25, 11, 59, 48, 0, time.UTC)
	now := patchedAt.Add(12 * time.Second)
	// managed records who last wrote the sidecar's image, and when (managedFields).
	managed := func(fields string, at time.Time, subresource string) podtest.Opt {
		return func(p *corev1.Pod) {
			p.ManagedFields = append(p.ManagedFields, metav1.ManagedFieldsEntry{Manager: "m", Operation: metav1.ManagedFieldsOperationUpdate,
				Subresource: subresource, Time: &metav1.Time{Time: at}, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)})
		}
	}
	const ownsImage = `{"f:spec":{"f:containers":{"k:{\"name\":\"log-agent\"}":{"f:image":{}}}}}`
	const ownsOther = `{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{"f:image":{}}}}}`
	tests := []struct {
		name    string
		pod     *corev1.Pod
		ok      bool
		want    string // Describe(now) in full, or a part of it
		partial bool
	}{
		{name: "settled", pod: podtest.Pod(podtest.InjectedWith(current), podtest.Spec("log-agent", image), podtest.Running("log-agent", image))},
		{name: "old container stopping, the patch time known",
			pod: podtest.Pod(podtest.InjectedWith(current), podtest.Spec("log-agent", image), podtest.Stopping("log-agent", "registry.example/log-agent:0"),
				managed(`{"f:metadata":{}}`, patchedAt.Add(-time.Hour), ""), managed(ownsImage, patchedAt, ""), managed(ownsOther, now, ""), managed(ownsImage, now, "status")),
			ok: true,
			want: "restarting, waiting for the old container to stop (grace period 30s, waited 12s): sidecar log-agent still runs registry.example/log-agent:0, " +
				"the pod's spec names registry.example/log-agent:1 (hash " + set.Hash + "); a sidecar that does not exit on SIGTERM is stopped only when the grace period ends"},
		{name: "old container stopping past its grace period",
			pod: podtest.Pod(podtest.InjectedWith(current), podtest.Spec("log-agent", image), podtest.Stopping("log-agent", "registry.example/log-agent:0"),
				managed(ownsImage, patchedAt.Add(-45*time.Second), ""), func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](10) }),
			ok: true, want: "(grace period 10s, waited 57s)", partial: true},
		{name: "old container stopping, the patch time unknown (no managedFields)",
			pod: podtest.Pod(podtest.InjectedWith(current), podtest.Spec("log-agent", image), podtest.Stopping("log-agent", "registry.example/log-agent:0")),
			ok:  true, want: "restarting, waiting for the old container to stop (grace period 30s): ", partial: true},
		{name: "the new image waiting to be pulled",
			pod: podtest.Pod(podtest.InjectedWith(current), podtest.Spec("log-agent", image), podtest.WaitingSidecar("log-agent", "registry.example/log-agent:0", "ImagePullBackOff")),
			ok:  true, want: "restarting, the new container waits (ImagePullBackOff): sidecar log-agent, the kubelet reports registry.example/log-agent:0", partial: true},
		{name: "the old container gone, the new one not started",
			pod: podtest.Pod(podtest.InjectedWith(current), podtest.Spec("log-agent", image), podtest.Running("log-agent", "registry.example/log-agent:0")),
			ok:  true, want: "restarting, waiting for the kubelet to start the new image: sidecar log-agent reports registry.example/log-agent:0", partial: true},
		{name: "the kubelet has not observed the latest spec",
			pod: podtest.Pod(podtest.InjectedWith(current), podtest.Spec("log-agent", image), podtest.Running("log-agent", image), podtest.Generations(4, 3)),
			ok:  true, want: "restarting, waiting for the kubelet to observe the pod's latest spec (generation 4, observed 3; hash " + set.Hash + ")"},
		{name: "resizing",
			pod: podtest.Pod(podtest.InjectedWith(current), podtest.Spec("log-agent", image), podtest.Running("log-agent", image), podtest.Resize(corev1.PodResizeInProgress, "")),
			ok:  true, want: "resizing in place", partial: true},
		{name: "another container's image differs: not the set's business",
			pod: podtest.Pod(podtest.InjectedWith(current), podtest.Spec("log-agent", image), podtest.Running("log-agent", image), podtest.Spec("app", "app:2"), podtest.Running("app", "app:1"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, ok := RestartOf(set, tt.pod)
			if ok != tt.ok {
				t.Fatalf("RestartOf ok %v, want %v (%+v)", ok, tt.ok, r)
			}
			if !ok {
				return
			}
			got := r.Describe(now)
			if tt.partial && !strings.Contains(got, tt.want) || !tt.partial && got != tt.want {
				t.Errorf("Describe:\n got %q\nwant %q", got, tt.want)
			}
			if s, selected := Classify(set, tt.pod, func(string) map[string]string { return nil }, podtest.Scope); !selected || s.Settled || s.Stopping != r.Stopping {
				t.Errorf("Classify settled %v stopping %v, RestartOf %+v: they disagree", s.Settled, s.Stopping, r)
			}
		})
	}
}
