package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/revision"
	"github.com/sidecarset/sidecarset-operator/test/testutil"
)

// The rollout where it meets other jobs: refusals by other admission, pods being deleted,
// spec changes while restarts are in flight, revisions pruned, pods never injected, pods
// still starting, old kubelets.

// stays fails the test if cond stops holding within d: the check of something that must not
// happen (a runaway rollout), bounded in time.
func stays(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if ok, seen := cond(); !ok {
			t.Fatalf("%s stopped holding: %s", what, seen)
		}
	}
}

// agentImage is the image of the set's regular sidecar in the pod, read afresh.
func agentImage(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	got := getPod(t, pod)
	return got.Spec.Containers[len(got.Spec.Containers)-1].Image
}

// TestRolloutSkipsAPodWhosePatchIsRefused: an admission policy in one namespace refuses the
// image patch; that pod is reported (an event naming the refusal, the condition counting it by
// namespace), the pod in the other namespace is updated, and the status is written.
func TestRolloutSkipsAPodWhosePatchIsRefused(t *testing.T) {
	guarded := newNamespace(t, map[string]string{"images": "signed-only"})
	open := newNamespace(t, nil)
	startFakeKubelet(t, guarded, 50*time.Millisecond)
	startFakeKubelet(t, open, 50*time.Millisecond)
	refuseImageUpdates(t, "images", "signed-only", ":2.0")
	set := createSet(t, rollingSet("refused", "refused"))
	blocked := appPod(guarded, "refused-0", "refused", true)
	must(t, k8s.Create(ctx, blocked))
	free := appPod(open, "refused-1", "refused", true)
	must(t, k8s.Create(ctx, free))
	waitForCounts(t, set, counts{2, 2, 2, 2})

	setImages(t, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "registry.example/agent:2.0" })
	rollingCondition(t, set, "PodsNotUpdatable", "1 of 2 matched pods carry hash", "1 pods cannot be updated in place", "("+guarded+": 1)")
	waitForEvent(t, "Pod", guarded, blocked.Name, "PodNotUpdatable", "the API server refused the image update", "only signed images")
	if got := agentImage(t, free); got != "registry.example/agent:2.0" {
		t.Errorf("the pod in the other namespace runs %s, want agent:2.0", got)
	}
	if got := agentImage(t, blocked); got != "registry.example/agent:1.0" {
		t.Errorf("the refused pod runs %s", got)
	}
}

// refuseImageUpdates installs a ValidatingAdmissionPolicy that refuses pod updates to images
// ending in suffix in namespaces labelled key=value, and waits until the API server enforces it.
func refuseImageUpdates(t *testing.T, key, value, suffix string) {
	t.Helper()
	name := "refuse-" + strings.NewReplacer(":", "", ".", "-").Replace(suffix) + "-" + value
	denyByPolicy(t, name, admissionregistrationv1.Update, "", "pods",
		fmt.Sprintf("object.spec.containers.all(c, !c.image.endsWith(%q))", suffix), "only signed images may run here",
		&metav1.LabelSelector{MatchLabels: map[string]string{key: value}})

	// A probe pod in a namespace of its own, labelled alike: the policy is in force once a
	// dry-run update to such an image is refused.
	probeNS := newNamespace(t, map[string]string{key: value})
	probe := appPod(probeNS, "probe", "probe-"+value, false)
	must(t, k8s.Create(ctx, probe))
	eventually(t, "the admission policy to be enforced", func() (bool, string) {
		cur := getPod(t, probe)
		cur.Spec.Containers[0].Image = "registry.example/app" + suffix
		//conflict-safe: a dry run, read again on every attempt of eventually; a conflict is one more attempt.
		err := k8s.Update(ctx, cur, client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "only signed images"), fmt.Sprint(err)
	})
}

// denyByPolicy installs a ValidatingAdmissionPolicy and its binding refusing the operation on
// the resource wherever expression is false (in namespaces matching namespaces, when set).
func denyByPolicy(t *testing.T, name string, op admissionregistrationv1.OperationType, group, resource, expression, message string, namespaces *metav1.LabelSelector) {
	t.Helper()
	version := "v1"
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{op},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{version}, Resources: []string{resource}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: expression, Message: message}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	if namespaces != nil {
		binding.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: namespaces}
	}
	must(t, k8s.Create(ctx, policy))
	t.Cleanup(func() { deleteIgnoreNotFound(t, policy) })
	must(t, k8s.Create(ctx, binding))
	t.Cleanup(func() { deleteIgnoreNotFound(t, binding) })
}

