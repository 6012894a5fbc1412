//go:build e2e

package realnode

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/test/testutil"
)

// image names one of the test images in the node's registry (hack/node.sh TEST_IMAGES).
func image(nameTag string) string { return registry + "/" + nameTag }

// probed is a container of a test image whose readiness the kubelet learns from the server
// itself (`testserver check`, an exec probe: pods on this node share its network, so each
// server picks a free port).
func probed(name, img string) corev1.Container {
	return corev1.Container{Name: name, Image: img, ReadinessProbe: &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/testserver", "check"}}},
		PeriodSeconds: 1, FailureThreshold: 1,
	}}
}

func newNamespace(t testing.TB, prefix string) string {
	t.Helper()
	return cluster.NewNamespace(t, prefix, nil)
}

// newDeployment creates a Deployment of opted-in app=<app> pods on the real node, each with an
// app container of the app:v1 test image.
func newDeployment(t testing.TB, ns, app string, replicas int32) {
	t.Helper()
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app, appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue}},
				Spec: corev1.PodSpec{
					HostNetwork:                   true,
					NodeSelector:                  map[string]string{"sidecarset.io/real-node": "true"},
					Containers:                    []corev1.Container{probed("app", image("app:v1"))},
					TerminationGracePeriodSeconds: ptr.To[int64](10),
				},
			},
		},
	}
	must(t, k8s.Create(ctx, dep))
}

func createSet(t testing.TB, set *appsv1alpha1.SidecarSet) {
	t.Helper()
	cluster.CreateSet(t, set)
}

func editSet(t testing.TB, set *appsv1alpha1.SidecarSet, edit func(*appsv1alpha1.SidecarSet)) {
	t.Helper()
	cluster.EditSet(t, set, edit)
}

// waitForCounts waits until matched, updated, ready and updatedReady all equal n for the set's
// current generation.
func waitForCounts(t testing.TB, set *appsv1alpha1.SidecarSet, n int32) time.Duration {
	t.Helper()
	return eventually(t, converge, fmt.Sprintf("%s to count %d pods matched, updated, ready and updatedReady", set.Name, n), func() (bool, string) {
		var got appsv1alpha1.SidecarSet
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(set), &got); err != nil {
			return false, err.Error()
		}
		st := got.Status
		return st.ObservedGeneration == got.Generation && st.MatchedPods == n && st.UpdatedPods == n && st.ReadyPods == n && st.UpdatedReadyPods == n,
			fmt.Sprintf("matched %d updated %d ready %d updatedReady %d at observedGeneration %d of %d",
				st.MatchedPods, st.UpdatedPods, st.ReadyPods, st.UpdatedReadyPods, st.ObservedGeneration, got.Generation)
	})
}

func waitForRollout(t testing.TB, set *appsv1alpha1.SidecarSet, reason string, text ...string) time.Duration {
	t.Helper()
	return cluster.WaitForRollout(t, set, reason, text...)
}

func podsOf(t testing.TB, ns, app string) []corev1.Pod {
	t.Helper()
	return cluster.PodsOf(t, ns, app)
}

func status(pod *corev1.Pod, name string) corev1.ContainerStatus {
	for _, s := range append(pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses...) {
		if s.Name == name {
			return s
		}
	}
	return corev1.ContainerStatus{}
}

// containerLog is what the container's current instance wrote (through the kubelet).
func containerLog(t testing.TB, pod *corev1.Pod, name string) string {
	t.Helper()
	r, err := clientset.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: name}).Stream(ctx)
	must(t, err)
	defer func() { _ = r.Close() }()
	b, err := io.ReadAll(r)
	must(t, err)
	return string(b)
}

// snapshot is what the kubelet reported for one pod's containers at one moment.
type snapshot struct {
	uid     types.UID
	ids     map[string]string
	restart map[string]int32
}

func snapshots(t testing.TB, ns, app string, containers ...string) map[string]snapshot {
	t.Helper()
	out := map[string]snapshot{}
	for _, p := range podsOf(t, ns, app) {
		s := snapshot{uid: p.UID, ids: map[string]string{}, restart: map[string]int32{}}
		for _, c := range containers {
			st := status(&p, c)
			s.ids[c], s.restart[c] = st.ContainerID, st.RestartCount
		}
		out[p.Name] = s
	}
	return out
}

