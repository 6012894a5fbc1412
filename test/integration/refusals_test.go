package integration

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/internal/refusals"
)

// TestRefusingSetSaysSo: a set whose sidecar clashes with the pods it selects says so in its
// own status within seconds (Refusing=True with the count, the catalog reason, the namespace),
// and in a PodRefused event on the set; a dry run is not counted. A second replica's refusals
// (its own entry, written by server-side apply) add up with the first's without overwriting
// them. Once no pod is refused for the quiet period (shortened for the suite), Refusing turns
// False and the entries go.
func TestRefusingSetSaysSo(t *testing.T) {
	ns := newNamespace(t, nil)
	set := createSet(t, agentSet("refuser", "refused"))
	clashing := func(name string) *corev1.Pod {
		pod := appPod(ns, name, "refused", true)
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "refuser-agent", Image: "registry.example/mine:1"})
		return pod
	}
	if err := k8s.Create(ctx, clashing("dry"), client.DryRunAll); err == nil || !strings.Contains(err.Error(), `SidecarSet "refuser"`) {
		t.Fatalf("dry run: %v; want a refusal naming the set", err)
	}
	for i := range 3 {
		if err := k8s.Create(ctx, clashing(fmt.Sprintf("web-%d", i))); err == nil || !strings.Contains(err.Error(), `SidecarSet "refuser"`) {
			t.Fatalf("pod %d: %v; want a refusal naming the set", i, err)
		}
	}
	refusing := func(reason string, parts ...string) func() (bool, string) {
		return func() (bool, string) {
			var cur appsv1alpha1.SidecarSet
			must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), &cur))
			c := meta.FindStatusCondition(cur.Status.Conditions, appsv1alpha1.ConditionRefusing)
			if c == nil || c.Status != "True" || c.Reason != reason || !contains(c.Message, parts...) {
				return false, fmt.Sprintf("Refusing %+v; refusals %+v", c, cur.Status.Refusals)
			}
			for _, other := range cur.Status.Conditions {
				if strings.HasPrefix(other.Message, "No pod matches") {
					return false, fmt.Sprintf("%s says %q while the set's pods are refused", other.Type, other.Message)
				}
			}
			return true, ""
		}
	}
	eventually(t, "Refusing=True with the count, reason and namespace", refusing(string(inject.ReasonContainerClash), "refused 3 pod(s)", ns, "refuser-agent"))
	waitForSetEvent(t, set, string(refusals.EventReason), "The pod webhook refused", ns, `SidecarSet "refuser"`)

	var cur appsv1alpha1.SidecarSet
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), &cur))
	other := &refusals.Ledger{Replica: "integration-replica-b", Client: k8s}
	other.Refused(&cur, inject.ReasonPortClash, "a refusal on the second replica", "elsewhere", "")
	other.Flush(ctx)
	eventually(t, "both replicas' refusals summed", refusing(string(inject.ReasonPortClash), "refused 4 pod(s)", ns, "elsewhere"))
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), &cur))
	if len(cur.Status.Refusals) != 2 {
		t.Fatalf("status.refusals %+v; want one entry per replica", cur.Status.Refusals)
	}

	eventually(t, "Refusing=False after the quiet period", func() (bool, string) {
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), &cur))
		c := meta.FindStatusCondition(cur.Status.Conditions, appsv1alpha1.ConditionRefusing)
		return c != nil && c.Status == "False" && c.Reason == "NoRecentRefusals" && len(cur.Status.Refusals) == 0,
			fmt.Sprintf("Refusing %+v; refusals %+v", c, cur.Status.Refusals)
	})
}
