//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/test/testutil"
)

// watchBudget keeps the highest number of ns's pods unavailable at once while the test runs
// (kwok's sidecar-update stages play the kubelet; hack/kwok).
func watchBudget(t testing.TB, ns string) *testutil.Budget {
	t.Helper()
	return testutil.WatchBudget(ctx, t, k8s, ns, 50*time.Millisecond)
}

func editSet(t testing.TB, set *appsv1alpha1.SidecarSet, edit func(*appsv1alpha1.SidecarSet)) {
	t.Helper()
	cluster.EditSet(t, set, edit)
}

func waitForRollout(t testing.TB, set *appsv1alpha1.SidecarSet, reason string, text ...string) time.Duration {
	t.Helper()
	return cluster.WaitForRollout(t, set, reason, text...)
}

func containerNamed(list []corev1.Container, name string) *corev1.Container {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

func restarts(pod *corev1.Pod, name string) int32 {
	for _, s := range append(pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses...) {
		if s.Name == name {
			return s.RestartCount
		}
	}
	return -1
}

// TestInPlaceRollout rolls new sidecar images (a regular and a native sidecar) through a
// Deployment's pods on the local cluster, kwok playing the kubelet: same pods, app containers
// untouched, never more than maxUnavailable pods unavailable at any observed moment; then a
// broken image stops at the budget, and going back to the known image (a rollback) updates only
// the pod that took the broken one.
func TestInPlaceRollout(t *testing.T) {
	ns := newNamespace(t, "rollout", nil)
	set := &appsv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-rollout"},
		Spec: appsv1alpha1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "rolled"}},
			Containers: []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "agent", Image: "registry.example/agent:1.0"}}},
			InitContainers: []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "proxy", Image: "registry.example/proxy:1.0",
				RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}},
			UpdateStrategy: appsv1alpha1.UpdateStrategy{Type: appsv1alpha1.RollingUpdate},
		},
	}
	createSet(t, set)
	newDeployment(t, ns, "rolled", 4)
	waitForCounts(t, set, counts{4, 4, 4, 4}, converge)
	uids := map[string]types.UID{}
	for _, p := range podsOf(t, ns, "rolled") {
		uids[p.Name] = p.UID
	}
	budget := watchBudget(t, ns)
	budget.Reset()

	editSet(t, set, func(s *appsv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Image = "registry.example/agent:2.0"
		s.Spec.InitContainers[0].Image = "registry.example/proxy:2.0"
	})
	took := waitForRollout(t, set, "Complete", "4 of 4 matched pods carry hash")
	waitForCounts(t, set, counts{4, 4, 4, 4}, converge)
	t.Logf("rollout of 4 pods (maxUnavailable 1, kwok restart delay 500 ms) complete in %s; highest unavailable %d", took, budget.Highest())
	if got := budget.Highest(); got != 1 {
		t.Errorf("highest number of unavailable pods during the rollout: %d, want 1 (maxUnavailable 1)", got)
	}
	for _, p := range podsOf(t, ns, "rolled") {
		if uids[p.Name] != p.UID {
			t.Errorf("pod %s is not one of the pods before the rollout", p.Name)
		}
		agent, proxy, app := containerNamed(p.Spec.Containers, "agent"), containerNamed(p.Spec.InitContainers, "proxy"), containerNamed(p.Spec.Containers, "app")
		if agent == nil || proxy == nil || app == nil || agent.Image != "registry.example/agent:2.0" || proxy.Image != "registry.example/proxy:2.0" || app.Image != "registry.example/app:1.0" {
			t.Errorf("pod %s containers %+v / init %+v", p.Name, p.Spec.Containers, p.Spec.InitContainers)
		}
		if restarts(&p, "agent") != 1 || restarts(&p, "proxy") != 1 || restarts(&p, "app") != 0 {
			t.Errorf("pod %s restarts agent %d proxy %d app %d, want 1 1 0", p.Name, restarts(&p, "agent"), restarts(&p, "proxy"), restarts(&p, "app"))
		}
	}

	// A broken image: one pod takes it and never becomes ready; the rollout stops there.
	budget.Reset()
	editSet(t, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "registry.example/agent:broken" })
	waitForRollout(t, set, "Progressing", "1 of 4 matched pods carry hash", "1 restarting of at most 1 unavailable")
	time.Sleep(2 * time.Second) // a runaway rollout would show itself by now
	broken := ""
	for _, p := range podsOf(t, ns, "rolled") {
		if containerNamed(p.Spec.Containers, "agent").Image == "registry.example/agent:broken" {
			if broken != "" {
				t.Errorf("pods %s and %s both took the broken image", broken, p.Name)
			}
			broken = p.Name
		}
	}
	if broken == "" || budget.Highest() != 1 {
		t.Fatalf("broken image: pod %q took it, highest unavailable %d; want one pod, 1", broken, budget.Highest())
	}

	// Back to the known image: only the pod on the broken image is touched.
	editSet(t, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "registry.example/agent:2.0" })
	waitForRollout(t, set, "Complete", "4 of 4 matched pods carry hash")
	waitForCounts(t, set, counts{4, 4, 4, 4}, converge)
	for _, p := range podsOf(t, ns, "rolled") {
		// The pods that never took the broken image are not touched again: one restart, from
		// the first rollout.
		if containerNamed(p.Spec.Containers, "agent").Image != "registry.example/agent:2.0" || (p.Name != broken && restarts(&p, "agent") != 1) {
			t.Errorf("after the rollback pod %s runs %s with %d agent restarts, want agent:2.0 (and 1 restart unless it took the broken image)", p.Name,
				containerNamed(p.Spec.Containers, "agent").Image, restarts(&p, "agent"))
		}
	}
}