// TestInPlaceImageUpdateOnRealNode rolls new images of a regular sidecar (a slow one: it keeps
// serving 4 s after SIGTERM, during which the kubelet still reports the old image running and
// ready) and a native sidecar through a Deployment's pods on the real node: only those two
// containers restart (new container IDs, restart counts +1); the app container, the sandbox and
// the pod stay; the kubelet's own reports never show more than maxUnavailable pods unavailable;
// status reaches updatedReady = matched. Then an image that cannot be pulled stops the rollout
// at the budget, and fixing the spec resumes it.
func TestInPlaceImageUpdateOnRealNode(t *testing.T) {
	ns := newNamespace(t, "realnode-rollout")
	set := &appsv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "realnode-rollout"},
		Spec: appsv1alpha1.SidecarSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "rolled"}},
			Containers:     []appsv1alpha1.SidecarContainer{{Container: probed("agent", image("slow-agent:v1"))}},
			InitContainers: []appsv1alpha1.SidecarContainer{{Container: withRestartAlways(probed("proxy", image("agent:v1")))}},
			UpdateStrategy: appsv1alpha1.UpdateStrategy{Type: appsv1alpha1.RollingUpdate},
		},
	}
	createSet(t, set)
	start := time.Now()
	newDeployment(t, ns, "rolled", 3)
	waitForCounts(t, set, 3)
	t.Logf("3 pods (app, regular and native sidecar) injected, Running and Ready in %s", time.Since(start).Round(100*time.Millisecond))
	before := snapshots(t, ns, "rolled", "app", "agent", "proxy")
	budget := testutil.WatchBudget(ctx, t, k8s, ns, 50*time.Millisecond)
	budget.Reset()

	editSet(t, set, func(s *appsv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Image = image("slow-agent:v2")
		s.Spec.InitContainers[0].Image = image("agent:v2")
	})
	took := waitForRollout(t, set, "Complete", "3 of 3 matched pods carry hash")
	waitForCounts(t, set, 3)
	t.Logf("in-place rollout of 3 pods (maxUnavailable 1, slow sidecar exits 4 s after SIGTERM) complete in %s; highest unavailable %d",
		took.Round(100*time.Millisecond), budget.Highest())
	if got := budget.Highest(); got != 1 {
		t.Errorf("highest number of pods unavailable at once by the kubelet's reports: %d, want 1 (maxUnavailable 1)", got)
	}
	after := podsOf(t, ns, "rolled")
	if len(after) != 3 {
		t.Fatalf("%d pods after the rollout, want 3", len(after))
	}
	for i := range after {
		p := &after[i]
		b, ok := before[p.Name]
		if !ok || b.uid != p.UID {
			t.Errorf("pod %s is not one of the pods before the rollout", p.Name)
			continue
		}
		for name, want := range map[string]string{"agent": image("slow-agent:v2"), "proxy": image("agent:v2")} {
			st := status(p, name)
			if !inject.SameImage(want, st.Image, st.ImageID) || !st.Ready || st.ContainerID == b.ids[name] || st.RestartCount != b.restart[name]+1 {
				t.Errorf("pod %s %s: image %s ready %v id %s (was %s) restarts %d (was %d); want %s, ready, a new container, one restart more",
					p.Name, name, st.Image, st.Ready, st.ContainerID, b.ids[name], st.RestartCount, b.restart[name], want)
			}
		}
		if app := status(p, "app"); app.ContainerID != b.ids["app"] || app.RestartCount != b.restart["app"] {
			t.Errorf("pod %s app container %s (was %s), %d restarts (was %d): the app must not restart", p.Name, app.ContainerID, b.ids["app"], app.RestartCount, b.restart["app"])
		}
		if log := containerLog(t, p, "agent"); !strings.Contains(log, "version slow-agent-v2 serving") {
			t.Errorf("pod %s agent logged %q, want the v2 server", p.Name, log)
		}
	}

	// An image that cannot be pulled: one pod takes it; the kubelet kills the old container and
	// keeps reporting the old image while it backs off; the rollout goes no further.
	budget.Reset()
	editSet(t, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = image("slow-agent:missing") })
	waitForRollout(t, set, "Progressing", "1 of 3 matched pods carry hash", "1 restarting of at most 1 unavailable")
	var broken *corev1.Pod
	eventually(t, converge, "the kubelet to report the pull failure", func() (bool, string) {
		for _, p := range podsOf(t, ns, "rolled") {
			if st := status(&p, "agent"); st.State.Waiting != nil && (st.State.Waiting.Reason == "ErrImagePull" || st.State.Waiting.Reason == "ImagePullBackOff") {
				broken = &p
				return true, ""
			}
		}
		return false, "no agent waiting on a pull"
	})
	time.Sleep(5 * time.Second) // a runaway rollout would show itself by now
	for _, p := range podsOf(t, ns, "rolled") {
		if p.Name != broken.Name && containerNamed(p.Spec.Containers, "agent").Image != image("slow-agent:v2") {
			t.Errorf("pod %s took %s too: the rollout went past its budget", p.Name, containerNamed(p.Spec.Containers, "agent").Image)
		}
	}
	if got := budget.Highest(); got != 1 {
		t.Errorf("highest unavailable with a broken image: %d, want 1", got)
	}
	st := status(broken, "agent")
	t.Logf("broken image: pod %s agent waiting %s, status image %s", broken.Name, st.State.Waiting.Reason, st.Image)

	// Fixing the spec resumes the rollout, through every pod.
	editSet(t, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = image("slow-agent:v3") })
	took = waitForRollout(t, set, "Complete", "3 of 3 matched pods carry hash")
	waitForCounts(t, set, 3)
	t.Logf("after fixing the image the rollout completed in %s; highest unavailable %d", took.Round(100*time.Millisecond), budget.Highest())
	if got := budget.Highest(); got != 1 {
		t.Errorf("highest unavailable while fixing the image: %d, want 1", got)
	}
}