// TestStatusIsWrittenWhenRevisionsCannotBeStored: an admission policy refuses the set's
// revisions; the reconcile still counts the pods and writes the status, and says nothing of a
// revision it could not store.
func TestStatusIsWrittenWhenRevisionsCannotBeStored(t *testing.T) {
	denyByPolicy(t, "refuse-norevision-revisions", admissionregistrationv1.Create, "apps", "controllerrevisions",
		fmt.Sprintf("!has(object.metadata.labels) || object.metadata.labels[%q] != 'norevision'", appsv1alpha1.RevisionSetLabel),
		"no revisions for this set", nil)
	eventually(t, "the admission policy to be enforced", func() (bool, string) {
		probe := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: "norevision-probe",
			Labels: map[string]string{appsv1alpha1.RevisionSetLabel: "norevision"}}, Revision: 1, Data: runtime.RawExtension{Raw: []byte("{}")}}
		err := k8s.Create(ctx, probe, client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "no revisions for this set"), fmt.Sprint(err)
	})
	ns := newNamespace(t, nil)
	startFakeKubelet(t, ns, 50*time.Millisecond)
	set := createSet(t, rollingSet("norevision", "norevision")) // waits for its status to be written
	rolloutPods(t, ns, "norevision", 2)
	got := waitForCounts(t, set, counts{2, 2, 2, 2})
	if got.Status.UpdateRevision != "" {
		t.Errorf("status.updateRevision = %q, a revision that could not be stored", got.Status.UpdateRevision)
	}
}

// TestTerminatingPodHoldsTheBudget: with 3 pods, one being deleted (a finalizer holds it),
// and maxUnavailable 1, no pod restarts until the deleted one is gone; then the rollout
// completes one pod at a time.
func TestTerminatingPodHoldsTheBudget(t *testing.T) {
	ns := newNamespace(t, nil)
	kubelet := startFakeKubelet(t, ns, 100*time.Millisecond)
	set := createSet(t, rollingSet("terminating", "terminating"))
	pods := rolloutPods(t, ns, "terminating", 3)
	waitForCounts(t, set, counts{3, 3, 3, 3})
	held := pods[2].DeepCopy()
	must(t, testutil.Edit(ctx, k8s, held, func(p *corev1.Pod) { p.Finalizers = []string{"example.com/hold"} }))
	must(t, k8s.Delete(ctx, held))
	waitForCounts(t, set, counts{2, 2, 2, 2})
	kubelet.Reset()

	setImages(t, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "registry.example/agent:2.0" })
	rollingCondition(t, set, "Progressing", "0 of 2 matched pods carry hash", "namespaces "+ns)
	stays(t, 2*time.Second, "no pod restarting while one is being deleted", func() (bool, string) {
		a, b := agentImage(t, pods[0]), agentImage(t, pods[1])
		return a == "registry.example/agent:1.0" && b == "registry.example/agent:1.0", a + ", " + b
	})

	must(t, testutil.Edit(ctx, k8s, held, func(p *corev1.Pod) { p.Finalizers = nil }))
	rollingCondition(t, set, "Complete", "2 of 2 matched pods carry hash")
	if got := kubelet.Highest(); got != 1 {
		t.Errorf("at most %d pods were unavailable at once (the deleted one included), want 1", got)
	}
}

// TestSpecChangeMidRolloutCountsRestartsInFlight: a kubelet that, like a real one, reports the
// old image running and the pod Ready while the old container terminates. The canary selector
// and the image change while the canary pod restarts: that pod no longer takes part in the
// rollout, but it still counts against the budget, so no other pod starts until it runs what
// it was patched with.
func TestSpecChangeMidRolloutCountsRestartsInFlight(t *testing.T) {
	ns := newNamespace(t, nil)
	kubelet := runFakeKubelet(t, &fakeKubelet{ns: ns, delay: 2 * time.Second, keepsReady: true})
	set := createSet(t, rollingSet("inflight", "inflight"))
	pods := rolloutPods(t, ns, "inflight", 3)
	waitForCounts(t, set, counts{3, 3, 3, 3})
	for i, p := range pods {
		must(t, testutil.Edit(ctx, k8s, p.DeepCopy(), func(cur *corev1.Pod) { cur.Labels["canary"] = fmt.Sprint(i == 0) }))
	}
	kubelet.Reset()

	setImages(t, set, func(s *appsv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Image = "registry.example/agent:2.0"
		s.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}
	})
	eventually(t, "the canary pod to be patched", func() (bool, string) {
		got := agentImage(t, pods[0])
		return got == "registry.example/agent:2.0", got
	})
	setImages(t, set, func(s *appsv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Image = "registry.example/agent:3.0"
		s.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "false"}}
	})
	rollingCondition(t, set, "Complete", "2 of 3 matched pods carry hash")
	if got := kubelet.Highest(); got != 1 {
		t.Errorf("at most %d pods were unavailable at once, want 1 (maxUnavailable 1)", got)
	}
}

