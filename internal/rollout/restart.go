package rollout

import (
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// Restart is where the kubelet stands with an in-place update of a set's sidecars in one Pod
// whose spec it does not run yet (PodState.Settled is false). Status counts such Pods; explain
// and the rollout plan say, from this, what each one waits for and for how long.
type Restart struct {
	// Hash is the hash the Pod records for the set: what it was patched to.
	Hash string
	// Container is the sidecar whose image the kubelet does not yet run as the Pod's spec
	// names it: Running is the image the kubelet reports, Wants the one the spec names. Empty
	// when the images agree (the kubelet has not observed the Pod's latest spec, or resizes it).
	Container, Running, Wants string
	// Stopping is true while the sidecar's old container still runs. To restart it with the
	// new image the kubelet sends it SIGTERM and waits for it to exit, for the Pod's
	// terminationGracePeriodSeconds at most (then SIGKILL): a sidecar that does not exit on
	// SIGTERM (a shell or `tail` as PID 1) holds the Pod, and the rollout's budget, that long.
	Stopping bool
	// Waiting is why the new container waits to start (ErrImagePull, CrashLoopBackOff...) once
	// the old one is gone; empty otherwise.
	Waiting string
	// Generation and ObservedGeneration are the Pod's and the one its kubelet reports having
	// observed, when the kubelet (Kubernetes 1.35+) lags behind.
	Generation, ObservedGeneration int64
	// Resizing is true while the kubelet carries out an in-place resize.
	Resizing bool
	// GracePeriod is the Pod's terminationGracePeriodSeconds (30 s when unset).
	GracePeriod time.Duration
	// Since is when the sidecar's image was last written into the Pod's spec: the time of the
	// managedFields entry that owns the image field (the latest, when several do), which the
	// API server sets when its manager changes the field. Zero when the Pod carries no such
	// entry (the operator's cache strips managedFields; a Pod read from a file may have none).
	Since time.Time
}

// RestartOf says what the kubelet still has to do before it runs what the Pod's spec names of
// the set's sidecars; false when it runs it (Classify's Settled). It reads the Pod only.
func RestartOf(set *inject.CompiledSet, pod *corev1.Pod) (Restart, bool) {
	hash, _ := inject.InjectedHash(pod.Annotations, set.Name())
	r := Restart{Hash: hash, GracePeriod: gracePeriod(pod)}
	if sc, ok := unsettledSidecar(set, pod); ok {
		r.Container, r.Running, r.Wants = sc.status.Name, sc.status.Image, sc.spec.Image
		r.Stopping = sc.status.State.Running != nil
		if w := sc.status.State.Waiting; w != nil {
			r.Waiting = w.Reason
		}
		r.Since = imageWrittenAt(pod, sc.init, sc.spec.Name)
		return r, true
	}
	if g := pod.Status.ObservedGeneration; g != 0 && g < pod.Generation {
		r.Generation, r.ObservedGeneration = pod.Generation, g
		return r, true
	}
	if resizing, _ := resizeState(pod); resizing {
		r.Resizing = true
		return r, true
	}
	return r, false
}

// Waited is how long the Pod has waited at now since its image was written, to the second;
// false when that time is not known.
func (r Restart) Waited(now time.Time) (time.Duration, bool) {
	if r.Since.IsZero() || now.IsZero() {
		return 0, false
	}
	return max(0, now.Sub(r.Since)).Round(time.Second), true
}

// Describe says what the Pod waits for, for explain and the rollout plan; now is the time the
// wait is measured at (zero: not measured).
func (r Restart) Describe(now time.Time) string {
	switch {
	case r.Stopping:
		timing := "grace period " + r.GracePeriod.String()
		if waited, ok := r.Waited(now); ok {
			timing += ", waited " + waited.String()
		}
		return fmt.Sprintf("restarting, waiting for the old container to stop (%s): sidecar %s still runs %s, the pod's spec names %s (hash %s); "+
			"a sidecar that does not exit on SIGTERM is stopped only when the grace period ends", timing, r.Container, r.Running, r.Wants, r.Hash)
	case r.Waiting != "":
		return fmt.Sprintf("restarting, the new container waits (%s): sidecar %s, the kubelet reports %s, the pod's spec names %s (hash %s)",
			r.Waiting, r.Container, r.Running, r.Wants, r.Hash)
	case r.Container != "":
		return fmt.Sprintf("restarting, waiting for the kubelet to start the new image: sidecar %s reports %s, the pod's spec names %s (hash %s)",
			r.Container, r.Running, r.Wants, r.Hash)
	case r.Resizing:
		return fmt.Sprintf("resizing in place: the kubelet is applying the sidecars' new resources (hash %s)", r.Hash)
	}
	return fmt.Sprintf("restarting, waiting for the kubelet to observe the pod's latest spec (generation %d, observed %d; hash %s)",
		r.Generation, r.ObservedGeneration, r.Hash)
}

// StoppingWhy is how status groups the Pods that wait for an old sidecar container to stop:
// by their grace period.
func StoppingWhy(pod *corev1.Pod) string {
	return "grace period " + gracePeriod(pod).String()
}

// gracePeriod is how long the kubelet lets a container of the Pod stop after SIGTERM.
func gracePeriod(pod *corev1.Pod) time.Duration {
	return time.Duration(ptr.Deref(pod.Spec.TerminationGracePeriodSeconds, corev1.DefaultTerminationGracePeriodSeconds)) * time.Second
}

// sidecar is one of a set's sidecars as the Pod's spec names it and the kubelet reports it.
type sidecar struct {
	init   bool
	spec   *corev1.Container
	status *corev1.ContainerStatus
}

// unsettledSidecar is a sidecar of the set whose image the kubelet does not yet run as the
// Pod's spec names it: one whose old container still runs when there is such (the longest
// wait), else the first; false when there is none.
func unsettledSidecar(set *inject.CompiledSet, pod *corev1.Pod) (sidecar, bool) {
	var first sidecar
	found := false
	for _, l := range []struct {
		init     bool
		declared []appsv1alpha1.SidecarContainer
		specs    []corev1.Container
		statuses []corev1.ContainerStatus
	}{{false, set.Set.Spec.Containers, pod.Spec.Containers, pod.Status.ContainerStatuses},
		{true, set.Set.Spec.InitContainers, pod.Spec.InitContainers, pod.Status.InitContainerStatuses}} {
		for _, d := range l.declared {
			sc := sidecar{init: l.init, spec: containerNamed(l.specs, d.Name), status: statusNamed(l.statuses, d.Name)}
			if sc.spec == nil || sc.status == nil || inject.SameImage(sc.spec.Image, sc.status.Image, sc.status.ImageID) {
				continue
			}
			if sc.status.State.Running != nil {
				return sc, true
			}
			if !found {
				first, found = sc, true
			}
		}
	}
	return first, found
}

// oldContainerRunning reports whether the kubelet still runs an old container of one of the
// set's sidecars whose image the Pod's spec changed.
func oldContainerRunning(set *inject.CompiledSet, pod *corev1.Pod) bool {
	sc, ok := unsettledSidecar(set, pod)
	return ok && sc.status.State.Running != nil
}

func containerNamed(list []corev1.Container, name string) *corev1.Container {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

func statusNamed(list []corev1.ContainerStatus, name string) *corev1.ContainerStatus {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

// imageWrittenAt is when the image of the Pod's container (an init container when init) was
// last written: the time of the latest managedFields entry of the main resource that owns
// spec.containers[name].image; zero when none does.
func imageWrittenAt(pod *corev1.Pod, init bool, name string) time.Time {
	list := "f:containers"
	if init {
		list = "f:initContainers"
	}
	key, err := json.Marshal(map[string]string{"name": name})
	if err != nil {
		return time.Time{}
	}
	path := []string{"f:spec", list, "k:" + string(key), "f:image"}
	var at time.Time
	for _, m := range pod.ManagedFields {
		if m.Subresource != "" || m.FieldsV1 == nil || m.Time == nil || !m.Time.After(at) {
			continue
		}
		if ownsField(m.FieldsV1.GetRawBytes(), path) {
			at = m.Time.Time
		}
	}
	return at
}

// ownsField reports whether a managedFields entry's fieldsV1 holds the path.
func ownsField(raw []byte, path []string) bool {
	for _, step := range path {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(raw, &fields); err != nil {
			return false
		}
		next, ok := fields[step]
		if !ok {
			return false
		}
		raw = next
	}
	return true
}
