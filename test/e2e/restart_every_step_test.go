//go:build e2e

package e2e

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// TestLeaderMovesAtEveryStep rolls a change across three namespaces with maxUnavailable 1 and,
// each time a step has moved a pod, stops the leading replica (its lease released) and starts
// it again, so that every step is taken by a replica that did not take the one before, from
// what the pods and the set's status say: in place (a new image, each restart taking 4 s, longer
// than a move of the leader, so that a replica seldom takes two steps)
// and by eviction (a new env; the Deployments' ReplicaSets recreate the pods). A watcher lists
// the pods of all three namespaces: never more than one pod is short of the workloads'
// capacity at once, and the rollout ends Complete with every pod on the new revision.
func TestLeaderMovesAtEveryStep(t *testing.T) {
	must(t, startOperator("operator-1"))
	t.Cleanup(func() {
		if err := run("operator-stop", "operator-1"); err != nil {
			t.Error(err)
		}
		// Leave operator-0 running for the other tests.
		if err := startOperator("operator-0"); err != nil {
			t.Log(err) // already running
		}
	})
	for _, tc := range []struct {
		mode string
		edit func(*appsv1alpha1.SidecarSet)
	}{
		{"inplace", func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "registry.example/agent:2.0" }},
		{"evict", func(s *appsv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "LEVEL", Value: "debug"}}
		}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			app := "every-step-" + tc.mode
			set := &appsv1alpha1.SidecarSet{
				ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + app},
				Spec: appsv1alpha1.SidecarSetSpec{
					Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
					Containers: []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "agent", Image: "registry.example/agent:1.0"}}},
					UpdateStrategy: appsv1alpha1.UpdateStrategy{Type: appsv1alpha1.RollingUpdate, Recreate: appsv1alpha1.RecreateEvict,
						MaxUnavailable: ptr.To(intstr.FromInt32(1))},
				},
			}
			createSet(t, set)
			var namespaces []string
			for range 3 {
				ns := newNamespace(t, "every-step", nil)
				namespaces = append(namespaces, ns)
				newDeploymentWith(t, ns, app, 2, map[string]string{"sidecar-update.stage.sidecarset.io/delay": "4000"})
			}
			waitForCounts(t, set, counts{6, 6, 6, 6}, converge)
			capacity := map[string]int32{}
			for _, ns := range namespaces {
				capacity[ns] = 2
			}
			highest := watchCapacityOf(t, []client.ListOption{client.MatchingLabels{"app": app}}, func(p *corev1.Pod) string { return p.Namespace }, capacity)

			editSet(t, set, tc.edit)
			var cur appsv1alpha1.SidecarSet
			must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), &cur))
			newHash := inject.Hash(&cur.Spec)
			carrying := func() int {
				var pods corev1.PodList
				must(t, k8s.List(ctx, &pods, client.MatchingLabels{"app": app}))
				n := 0
				for i := range pods.Items {
					if injectedHash(&pods.Items[i], set.Name) == newHash && pods.Items[i].DeletionTimestamp == nil {
						n++
					}
				}
				return n
			}
			moves, seen := 0, 0
			deadline := time.Now().Add(4 * converge)
			for n := carrying(); n < 6; n = carrying() {
				if time.Now().After(deadline) {
					t.Fatalf("%d of 6 pods carry the new hash after %d leader moves", n, moves)
				}
				if n == seen {
					time.Sleep(200 * time.Millisecond)
					continue
				}
				seen = n
				moveLeader(t)
				moves++
			}
			waitForRollout(t, set, "Complete", "6 of 6 matched pods carry hash")
			t.Logf("%s: the leader moved %d times during the rollout; at most %d of 6 pods short of capacity at once (maxUnavailable 1)",
				tc.mode, moves, highest())
			// Six steps: a move after each but the last (5), less the steps a replica takes twice
			// while the other is starting; at least half of them must be a new leader's.
			if moves < 3 {
				t.Errorf("the leader moved %d times in a rollout of 6 steps: too few steps were taken by a new leader", moves)
			}
			if got := highest(); got > 1 {
				t.Errorf("%d pods were short of the workloads' capacity at once across the namespaces, want at most 1 (maxUnavailable 1)", got)
			}
		})
	}
}

// moveLeader stops the leading replica with TERM (it releases the lease), waits for the other
// to take the lease, and starts the stopped one again as the follower.
func moveLeader(t *testing.T) {
	t.Helper()
	leader, follower := leaderReplica(t)
	stopOperator(t, leader, "TERM")
	acquiredAt(t, follower)
	must(t, startOperator(leader))
}