// TestResizeOnRealNode: a change of a sidecar's requests and limits reaches running pods
// through in-place resize, without restarting anything. A resize the node cannot take is
// refused by the API server, and one the kubelet fails (a memory-limit decrease after a restart,
// PodResizeInProgress with reason Error) is left to it: the operator reports either once, on the
// pod and the set, and never patches the pods again for it.
func TestResizeOnRealNode(t *testing.T) {
	ns := newNamespace(t, "realnode-resize")
	sized := func(cpuReq, memReq, cpuLim, memLim string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuReq), corev1.ResourceMemory: resource.MustParse(memReq)},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuLim), corev1.ResourceMemory: resource.MustParse(memLim)},
		}
	}
	agent := probed("agent", image("agent:v1"))
	agent.Resources = sized("50m", "32Mi", "200m", "64Mi")
	set := &appsv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "realnode-resize"},
		Spec: appsv1alpha1.SidecarSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "resized"}},
			Containers:     []appsv1alpha1.SidecarContainer{{Container: agent}},
			UpdateStrategy: appsv1alpha1.UpdateStrategy{Type: appsv1alpha1.RollingUpdate, MaxUnavailable: ptr.To(intstr.FromString("100%"))},
		},
	}
	createSet(t, set)
	newDeployment(t, ns, "resized", 2)
	waitForCounts(t, set, 2)
	before := snapshots(t, ns, "resized", "agent")

	bigger := sized("100m", "48Mi", "300m", "96Mi")
	editSet(t, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Resources = bigger })
	took := waitForRollout(t, set, "Complete", "2 of 2 matched pods carry hash")
	waitForCounts(t, set, 2)
	eventually(t, converge, "the kubelet to report the new resources", func() (bool, string) {
		for _, p := range podsOf(t, ns, "resized") {
			st := status(&p, "agent")
			if st.Resources == nil || !st.Resources.Limits.Memory().Equal(resource.MustParse("96Mi")) || !st.Resources.Requests.Cpu().Equal(resource.MustParse("100m")) {
				return false, fmt.Sprintf("pod %s agent resources %+v", p.Name, st.Resources)
			}
		}
		return true, ""
	})
	t.Logf("in-place resize of 2 pods complete in %s", took.Round(100*time.Millisecond))
	for _, p := range podsOf(t, ns, "resized") {
		st := status(&p, "agent")
		if b := before[p.Name]; st.ContainerID != b.ids["agent"] || st.RestartCount != b.restart["agent"] {
			t.Errorf("pod %s agent restarted by the resize: id %s (was %s), restarts %d (was %d)", p.Name, st.ContainerID, b.ids["agent"], st.RestartCount, b.restart["agent"])
		}
	}

	// A resize no node of this machine's size can take: the API server refuses it, and the
	// operator reports it on each pod and on the set, and never patches the pods for it again.
	editSet(t, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Resources = sized("64", "48Mi", "64", "96Mi") })
	waitForRollout(t, set, "PodsNotUpdatable", "0 of 2 matched pods carry hash", "2 pods cannot be updated in place")
	reportedOnce(t, ns, "resized", "the API server refused the in-place resize", nil)

	// Restart the sidecar (a new image), then lower its memory limit. kubelet 1.37 may fail to
	// decrease the memory limit of a container that was restarted before (it looks up the
	// container's memory usage by name and can find the exited instance, which has none):
	// PodResizeInProgress with reason Error, retried by the kubelet forever. Either the kubelet
	// applies the decrease, or the operator reports its refusal once and leaves the pods.
	editSet(t, set, func(s *appsv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Image = image("agent:v2")
		s.Spec.Containers[0].Resources = bigger
	})
	waitForRollout(t, set, "Complete", "2 of 2 matched pods carry hash")
	waitForCounts(t, set, 2)
	editSet(t, set, func(s *appsv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Resources = sized("100m", "48Mi", "300m", "64Mi")
	})
	// Each pod's own outcome: the kubelet applies the decrease, or fails it and the operator
	// reports that on the pod.
	const kubeletRefused = "the kubelet refused the in-place resize"
	refused := map[string]bool{}
	eventually(t, converge, "the memory decrease applied by the kubelet, or its refusal reported, on each pod", func() (bool, string) {
		settled, states := 0, []string{}
		for _, p := range podsOf(t, ns, "resized") {
			st := status(&p, "agent")
			switch n, msg := events(t, &p, "PodNotUpdatable", kubeletRefused); {
			case n > 0:
				refused[p.Name] = true
				settled++
				states = append(states, p.Name+": refused: "+msg)
			case st.Resources != nil && st.Resources.Limits.Memory().Equal(resource.MustParse("64Mi")):
				settled++
				states = append(states, p.Name+": applied")
			default:
				states = append(states, fmt.Sprintf("%s: resources %+v", p.Name, st.Resources))
			}
		}
		return settled == 2, strings.Join(states, "; ")
	})
	t.Logf("memory-limit decrease after a restart: refused by the kubelet on %d of 2 pods, applied on the others", len(refused))
	reportedOnce(t, ns, "resized", kubeletRefused, refused)
}

