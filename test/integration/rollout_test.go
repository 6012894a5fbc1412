package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/test/builders"
	"github.com/sidecarset/sidecarset-operator/test/testutil"
)

// fakeKubelet plays the kubelet for the pods of one namespace (envtest has none): it reports
// every container running its spec image and the pod Ready; when a container's image changes
// in the spec, it takes the pod out of Ready, and after delay reports the new image running and
// the pod Ready again, unless the image contains "broken" (such a container never becomes
// ready, nor does one the pod was created with). At every scan it counts the pods that are unavailable (not Ready, or running another
// image than the spec names) and keeps the highest count.
type fakeKubelet struct {
	ns    string
	delay time.Duration
	// keepsReady: while a container restarts for a new image, report the old image still
	// running and ready, and the pod Ready, as a real kubelet does for the old container's
	// termination grace period.
	keepsReady bool
	// refusesResize: a container's resources changed since the kubelet first saw the pod get
	// the PodResizePending condition with reason Infeasible, as a node without room for them
	// reports.
	refusesResize bool

	testutil.Budget
	since map[string]time.Time // pod/container -> when its image changed; only scan uses it
	// resources: pod/container -> the resources the kubelet first saw; only scan uses it.
	resources map[string]corev1.ResourceRequirements
}

func startFakeKubelet(t *testing.T, ns string, delay time.Duration) *fakeKubelet {
	t.Helper()
	return runFakeKubelet(t, &fakeKubelet{ns: ns, delay: delay})
}

func runFakeKubelet(t *testing.T, k *fakeKubelet) *fakeKubelet {
	t.Helper()
	k.since, k.resources = map[string]time.Time{}, map[string]corev1.ResourceRequirements{}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-tick.C:
				k.scan(runCtx)
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return k
}

func (k *fakeKubelet) scan(ctx context.Context) {
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(k.ns)); err != nil {
		return
	}
	k.Observe(pods.Items)
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.DeletionTimestamp != nil {
			continue
		}
		want := k.statusOf(pod)
		if !equalStatuses(pod.Status, want) {
			pod.Status = want
			//conflict-safe: a kubelet writes again what it reads: a conflict is retried at the next scan.
			_ = k8s.Status().Update(ctx, pod)
		}
	}
}

// statusOf is the status a kubelet would report now.
func (k *fakeKubelet) statusOf(pod *corev1.Pod) corev1.PodStatus {
	st := corev1.PodStatus{Phase: corev1.PodRunning}
	ready := true
	report := func(specs []corev1.Container, old []corev1.ContainerStatus) []corev1.ContainerStatus {
		var out []corev1.ContainerStatus
		for _, c := range specs {
			key := pod.Name + "/" + c.Name
			cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: true}
			for _, o := range old {
				if o.Name == c.Name && o.Image != c.Image {
					since, ok := k.since[key]
					if !ok {
						k.since[key], since = time.Now(), time.Now()
					}
					if time.Since(since) < k.delay || strings.Contains(c.Image, "broken") {
						cs.Image, cs.Ready = o.Image, k.keepsReady
					}
				}
			}
			if strings.Contains(cs.Image, "broken") {
				cs.Ready = false // created with it: never ready
			}
			if cs.Image == c.Image && cs.Ready {
				delete(k.since, key)
			}
			ready = ready && cs.Ready
			out = append(out, cs)
		}
		return out
	}
	st.InitContainerStatuses = report(pod.Spec.InitContainers, pod.Status.InitContainerStatuses)
	st.ContainerStatuses = report(pod.Spec.Containers, pod.Status.ContainerStatuses)
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	st.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == cond {
			st.Conditions[0].LastTransitionTime = c.LastTransitionTime
		}
	}
	if st.Conditions[0].LastTransitionTime.IsZero() {
		st.Conditions[0].LastTransitionTime = metav1.Now()
	}
	if k.refusesResize && k.resized(pod) {
		st.Conditions = append(st.Conditions, corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue,
			Reason: corev1.PodReasonInfeasible, Message: "Node didn't have enough capacity: cpu", LastTransitionTime: metav1.Now()})
	}
	return st
}