// TestEditedSidecarsOutliveRevisionPruning: with revisionHistoryLimit 0 the revision that pods
// still record is kept, so a hand-edited sidecar is still told apart and left alone; a pod
// whose injected revision is gone all the same is never patched.
func TestEditedSidecarsOutliveRevisionPruning(t *testing.T) {
	ns := newNamespace(t, nil)
	startFakeKubelet(t, ns, 50*time.Millisecond)
	set := rollingSet("pruned", "pruned")
	set.Spec.RevisionHistoryLimit = ptr.To[int32](0)
	createSet(t, set)
	pods := rolloutPods(t, ns, "pruned", 3)
	first := waitForCounts(t, set, counts{3, 3, 3, 3}).Status.Hash
	must(t, testutil.Edit(ctx, k8s, pods[0].DeepCopy(), func(hotfix *corev1.Pod) {
		hotfix.Spec.Containers[1].Image = "registry.example/agent:1.0-hotfix"
	}))

	setImages(t, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "registry.example/agent:2.0" })
	rollingCondition(t, set, "PodsNotUpdatable", "2 of 3 matched pods carry hash", "1 pods cannot be updated in place")
	waitForEvent(t, "Pod", ns, pods[0].Name, "PodNotUpdatable", "changed since injection")
	if got := agentImage(t, pods[0]); got != "registry.example/agent:1.0-hotfix" {
		t.Errorf("the hand-set image was overwritten with %s", got)
	}
	firstRevision := &appsv1.ControllerRevision{}
	must(t, k8s.Get(ctx, types.NamespacedName{Namespace: operatorNamespace, Name: revision.Name(set.Name, first)}, firstRevision))

	// The revision deleted all the same, and the hand edit reverted: the pod is looked at
	// again, its injected content is unknown, and it is left alone and says why.
	must(t, k8s.Delete(ctx, firstRevision))
	must(t, testutil.Edit(ctx, k8s, pods[0].DeepCopy(), func(reverted *corev1.Pod) {
		reverted.Spec.Containers[1].Image = "registry.example/agent:1.0"
	}))
	waitForEvent(t, "Pod", ns, pods[0].Name, "PodNotUpdatable", "revision it was injected with ("+revision.Name(set.Name, first)+") is not stored")
	stays(t, time.Second, "the pod whose injected content is unknown left alone", func() (bool, string) {
		got := agentImage(t, pods[0])
		return got == "registry.example/agent:1.0", got
	})
}

// TestPartitionCountsInjectedPodsOnly: two pods created before the set never got its
// sidecars; partition 2 keeps two of the three injected pods, not two of all five.
func TestPartitionCountsInjectedPodsOnly(t *testing.T) {
	ns := newNamespace(t, nil)
	startFakeKubelet(t, ns, 50*time.Millisecond)
	for i := range 2 {
		must(t, k8s.Create(ctx, appPod(ns, fmt.Sprintf("early-%d", i), "partition", true)))
	}
	set := rollingSet("partition", "partition")
	set.Spec.UpdateStrategy.Partition = ptr.To(intstr.FromInt32(2))
	set.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromInt32(5))
	createSet(t, set)
	pods := rolloutPods(t, ns, "partition", 3)
	waitForCounts(t, set, counts{5, 3, 3, 3})

	setImages(t, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "registry.example/agent:2.0" })
	rollingCondition(t, set, "PodsNotUpdatable", "1 of 5 matched pods carry hash", "partition keeps 2", "2 of them were never injected")
	for i, p := range pods {
		want := map[bool]string{true: "registry.example/agent:2.0", false: "registry.example/agent:1.0"}[i == 0]
		if got := agentImage(t, p); got != want {
			t.Errorf("pod %s runs %s, want %s", p.Name, got, want)
		}
	}
}

// TestStartingPodIsNotRestarted: a pod whose containers are still being created is not
// restarted for the new image ("not Ready, so free"); it is updated once it runs.
func TestStartingPodIsNotRestarted(t *testing.T) {
	ns := newNamespace(t, nil)
	set := createSet(t, rollingSet("starting", "starting"))
	pod := appPod(ns, "starting-0", "starting", true)
	must(t, k8s.Create(ctx, pod))
	setPodStatus(t, pod, corev1.PodStatus{Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionFalse}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "registry.example/app:2.1",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}})

	setImages(t, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "registry.example/agent:2.0" })
	rollingCondition(t, set, "Progressing", "0 of 1 matched pods carry hash")
	stays(t, 2*time.Second, "the starting pod left alone", func() (bool, string) {
		got := agentImage(t, pod)
		return got == "registry.example/agent:1.0", got
	})
	startFakeKubelet(t, ns, 50*time.Millisecond) // the containers run
	rollingCondition(t, set, "Complete", "1 of 1 matched pods carry hash")
}