// interruptedRollout is a RollingUpdate SidecarSet over 6 pods of app (maxUnavailable 2, kwok
// restarting a sidecar after delayMs), its rollout to agent:2.0 started and under way (2 to 5
// pods updated) when interrupt runs.
type interruptedRollout struct {
	set    *appsv1alpha1.SidecarSet
	ns     string
	app    string
	budget *testutil.Budget
	writes float64
}

func startInterruptedRollout(t *testing.T, name, app, delayMs string) *interruptedRollout {
	t.Helper()
	r := &interruptedRollout{ns: newNamespace(t, name, nil), app: app}
	r.set = &appsv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + name},
		Spec: appsv1alpha1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			Containers: []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "agent", Image: "registry.example/agent:1.0"}}},
			UpdateStrategy: appsv1alpha1.UpdateStrategy{Type: appsv1alpha1.RollingUpdate,
				MaxUnavailable: ptr.To(intstr.FromInt32(2))},
		},
	}
	// Observed before its pods are created: a replica whose informers have not delivered the set
	// yet (behind a slow API server, say) would admit them without their sidecars.
	createSet(t, r.set)
	newDeploymentWith(t, r.ns, app, 6, map[string]string{"sidecar-update.stage.sidecarset.io/delay": delayMs})
	waitForCounts(t, r.set, counts{6, 6, 6, 6}, converge)
	r.budget = watchBudget(t, r.ns)
	r.budget.Reset()
	r.writes = podWrites(t)

	editSet(t, r.set, func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "registry.example/agent:2.0" })
	eventually(t, converge, "the rollout to be under way", func() (bool, string) {
		var cur appsv1alpha1.SidecarSet
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(r.set), &cur))
		return cur.Status.UpdatedPods >= 2 && cur.Status.UpdatedPods < 6, fmt.Sprintf("%d updated", cur.Status.UpdatedPods)
	})
	return r
}

// finish waits for the rollout to complete and checks the budget held and every pod runs
// image with at most maxRestarts (exactly, when exact) restarts of the sidecar; it returns
// the pod writes since the rollout started.
func (r *interruptedRollout) finish(t *testing.T, image string, maxRestarts int32, exact bool) float64 {
	t.Helper()
	waitForRollout(t, r.set, "Complete", "6 of 6 matched pods carry hash")
	waitForCounts(t, r.set, counts{6, 6, 6, 6}, converge)
	writes := podWrites(t) - r.writes
	if r.budget.Highest() > 2 {
		t.Errorf("highest unavailable %d exceeds maxUnavailable 2", r.budget.Highest())
	}
	for _, p := range podsOf(t, r.ns, r.app) {
		img, n := containerNamed(p.Spec.Containers, "agent").Image, restarts(&p, "agent")
		if img != image || n > maxRestarts || (exact && n != maxRestarts) {
			t.Errorf("pod %s: agent %s restarted %d times, want %s and %d restarts (at most: %v)", p.Name, img, n, image, maxRestarts, !exact)
		}
	}
	return writes
}