// resized reports whether a container's resources changed since the kubelet first saw the pod.
func (k *fakeKubelet) resized(pod *corev1.Pod) bool {
	changed := false
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			key := pod.Name + "/" + c.Name
			first, seen := k.resources[key]
			if !seen {
				k.resources[key] = c.Resources
				continue
			}
			changed = changed || !equality.Semantic.DeepEqual(first, c.Resources)
		}
	}
	return changed
}

func equalStatuses(a, b corev1.PodStatus) bool {
	conditions := func(st corev1.PodStatus) string {
		var out []string
		for _, c := range st.Conditions {
			out = append(out, fmt.Sprint(c.Type, c.Status, c.Reason))
		}
		return strings.Join(out, ",")
	}
	return fmt.Sprint(a.ContainerStatuses, a.InitContainerStatuses, a.Phase, conditions(a)) ==
		fmt.Sprint(b.ContainerStatuses, b.InitContainerStatuses, b.Phase, conditions(b))
}

// rollingSet is a set with a regular and a native sidecar, updated in place one pod at a time.
func rollingSet(name, app string) *appsv1alpha1.SidecarSet {
	set := agentSet(name, app, builders.Rolling())
	set.Spec.InitContainers = []appsv1alpha1.SidecarContainer{{Container: corev1.Container{
		Name: name + "-proxy", Image: "registry.example/proxy:1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}}
	return set
}

// rolloutPods creates n opted-in pods of app in ns, running and Ready under k.
func rolloutPods(t *testing.T, ns, app string, n int) []*corev1.Pod {
	t.Helper()
	var pods []*corev1.Pod
	for i := range n {
		pod := appPod(ns, fmt.Sprintf("%s-%d", app, i), app, true)
		must(t, k8s.Create(ctx, pod))
		pods = append(pods, pod)
	}
	return pods
}

// setImages changes the set's sidecar images.
func setImages(t *testing.T, set *appsv1alpha1.SidecarSet, mutate func(*appsv1alpha1.SidecarSet)) {
	t.Helper()
	eventually(t, "the SidecarSet to be updated", func() (bool, string) {
		err := testutil.Edit(ctx, k8s, &appsv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: set.Name}}, mutate)
		return err == nil, fmt.Sprint(err)
	})
}

func rollingCondition(t *testing.T, set *appsv1alpha1.SidecarSet, reason string, text ...string) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s's RollingUpdate condition to be %s", set.Name, reason), func() (bool, string) {
		var cur appsv1alpha1.SidecarSet
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(set), &cur); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, appsv1alpha1.ConditionRollingUpdate)
		if c == nil || cur.Status.ObservedGeneration != cur.Generation {
			return false, fmt.Sprintf("%+v", cur.Status)
		}
		return c.Reason == reason && contains(c.Message, text...), c.Reason + ": " + c.Message
	})
}

// imagesOf is "container=image" for every container of the pod, init containers first.
func imagesOf(pod *corev1.Pod) string {
	var out []string
	for _, l := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range l {
			out = append(out, c.Name+"="+c.Image)
		}
	}
	return strings.Join(out, ",")
}

