//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

const converge = 60 * time.Second

func TestScalingAndDeletionMoveCountsExactly(t *testing.T) {
	ns := newNamespace(t, "scale", nil)
	set := createAgentSet(t, "e2e-scale", "scale")
	dep := newDeployment(t, ns, "scale", 3)
	t.Logf("3 replicas counted in %v", waitForCounts(t, set, counts{3, 3, 3, 3}, converge))

	scale(t, dep, 5)
	t.Logf("scale-up to 5 counted in %v", waitForCounts(t, set, counts{5, 5, 5, 5}, converge))
	scale(t, dep, 2)
	t.Logf("scale-down to 2 counted in %v", waitForCounts(t, set, counts{2, 2, 2, 2}, converge))

	pods := podsOf(t, ns, "scale")
	must(t, k8s.Delete(ctx, &pods[0]))
	waitForCounts(t, set, counts{2, 2, 2, 2}, converge)
	eventually(t, converge, "the deleted pod to be replaced", func() (bool, string) {
		now := podsOf(t, ns, "scale")
		for _, p := range now {
			if p.Name == pods[0].Name {
				return false, "old pod still listed"
			}
		}
		return len(now) == 2, fmt.Sprintf("%d pods", len(now))
	})
	waitForCounts(t, set, counts{2, 2, 2, 2}, converge)

	// A pod whose Ready condition turns False (its app fails its readiness probe) is no longer
	// counted ready. The annotation keeps kwok from making it Ready again (hack/kwok), and kwok
	// may still be writing the pod's status: retry on conflicts, as a kubelet would.
	name := podsOf(t, ns, "scale")[0].Name
	must(t, k8s.Patch(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"sidecar-update.stage.sidecarset.io/not-ready":"true"}}}`))))
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var pod corev1.Pod
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pod); err != nil {
			return err
		}
		for i, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady {
				pod.Status.Conditions[i].Status = corev1.ConditionFalse
				pod.Status.Conditions[i].LastTransitionTime = metav1.Now()
			}
		}
		return k8s.Status().Update(ctx, &pod)
	}))
	waitForCounts(t, set, counts{2, 2, 1, 1}, converge)
}

func TestSpecChangeAndRolloutRestart(t *testing.T) {
	ns := newNamespace(t, "rollout", nil)
	set := createAgentSet(t, "e2e-rollout", "rollout")
	dep := newDeployment(t, ns, "rollout", 3)
	waitForCounts(t, set, counts{3, 3, 3, 3}, converge)

	// The operator writes the set's status meanwhile: editSet retries on conflicts.
	editSet(t, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "registry.example/agent:1.1" })
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), set))
	newHash := inject.Hash(&set.Spec)
	waitForCounts(t, set, counts{3, 0, 3, 0}, converge)

	// A new pod gets the new hash; updatedPods counts only it.
	scale(t, dep, 4)
	waitForCounts(t, set, counts{4, 1, 4, 1}, converge)
	fresh := 0
	for _, p := range podsOf(t, ns, "rollout") {
		if injectedHash(&p, set.Name) == newHash {
			fresh++
		}
	}
	if fresh != 1 {
		t.Errorf("%d pods carry the new hash %s, want 1", fresh, newHash)
	}

	rolloutRestart(t, dep)
	t.Logf("rollout restart brought updatedPods back in %v", waitForCounts(t, set, counts{4, 4, 4, 4}, 2*converge))
}

func TestNamespaceSelector(t *testing.T) {
	gold := newNamespace(t, "gold", map[string]string{"tier": "gold"})
	plain := newNamespace(t, "plain", nil)
	set := &appsv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-namespaced"},
		Spec: appsv1alpha1.SidecarSetSpec{
			Selector:          &metav1.LabelSelector{MatchLabels: map[string]string{"app": "tiered"}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}},
			Containers:        []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "tier-agent", Image: "registry.example/agent:1.0"}}},
		},
	}
	createSet(t, set)
	newDeployment(t, gold, "tiered", 2)
	newDeployment(t, plain, "tiered", 2)
	waitForCounts(t, set, counts{2, 2, 2, 2}, converge)
	eventually(t, converge, "pods in the plain namespace", func() (bool, string) {
		pods := podsOf(t, plain, "tiered")
		for _, p := range pods {
			if hasContainer(&p, "tier-agent") || p.Annotations[appsv1alpha1.StatusAnnotation] != "" {
				t.Fatalf("pod %s in a non-matching namespace was injected", p.Name)
			}
		}
		return len(pods) == 2, fmt.Sprintf("%d pods", len(pods))
	})
}

func TestNeverInjectsItsOwnNamespaceOrKubeSystem(t *testing.T) {
	set := createAgentSet(t, "e2e-system", "system-probe")
	for _, ns := range []string{operatorNamespace, metav1.NamespaceSystem} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "system-probe-",
			Labels: map[string]string{"app": "system-probe", appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue}}, Spec: podSpec()}
		eventually(t, 30*time.Second, "a pod to be admitted in "+ns, func() (bool, string) {
			err := k8s.Create(ctx, pod)
			return err == nil, fmt.Sprint(err) // the namespace's ServiceAccount may not exist yet
		})
		t.Cleanup(func() { deleteIgnoreNotFound(t, pod) })
		if hasContainer(pod, set.Spec.Containers[0].Name) || len(pod.Spec.Containers) != 1 {
			t.Errorf("pod in %s was injected: %d containers", ns, len(pod.Spec.Containers))
		}
	}
	// Selected by labels, but in namespaces the webhook never serves: excluded, not matched.
	waitForStatus(t, set, counts{}, 2, converge)
}

// TestOperatorOutage stops every replica: unlabelled pods are still created (the API server
// never calls the webhook for them), labelled pods are refused with the webhook's error, and
// after a restart injection and status resume with no manual step.
func TestOperatorOutage(t *testing.T) {
	ns := newNamespace(t, "outage", nil)
	set := createAgentSet(t, "e2e-outage", "outage")
	dep := newDeployment(t, ns, "outage", 2)
	waitForCounts(t, set, counts{2, 2, 2, 2}, converge)

	stopOperator(t, "operator-0", "TERM")
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			must(t, startOperator("operator-0"))
		}
	})

	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain", Labels: map[string]string{"app": "plain"}}, Spec: podSpec()}
	must(t, k8s.Create(ctx, plain))
	labelled := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "labelled",
		Labels: map[string]string{"app": "outage-single", appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue}}, Spec: podSpec()}
	err := k8s.Create(ctx, labelled)
	if err == nil || !strings.Contains(err.Error(), "inject.sidecarset.io") {
		t.Fatalf("a labelled pod was not refused with the webhook's error while the operator was down: %v", err)
	}
	t.Logf("labelled pod refused while down: %v", err)
	scale(t, dep, 4) // the ReplicaSet retries the refused creations on its own

	must(t, startOperator("operator-0"))
	restarted = true
	t.Logf("counts converged %v after the restart", waitForCounts(t, set, counts{4, 4, 4, 4}, 2*converge))
	must(t, k8s.Create(ctx, labelled))
}

// TestLeaderFailover runs two replicas: both serve the webhook, and when the leader is killed
// the other takes over status within the lease duration.
func TestLeaderFailover(t *testing.T) {
	must(t, startOperator("operator-1"))
	t.Cleanup(func() {
		if err := run("operator-stop", "operator-1"); err != nil {
			t.Error(err)
		}
	})
	ns := newNamespace(t, "failover", nil)
	set := createAgentSet(t, "e2e-failover", "failover")
	dep := newDeployment(t, ns, "failover", 2)
	waitForCounts(t, set, counts{2, 2, 2, 2}, converge)

	leader, follower := leaderReplica(t)
	t.Logf("leader %s, follower %s", leader, follower)

	// The follower serves the webhook alone while the leader is away.
	stopOperator(t, leader, "KILL")
	killed := time.Now()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "via-follower",
		Labels: map[string]string{"app": "failover", appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue}}, Spec: podSpec()}
	must(t, createAfterStop(t, pod))
	if !hasContainer(pod, set.Spec.Containers[0].Name) {
		t.Errorf("the follower did not inject: containers %v", pod.Spec.Containers)
	}
	scale(t, dep, 3)
	took := waitForCounts(t, set, counts{4, 4, 4, 4}, converge)
	acquired := acquiredAt(t, follower)
	t.Logf("%s acquired the lease %v after %s was killed; status converged %v after the kill", follower,
		acquired.Sub(killed).Round(time.Millisecond), leader, took.Round(time.Millisecond))
	// A killed leader's lease runs leaseDuration from when the follower saw its last renewal,
	// and the follower tries the lease every retryPeriod plus up to 1.2 retryPeriods of jitter
	// (client-go's leader election): it saw the renewal up to one such interval late and takes
	// the lease up to one interval after expiry. The margin covers API latency on a loaded
	// 2-core machine (20.6 s was seen with OLM building beside the tests).
	if limit := leaseDuration + 2*retryPeriod*22/10 + 5*time.Second; acquired.Sub(killed) > limit {
		t.Errorf("%s took over after %v, later than the lease duration allows (%v)", follower, acquired.Sub(killed), limit)
	}
	// Leave operator-0 running for the other tests, whichever replica it was.
	if leader == "operator-0" {
		must(t, startOperator("operator-0"))
	}
}

// controller-runtime's leader election defaults, which the manager keeps.
const (
	leaseDuration = 15 * time.Second
	retryPeriod   = 2 * time.Second
)

// leaderLease reads the operator's leader-election Lease: which replica holds it (the leader
// label the manager sets, written with the holder) and when it acquired it. A released lease
// (no holder; a replica stopped with TERM gives it up) keeps its last label: it names nobody.
func leaderLease(t *testing.T) (holder string, acquired time.Time) {
	t.Helper()
	var lease coordinationv1.Lease
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: "sidecarset-operator.sidecarset.io"}, &lease))
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		return "", time.Time{}
	}
	if lease.Spec.AcquireTime != nil {
		acquired = lease.Spec.AcquireTime.Time
	}
	return lease.Labels[appsv1alpha1.LeaderLabel], acquired
}

// acquiredAt waits until the replica holds the Lease and returns when it acquired it.
func acquiredAt(t *testing.T, name string) time.Time {
	t.Helper()
	var at time.Time
	eventually(t, converge, name+" to hold the lease", func() (bool, string) {
		holder, acquired := leaderLease(t)
		at = acquired
		return holder == name, "held by " + holder
	})
	return at
}

// leaderReplica tells which of operator-0 and operator-1 holds the Lease.
func leaderReplica(t *testing.T) (leader, follower string) {
	t.Helper()
	eventually(t, converge, "a leader", func() (bool, string) {
		leader, _ = leaderLease(t)
		return leader == "operator-0" || leader == "operator-1", "the lease's leader label is " + leader
	})
	if leader == "operator-0" {
		return leader, "operator-1"
	}
	return leader, "operator-0"
}