// reportedOnce waits until each pod of the app (those in only, when only is not nil) has one
// PodNotUpdatable event holding text, then checks for 10 s (many kubelet retries) that neither
// those pods' specs and annotations nor their number of such events change: reported once,
// never retried.
func reportedOnce(t *testing.T, ns, app, text string, only map[string]bool) {
	t.Helper()
	var pods []corev1.Pod
	for _, p := range podsOf(t, ns, app) {
		if only == nil || only[p.Name] {
			pods = append(pods, p)
		}
	}
	for i := range pods {
		p := &pods[i]
		eventually(t, converge, "the refusal reported on pod "+p.Name, func() (bool, string) {
			got, msg := events(t, p, "PodNotUpdatable", text)
			return got == 1, fmt.Sprintf("%d PodNotUpdatable events holding %q: %s", got, text, msg)
		})
		_, msg := events(t, p, "PodNotUpdatable", text)
		t.Logf("pod %s: %s", p.Name, msg)
	}
	// Read again after the events: the last write may have come just before them.
	before := map[string]corev1.Pod{}
	for _, p := range podsOf(t, ns, app) {
		before[p.Name] = p
	}
	time.Sleep(10 * time.Second)
	for i := range pods {
		name := pods[i].Name
		var now corev1.Pod
		must(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &now))
		was := before[name]
		if !equality.Semantic.DeepEqual(was.Spec, now.Spec) || !equality.Semantic.DeepEqual(was.Annotations, now.Annotations) {
			t.Errorf("pod %s was written to after its resize was refused", name)
		}
		if got, msg := events(t, &now, "PodNotUpdatable", text); got != 1 {
			t.Errorf("pod %s: %d PodNotUpdatable events holding %q after 10 s, want 1: %s", name, got, text, msg)
		}
	}
}

// events counts the events of that reason about the pod whose message holds text (an event's
// repeats included) and returns the last such message.
func events(t testing.TB, pod *corev1.Pod, reason, text string) (int32, string) {
	t.Helper()
	var list corev1.EventList
	must(t, k8s.List(ctx, &list, client.InNamespace(pod.Namespace)))
	var n int32
	msg := ""
	for _, e := range list.Items {
		if e.InvolvedObject.Name == pod.Name && e.Reason == reason && strings.Contains(e.Message, text) {
			n += max(e.Count, 1)
			if e.Series != nil {
				n += e.Series.Count - 1
			}
			msg = e.Message
		}
	}
	return n, msg
}

func withRestartAlways(c corev1.Container) corev1.Container {
	c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	return c
}

func containerNamed(list []corev1.Container, name string) *corev1.Container {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}