// TestRollingUpdateInPlace rolls new images of a regular and a native sidecar through running
// pods: same pods (UIDs), app containers untouched, never more than maxUnavailable pods
// unavailable at any observed moment, and the status ends Complete with every pod updated and
// ready.
func TestRollingUpdateInPlace(t *testing.T) {
	ns := newNamespace(t, nil)
	kubelet := startFakeKubelet(t, ns, 300*time.Millisecond)
	set := createSet(t, rollingSet("roll", "roll"))
	pods := rolloutPods(t, ns, "roll", 4)
	waitForCounts(t, set, counts{4, 4, 4, 4})
	before := map[string]*corev1.Pod{}
	for _, p := range pods {
		before[p.Name] = getPod(t, p)
	}
	kubelet.Reset()

	setImages(t, set, func(s *appsv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Image = "registry.example/agent:2.0"
		s.Spec.InitContainers[0].Image = "registry.example/proxy:2"
	})
	rollingCondition(t, set, "Complete", "4 of 4 matched pods carry hash")
	waitForCounts(t, set, counts{4, 4, 4, 4})
	for _, p := range pods {
		after := getPod(t, p)
		old := before[p.Name]
		if after.UID != old.UID {
			t.Errorf("pod %s was recreated", p.Name)
		}
		if got, want := imagesOf(after), "roll-proxy=registry.example/proxy:2,app=registry.example/app:2.1,roll-agent=registry.example/agent:2.0"; got != want {
			t.Errorf("pod %s images %s, want %s", p.Name, got, want)
		}
		if fmt.Sprint(after.Spec.Containers[0]) != fmt.Sprint(old.Spec.Containers[0]) {
			t.Errorf("pod %s: the app container changed:\n%+v\n%+v", p.Name, old.Spec.Containers[0], after.Spec.Containers[0])
		}
	}
	if got := kubelet.Highest(); got != 1 {
		t.Errorf("at most %d pods were unavailable at once during the rollout, want exactly 1 (maxUnavailable 1)", got)
	}
}

// TestRollingUpdatePartitionPauseAndBlocked: a partition keeps the last pods by name; paused
// starts nothing; a change that a running pod cannot take is reported (counted by
// namespace in the condition, why on each pod), and nothing is patched.
func TestRollingUpdatePartitionPauseAndBlocked(t *testing.T) {
	ns := newNamespace(t, nil)
	startFakeKubelet(t, ns, 100*time.Millisecond)
	set := rollingSet("part", "part")
	set.Spec.UpdateStrategy.Partition = ptr.To(intstr.FromInt32(2))
	set.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromString("50%"))
	createSet(t, set)
	pods := rolloutPods(t, ns, "part", 4)
	waitForCounts(t, set, counts{4, 4, 4, 4})

	setImages(t, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "registry.example/agent:2.0" })
	rollingCondition(t, set, "Complete", "2 of 4 matched pods carry hash", "partition keeps 2")
	for i, p := range pods {
		want := map[bool]string{true: "registry.example/agent:2.0", false: "registry.example/agent:1.0"}[i < 2]
		if got := getPod(t, p).Spec.Containers[1].Image; got != want {
			t.Errorf("pod %s runs %s, want %s (the partition keeps the last 2 by name)", p.Name, got, want)
		}
	}

	setImages(t, set, func(s *appsv1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy.Partition = nil
		s.Spec.UpdateStrategy.Paused = true
	})
	rollingCondition(t, set, "Paused", "2 pods wait")
	if got := getPod(t, pods[3]).Spec.Containers[1].Image; got != "registry.example/agent:1.0" {
		t.Errorf("a paused rollout updated %s to %s", pods[3].Name, got)
	}

	setImages(t, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Paused = false })
	rollingCondition(t, set, "Complete", "4 of 4 matched pods carry hash")

	// An env change cannot be applied to a running pod.
	setImages(t, set, func(s *appsv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Image = "registry.example/agent:3.0"
		s.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "LEVEL", Value: "debug"}}
	})
	rollingCondition(t, set, "PodsNotUpdatable", "4 pods cannot be updated in place", "("+ns+": 4)")
	waitForEvent(t, "Pod", ns, "part-0", "PodNotUpdatable", "spec.containers[part-agent].env: changed")
	for _, p := range pods {
		if got := getPod(t, p).Spec.Containers[1].Image; got != "registry.example/agent:2.0" {
			t.Errorf("pod %s was patched to %s although it cannot take the change", p.Name, got)
		}
	}
}