// setPodStatus writes a pod's status as a kubelet would.
func setPodStatus(t *testing.T, pod *corev1.Pod, st corev1.PodStatus) {
	t.Helper()
	eventually(t, "the pod's status to be written", func() (bool, string) {
		err := testutil.EditStatus(ctx, k8s, pod.DeepCopy(), func(cur *corev1.Pod) { cur.Status = st })
		return err == nil, fmt.Sprint(err)
	})
}

// TestNativeSidecarOnAnOldKubelet: a native sidecar's new image is not patched into a pod on a
// node whose kubelet is older than 1.32 (it would never restart it); the pod says why, and a
// pod on a newer node is updated.
func TestNativeSidecarOnAnOldKubelet(t *testing.T) {
	ns := newNamespace(t, nil)
	startFakeKubelet(t, ns, 50*time.Millisecond)
	nodes := map[string]string{"old-kubelet": "v1.31.4", "new-kubelet": "v1.37.0"}
	for name, version := range nodes {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		must(t, k8s.Create(ctx, node))
		t.Cleanup(func() { deleteIgnoreNotFound(t, node) })
		must(t, testutil.EditStatus(ctx, k8s, node, func(n *corev1.Node) { n.Status.NodeInfo.KubeletVersion = version }))
	}
	set := createSet(t, rollingSet("native", "native"))
	var pods []*corev1.Pod
	for _, node := range []string{"old-kubelet", "new-kubelet"} {
		pod := appPod(ns, "native-on-"+node, "native", true)
		pod.Spec.NodeName = node
		must(t, k8s.Create(ctx, pod))
		pods = append(pods, pod)
	}
	waitForCounts(t, set, counts{2, 2, 2, 2})

	setImages(t, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.InitContainers[0].Image = "registry.example/proxy:2" })
	rollingCondition(t, set, "PodsNotUpdatable", "1 of 2 matched pods carry hash", "1 pods cannot be updated in place")
	waitForEvent(t, "Pod", ns, pods[0].Name, "PodNotUpdatable", "node old-kubelet runs kubelet v1.31.4", "does not restart a native sidecar")
	if got := getPod(t, pods[0]).Spec.InitContainers[0].Image; got != "registry.example/proxy:1" {
		t.Errorf("the pod on the old kubelet was patched to %s", got)
	}
	if got := getPod(t, pods[1]).Spec.InitContainers[0].Image; got != "registry.example/proxy:2" {
		t.Errorf("the pod on the new kubelet runs %s, want proxy:2", got)
	}
}

// TestPodWithItsOwnCopyOfTheSidecarIsNotCountedUpdated: a pod author who declares a container
// under the sidecar's name, holding every field the set declares plus a command of their own,
// gets no sidecar injected (injection takes the container as carrying it). The pod records the
// set's hash all the same; status does not count it updated, and the condition says why.
func TestPodWithItsOwnCopyOfTheSidecarIsNotCountedUpdated(t *testing.T) {
	ns := newNamespace(t, nil)
	startFakeKubelet(t, ns, 50*time.Millisecond)
	set := createSet(t, rollingSet("own-copy", "own-copy"))
	rolloutPods(t, ns, "own-copy", 1)

	own := appPod(ns, "own-copy-mine", "own-copy", true)
	own.Spec.Volumes = append(own.Spec.Volumes, set.Spec.Volumes...)
	for _, sc := range set.Spec.InitContainers {
		c := *sc.Container.DeepCopy()
		c.Command = []string{"/bin/sh", "-c", "sleep infinity"}
		own.Spec.InitContainers = append(own.Spec.InitContainers, c)
	}
	for _, sc := range set.Spec.Containers {
		c := *sc.Container.DeepCopy()
		c.Command = []string{"/bin/sh", "-c", "sleep infinity"}
		own.Spec.Containers = append(own.Spec.Containers, c)
	}
	must(t, k8s.Create(ctx, own))
	if hash, ok := inject.InjectedHash(getPod(t, own).Annotations, set.Name); !ok || hash == "" {
		t.Fatalf("the pod with its own copy records no hash of %s", set.Name)
	}
	waitForCounts(t, set, counts{2, 1, 2, 1})
	rollingCondition(t, set, "PodsNotUpdatable", "1 of 2 matched pods carry hash", "1 pods cannot be updated in place", "("+ns+": 1)")
	waitForEvent(t, "Pod", ns, own.Name, "PodNotUpdatable", "declares its own containers named own-copy-proxy, own-copy-agent")
}