// TestRolloutSurvivesOperatorRestart stops the operator in the middle of a rollout and starts
// it again: the rollout resumes from the pods' records, no pod is updated twice (one image
// patch per pod, counted by the API server; one restart of the sidecar per pod) and the
// budget is never exceeded.
func TestRolloutSurvivesOperatorRestart(t *testing.T) {
	r := startInterruptedRollout(t, "restart", "restarted", "1500")
	stopOperator(t, "operator-0", "TERM")
	time.Sleep(time.Second)
	must(t, startOperator("operator-0"))
	writes := r.finish(t, "registry.example/agent:2.0", 1, true)
	t.Logf("rollout across a restart: %.0f pod writes for 6 pods, highest unavailable %d of 2", writes, r.budget.Highest())
	if writes != 6 {
		t.Errorf("%.0f pod writes for 6 pods: a pod was patched twice (or missed)", writes)
	}
}

// TestSpecEditMidRollout changes the image again while a rollout is under way: the rollout
// moves on to the newest spec (pods already patched get it too), never exceeds the budget, and
// ends with every pod on the newest image, each patched at most once per revision.
func TestSpecEditMidRollout(t *testing.T) {
	r := startInterruptedRollout(t, "edit", "edited", "1000")
	editSet(t, r.set, func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "registry.example/agent:3.0" })
	writes := r.finish(t, "registry.example/agent:3.0", 2, false)
	t.Logf("two rollouts overlapping: %.0f pod writes for 6 pods, highest unavailable %d of 2", writes, r.budget.Highest())
	if writes < 6 || writes > 12 {
		t.Errorf("%.0f pod writes: want one per pod per revision it was moved to (6 to 12)", writes)
	}
}

// TestRolloutSurvivesLeaderChange kills the leading replica (SIGKILL, left in the webhook proxy
// as a dead pod stays among a Service's endpoints) in the middle of a rollout while opted-in pods
// are created four times a second: every creation is admitted with its sidecar by the other
// replica, which takes over after the lease and finishes from the pods' records, with one patch
// per pod and the budget kept. The one creation that may be in flight to the killed replica
// (they are sent one at a time) can fail with its connection, as behind a Service; none other.
func TestRolloutSurvivesLeaderChange(t *testing.T) {
	must(t, startOperator("operator-1"))
	t.Cleanup(func() {
		if err := run("operator-stop", "operator-1"); err != nil {
			t.Error(err)
		}
	})
	leader, follower := leaderReplica(t)
	burst := createAgentSet(t, "e2e-leader-burst", "burst")
	load := startCreations(t, newNamespace(t, "leader-burst", nil), "burst", 250*time.Millisecond, burst.Spec.Containers[0].Name)
	r := startInterruptedRollout(t, "leader", "led", "3000")
	var atKill appsv1alpha1.SidecarSet
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(r.set), &atKill))
	killing := time.Now()
	if err := run("operator-stop", leader, "KILL", "keep"); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	t.Cleanup(func() {
		if err := run("operator-stop", leader); err != nil { // out of the proxy
			t.Error(err)
		}
	})
	firstStep := eventually(t, converge, "the new leader's first step", func() (bool, string) {
		var cur appsv1alpha1.SidecarSet
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(r.set), &cur))
		return cur.Status.UpdatedPods > atKill.Status.UpdatedPods, fmt.Sprintf("%d updated, %d at the kill", cur.Status.UpdatedPods, atKill.Status.UpdatedPods)
	})
	time.Sleep(2 * time.Second) // creations after the new leader's first step too
	created := load.stop(t)
	writes := r.finish(t, "registry.example/agent:2.0", 1, true)
	t.Logf("rollout across a leader kill (%s killed with %d of 6 pods updated, %s took over): first step of the new leader %s after the kill "+
		"(lease %v); %d pods created around the kill (%d refused, %d without their sidecars); %.0f pod writes for 6 pods, highest unavailable %d of 2",
		leader, atKill.Status.UpdatedPods, follower, firstStep.Round(time.Millisecond), acquiredAt(t, follower).Sub(killed).Round(time.Millisecond),
		created.created, len(created.refusals), len(created.bare), writes, r.budget.Highest())
	// Sent up to a second after the kill, a creation can still find the API server holding a
	// kept-alive connection to the killed replica it has not seen closed yet.
	created.refusedOnlyAt(t, []window{{replica: leader, from: killing, to: killed.Add(time.Second)}}, "as it was killed")
	for _, f := range created.bare {
		t.Error(f)
	}
	if writes != 6 {
		t.Errorf("%.0f pod writes for 6 pods: a pod was patched twice (or missed)", writes)
	}
	// Leave operator-0 running for the other tests, whichever replica it was.
	if leader == "operator-0" {
		must(t, startOperator("operator-0"))
	}
}