// TestRollingUpdateStopsAtABrokenImage: an image that never becomes ready stops the rollout at
// maxUnavailable; the status counts the pod unavailable.
func TestRollingUpdateStopsAtABrokenImage(t *testing.T) {
	ns := newNamespace(t, nil)
	kubelet := startFakeKubelet(t, ns, 100*time.Millisecond)
	set := createSet(t, rollingSet("broken", "broken"))
	pods := rolloutPods(t, ns, "broken", 3)
	waitForCounts(t, set, counts{3, 3, 3, 3})
	kubelet.Reset()

	setImages(t, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "registry.example/agent:broken" })
	rollingCondition(t, set, "Progressing", "1 of 3 matched pods carry hash", "1 restarting of at most 1 unavailable")
	time.Sleep(time.Second) // give a runaway rollout the time to show itself
	updated := 0
	for _, p := range pods {
		if getPod(t, p).Spec.Containers[1].Image == "registry.example/agent:broken" {
			updated++
		}
	}
	var cur appsv1alpha1.SidecarSet
	must(t, k8s.Get(ctx, types.NamespacedName{Name: set.Name}, &cur))
	if updated != 1 || cur.Status.UnavailablePods != 1 || cur.Status.UpdatedReadyPods != 0 || kubelet.Highest() != 1 {
		t.Errorf("broken image: %d pods patched, status unavailable %d, updatedReady %d, highest unavailable %d; want 1, 1, 0, 1",
			updated, cur.Status.UnavailablePods, cur.Status.UpdatedReadyPods, kubelet.Highest())
	}
}

// TestRollingUpdateResizesInPlace: new requests and limits go through the pods/resize
// subresource (in-place resize), together with a new image; what a LimitRange gave the sidecar
// and the app container stay.
func TestRollingUpdateResizesInPlace(t *testing.T) {
	ns := limitRangeNamespace(t)
	startFakeKubelet(t, ns, 50*time.Millisecond)
	set := createSet(t, rollingSet("resize", "resize"))
	pods := rolloutPods(t, ns, "resize", 2)
	waitForCounts(t, set, counts{2, 2, 2, 2})
	before := getPod(t, pods[0])

	setImages(t, set, func(s *appsv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Image = "registry.example/agent:2.0"
		s.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("20m")
		s.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("200m")
	})
	if kubernetesMinor < 33 {
		// No pods/resize: neither the resources nor the image change, and each pod says why.
		rollingCondition(t, set, "PodsNotUpdatable", "0 of 2 matched pods carry hash", "2 pods cannot be updated in place")
		waitForEvent(t, "Pod", ns, pods[0].Name, "PodNotUpdatable", "does not serve pods/resize", "Kubernetes 1.33")
		if after := getPod(t, pods[0]); !equality.Semantic.DeepEqual(after.Spec, before.Spec) {
			t.Errorf("the pod changed on an API server without pods/resize:\n%+v\n%+v", before.Spec, after.Spec)
		}
		return
	}
	rollingCondition(t, set, "Complete", "2 of 2 matched pods carry hash")
	after := getPod(t, pods[0])
	agent := after.Spec.Containers[1]
	if after.UID != before.UID || agent.Image != "registry.example/agent:2.0" ||
		agent.Resources.Requests.Cpu().String() != "20m" || agent.Resources.Limits.Cpu().String() != "200m" ||
		agent.Resources.Requests.Memory().String() != "64Mi" || agent.Resources.Limits.Memory().String() != "128Mi" {
		t.Errorf("sidecar after the update: uid changed %v, image %s, resources %+v; want agent:2.0, cpu 20m/200m, the LimitRange's memory 64Mi/128Mi kept",
			after.UID != before.UID, agent.Image, agent.Resources)
	}
	if fmt.Sprint(after.Spec.Containers[0]) != fmt.Sprint(before.Spec.Containers[0]) {
		t.Errorf("the app container changed:\n%+v\n%+v", before.Spec.Containers[0], after.Spec.Containers[0])
	}
}

