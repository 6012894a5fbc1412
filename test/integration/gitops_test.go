package integration

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/gitops"
)

// TestGitOpsVerdicts: what Argo CD (config/argocd/health.lua, run as Argo CD runs it) and
// kstatus (Flux's health checks) say of SidecarSets read from the API server, at each stage of
// a rolling update (current, progressing, paused, complete) and for both sets of a conflict;
// the two agree by the mapping of docs/gitops.md. The rollout is held where each stage needs it
// by the fake kubelet each stage runs: one that never reports the new image keeps the first
// pod restarting, none leaves the pods as they are.
func TestGitOpsVerdicts(t *testing.T) {
	ns := newNamespace(t, nil)
	set := createSet(t, rollingSet("gitops", "gitops"))
	rolloutPods(t, ns, "gitops", 3)

	stages := []struct {
		name string
		// kubelet is how long the stage's kubelet takes to run a new image; no kubelet when negative.
		kubelet time.Duration
		change  func(*appsv1alpha1.SidecarSet)
		argo    gitops.HealthStatus
		kstatus kstatus.Status
		rolling string // the RollingUpdate condition's reason
		// settled: the stage ends with every pod updated and ready.
		settled bool
	}{
		{"current", 0, nil, gitops.Healthy, kstatus.CurrentStatus, "Complete", true},
		{"progressing", time.Hour, func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "registry.example/agent:2.0" },
			gitops.Progressing, kstatus.InProgressStatus, "Progressing", false},
		// Ready is False while the paused rollout has pods left: kstatus reads it as InProgress.
		{"paused", -1, func(s *appsv1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Paused = true },
			gitops.Suspended, kstatus.InProgressStatus, "Paused", false},
		{"complete", 0, func(s *appsv1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Paused = false },
			gitops.Healthy, kstatus.CurrentStatus, "Complete", true},
	}
	for _, st := range stages {
		ok := t.Run(st.name, func(t *testing.T) {
			if st.kubelet >= 0 {
				runFakeKubelet(t, &fakeKubelet{ns: ns, delay: st.kubelet}) // stops when the stage ends
			}
			if st.change != nil {
				setImages(t, set, st.change)
			}
			if st.settled {
				waitForCounts(t, set, counts{3, 3, 3, 3})
			}
			waitForVerdict(t, set.Name, st.argo, st.kstatus, st.rolling)
		})
		if !ok {
			return // the next stage starts from where this one should have left the set
		}
	}

	t.Run("conflict", func(t *testing.T) {
		app := "gitops-conflict"
		older := createSet(t, agentSet(app+"-a", app))
		newer := agentSet(app+"-b", app)
		newer.Spec.Containers[0].Name = older.Spec.Containers[0].Name
		withoutSidecarSetValidation(t, func() {
			eventually(t, "the API server to store "+newer.Name+" without validating it", func() (bool, string) {
				err := k8s.Create(ctx, newer)
				return err == nil, fmt.Sprint(err)
			})
		})
		t.Cleanup(func() { deleteIgnoreNotFound(t, newer) })
		waitForVerdict(t, newer.Name, gitops.Degraded, kstatus.FailedStatus, "")
		waitForVerdict(t, older.Name, gitops.Healthy, kstatus.CurrentStatus, "")
	})
}

// waitForVerdict waits until the SidecarSet, read from the API server as Argo CD and Flux read
// it (unstructured), is judged argo by Argo CD and ks by kstatus with its RollingUpdate
// condition's reason rolling ("": any), and fails when the two verdicts then disagree.
func waitForVerdict(t *testing.T, name string, argo gitops.HealthStatus, ks kstatus.Status, rolling string) {
	t.Helper()
	eventually(t, fmt.Sprintf("SidecarSet %s to be %s to Argo CD and %s to kstatus", name, argo, ks), func() (bool, string) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(appsv1alpha1.GroupVersion.WithKind("SidecarSet"))
		if err := k8s.Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
			return false, err.Error()
		}
		v, err := gitops.Judge(u.Object)
		if err != nil {
			return false, err.Error()
		}
		reason := ""
		conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conditions {
			if c, ok := c.(map[string]any); ok && c["type"] == appsv1alpha1.ConditionRollingUpdate {
				reason, _ = c["reason"].(string)
			}
		}
		seen := fmt.Sprintf("%s; RollingUpdate %q", v, reason)
		if v.ArgoCD.Status != argo || v.Kstatus != ks || rolling != "" && reason != rolling {
			return false, seen
		}
		if !v.Agree() {
			t.Errorf("the verdicts disagree: %s", seen)
		}
		return true, seen
	})
}