// TestInfeasibleResizeIsReportedNotRetried: a resize the kubelet refuses (PodResizePending,
// Infeasible) leaves the pod updated by its record but not by its resources: the condition
// counts it, an event on the pod says why, and the rollout does not patch it again.
func TestInfeasibleResizeIsReportedNotRetried(t *testing.T) {
	needsKubernetes(t, 33, "in-place resize (pods/resize)")
	ns := limitRangeNamespace(t)
	runFakeKubelet(t, &fakeKubelet{ns: ns, delay: 50 * time.Millisecond, refusesResize: true})
	set := createSet(t, rollingSet("infeasible", "infeasible"))
	pods := rolloutPods(t, ns, "infeasible", 2)
	waitForCounts(t, set, counts{2, 2, 2, 2})

	setImages(t, set, func(s *appsv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("200m")
	})
	rollingCondition(t, set, "PodsNotUpdatable", "2 of 2 matched pods carry hash", "2 pods cannot be updated in place")
	waitForEvent(t, "Pod", ns, pods[0].Name, "PodNotUpdatable", "the kubelet refused the in-place resize", "Infeasible", "Node didn't have enough capacity")
	rv := getPod(t, pods[0]).ResourceVersion
	stays(t, 2*time.Second, "the refused pod left alone", func() (bool, string) {
		pod := getPod(t, pods[0])
		return pod.ResourceVersion == rv, "resourceVersion " + pod.ResourceVersion
	})
}

// TestRevisionsAreStoredPrunedAndRenumbered: every distinct content is stored as a
// ControllerRevision in the operator's namespace, owned by the set; the history limit holds;
// going back to stored content makes that revision the newest again; status names the current
// one.
func TestRevisionsAreStoredPrunedAndRenumbered(t *testing.T) {
	set := agentSet("revs", "revs")
	set.Spec.RevisionHistoryLimit = ptr.To[int32](1)
	createSet(t, set)
	revisions := func() []string {
		var list appsv1.ControllerRevisionList
		must(t, k8s.List(ctx, &list, client.InNamespace(operatorNamespace), client.MatchingLabels{appsv1alpha1.RevisionSetLabel: "revs"}))
		slices.SortFunc(list.Items, func(a, b appsv1.ControllerRevision) int { return int(a.Revision - b.Revision) })
		var out []string
		for _, r := range list.Items {
			if len(r.OwnerReferences) != 1 || r.OwnerReferences[0].Name != "revs" {
				t.Errorf("revision %s owners %+v, want the SidecarSet", r.Name, r.OwnerReferences)
			}
			out = append(out, r.Labels[appsv1alpha1.RevisionHashLabel])
		}
		return out
	}
	var hashes []string
	for _, image := range []string{"registry.example/agent:1.0", "registry.example/agent:2.0", "registry.example/agent:3.0"} {
		setImages(t, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = image })
		var cur appsv1alpha1.SidecarSet
		eventually(t, "the revision of "+image, func() (bool, string) {
			must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), &cur))
			return cur.Status.ObservedGeneration == cur.Generation && cur.Status.UpdateRevision == "revs-"+cur.Status.Hash,
				fmt.Sprintf("status %+v", cur.Status)
		})
		hashes = append(hashes, cur.Status.Hash)
	}
	eventually(t, "the history limit", func() (bool, string) {
		got := revisions()
		return slices.Equal(got, hashes[1:]), fmt.Sprintf("revisions %v, want %v", got, hashes[1:])
	})
	// Back to 2.0: its revision becomes the newest.
	setImages(t, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "registry.example/agent:2.0" })
	eventually(t, "the rollback's revision to be the newest", func() (bool, string) {
		got := revisions()
		return slices.Equal(got, []string{hashes[2], hashes[1]}), fmt.Sprintf("revisions %v, want %v", got, []string{hashes[2], hashes[1]})
	})
}

// TestRollingUpdateLeavesEditedSidecarsAlone: a sidecar image someone set by hand since
// injection is not overwritten; the status counts the pod, an event on it says why.
func TestRollingUpdateLeavesEditedSidecarsAlone(t *testing.T) {
	ns := newNamespace(t, nil)
	startFakeKubelet(t, ns, 50*time.Millisecond)
	set := createSet(t, rollingSet("edited", "edited"))
	pods := rolloutPods(t, ns, "edited", 2)
	waitForCounts(t, set, counts{2, 2, 2, 2})
	eventually(t, "the revision to be stored", func() (bool, string) {
		var cur appsv1alpha1.SidecarSet
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), &cur))
		return cur.Status.UpdateRevision != "", cur.Status.UpdateRevision
	})
	must(t, testutil.Edit(ctx, k8s, pods[0].DeepCopy(), func(hotfix *corev1.Pod) {
		hotfix.Spec.Containers[1].Image = "registry.example/agent:1.0-hotfix"
	}))

	setImages(t, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "registry.example/agent:2.0" })
	rollingCondition(t, set, "PodsNotUpdatable", "1 pods cannot be updated in place", "("+ns+": 1)")
	// The blocked pod says why; the set says its rollout is stuck; the updated pod says what changed.
	waitForEvent(t, "Pod", ns, "edited-0", "PodNotUpdatable", "SidecarSet edited cannot update", "spec.containers[edited-agent].image: changed since injection")
	waitForSetEvent(t, set, "PodsNotUpdatable", "1 pods cannot be updated in place")
	waitForEvent(t, "Pod", ns, "edited-1", "SidecarUpdated", "registry.example/agent:1.0 -> registry.example/agent:2.0")
	if got := getPod(t, pods[0]).Spec.Containers[1].Image; got != "registry.example/agent:1.0-hotfix" {
		t.Errorf("the hand-set image was overwritten with %s", got)
	}
	if got := getPod(t, pods[1]).Spec.Containers[1].Image; got != "registry.example/agent:2.0" {
		t.Errorf("the untouched pod was not updated: %s", got)
	}

	// Someone reverts the hand edit: the pod is looked at again and updated.
	must(t, testutil.Edit(ctx, k8s, pods[0].DeepCopy(), func(reverted *corev1.Pod) {
		reverted.Spec.Containers[1].Image = "registry.example/agent:1.0"
	}))
	rollingCondition(t, set, "Complete", "2 of 2 matched pods carry hash")
	if got := getPod(t, pods[0]).Spec.Containers[1].Image; got != "registry.example/agent:2.0" {
		t.Errorf("the reverted pod was not updated: %s", got)
	}
}

// TestPinnedRevisionForNewPods canaries a new image on one running pod while new pods keep
// getting the known one: the set pins the revision labelled with its custom version.
func TestPinnedRevisionForNewPods(t *testing.T) {
	ns := newNamespace(t, nil)
	startFakeKubelet(t, ns, 50*time.Millisecond)
	set := rollingSet("pinned", "pinned")
	set.Labels = map[string]string{appsv1alpha1.CustomVersionLabel: "stable"}
	createSet(t, set)
	pods := rolloutPods(t, ns, "pinned", 2)
	waitForCounts(t, set, counts{2, 2, 2, 2})
	eventually(t, "the stable revision to be stored", func() (bool, string) {
		var list appsv1.ControllerRevisionList
		must(t, k8s.List(ctx, &list, client.InNamespace(operatorNamespace), client.MatchingLabels{appsv1alpha1.CustomVersionLabel: "stable"}))
		return len(list.Items) == 1, fmt.Sprint(len(list.Items))
	})

	setImages(t, set, func(s *appsv1alpha1.SidecarSet) {
		s.Labels[appsv1alpha1.CustomVersionLabel] = "canary"
		s.Spec.Containers[0].Image = "registry.example/agent:2.0"
		s.Spec.InjectionStrategy.Revision = &appsv1alpha1.RevisionRef{CustomVersion: "stable"}
		s.Spec.UpdateStrategy.Partition = ptr.To(intstr.FromInt32(1))
	})
	rollingCondition(t, set, "Complete", "1 of 2 matched pods carry hash", "partition keeps 1")
	if got := getPod(t, pods[0]).Spec.Containers[1].Image; got != "registry.example/agent:2.0" {
		t.Errorf("the canary pod runs %s, want agent:2.0", got)
	}
	fresh := appPod(ns, "pinned-new", "pinned", true)
	must(t, k8s.Create(ctx, fresh))
	if got := fresh.Spec.Containers[len(fresh.Spec.Containers)-1].Image; got != "registry.example/agent:1.0" {
		t.Errorf("a new pod got %s, want the pinned revision's agent:1.0", got)
	}
}

// TestPartialRevisionForNewPods: with policy Partial, the new pods the update selector picks
// are drawn, by their admission requests, between the pinned revision and the current spec;
// the others get the pinned revision. The API server refuses a numeric partition with it.
func TestPartialRevisionForNewPods(t *testing.T) {
	ns := newNamespace(t, nil)
	set := rollingSet("partial", "partial")
	set.Labels = map[string]string{appsv1alpha1.CustomVersionLabel: "stable"}
	createSet(t, set)
	eventually(t, "the stable revision to be stored", func() (bool, string) {
		var list appsv1.ControllerRevisionList
		must(t, k8s.List(ctx, &list, client.InNamespace(operatorNamespace), client.MatchingLabels{
			appsv1alpha1.CustomVersionLabel: "stable", appsv1alpha1.RevisionSetLabel: "partial"}))
		return len(list.Items) == 1, fmt.Sprint(len(list.Items))
	})

	err := testutil.Edit(ctx, k8s, set.DeepCopy(), func(cur *appsv1alpha1.SidecarSet) {
		cur.Spec.InjectionStrategy.Revision = &appsv1alpha1.RevisionRef{CustomVersion: "stable", Policy: appsv1alpha1.RevisionPolicyPartial}
		cur.Spec.UpdateStrategy.Partition = ptr.To(intstr.FromInt32(1))
	})
	if err == nil || !contains(err.Error(), "spec.updateStrategy.partition", "write updateStrategy.partition as a percentage") {
		t.Fatalf("a numeric partition with policy Partial: got %v, want a refusal naming spec.updateStrategy.partition", err)
	}

	setImages(t, set, func(s *appsv1alpha1.SidecarSet) {
		s.Labels[appsv1alpha1.CustomVersionLabel] = "canary"
		s.Spec.Containers[0].Image = "registry.example/agent:2.0"
		s.Spec.InjectionStrategy.Revision = &appsv1alpha1.RevisionRef{CustomVersion: "stable", Policy: appsv1alpha1.RevisionPolicyPartial}
		s.Spec.UpdateStrategy.Partition = ptr.To(intstr.FromString("50%"))
		s.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"track": "canary"}}
	})
	eventually(t, "the webhook to draw between two versions", func() (bool, string) {
		c, ok := op.Sets.Load().Get("partial")
		return ok && c.Latest() != nil, "no current spec beside the pinned revision yet"
	})

	images := func(track string, n int) map[string]int {
		got := map[string]int{}
		for i := range n {
			pod := appPod(ns, fmt.Sprintf("%s-%d", track, i), "partial", true)
			pod.Labels["track"] = track
			must(t, k8s.Create(ctx, pod))
			image := pod.Spec.Containers[len(pod.Spec.Containers)-1].Image
			hash, _ := inject.InjectedHash(pod.Annotations, "partial")
			got[image]++
			// The record names the content the pod got, so the rollout and status see it.
			if c, _ := op.Sets.Load().Get("partial"); (image == "registry.example/agent:2.0") != (hash == c.Latest().Hash) {
				t.Errorf("pod %s runs %s but records hash %s (current spec %s)", pod.Name, image, hash, c.Latest().Hash)
			}
		}
		return got
	}
	// 20 draws at 50%: all alike has a chance of 2 in a million.
	if got := images("canary", 20); got["registry.example/agent:1.0"] == 0 || got["registry.example/agent:2.0"] == 0 {
		t.Errorf("pods the update selector matches got %v, want both the pinned agent:1.0 and the current agent:2.0", got)
	}
	if got := images("stable", 5); got["registry.example/agent:1.0"] != 5 {
		t.Errorf("pods the update selector does not match got %v, want the pinned agent:1.0 for all 5", got)
	}
}
