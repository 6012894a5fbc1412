//go:build e2e

package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/policy"
)

// TestUpgradeInPolicyMode runs the previous release in policy mode as two replicas, with the pod
// webhook registered as this commit's config/components/policy-mode registers it (an upgrade
// applies the registration as its rolling update begins, while the previous release's policies,
// which mark the pods they route with the annotation alone, are still in force), and creates
// opted-in pods steadily: pods one set alone selects, which its policy injects, and pods two sets
// select, which their policies route to the webhook. Then it replaces the replicas one at a time
// by this commit's. The bar: the new leader renders the policies anew (routing with the label as
// well); no creation refused but for a connection an old replica lost as it stopped (the previous
// release does not drain, see TestUpgradeFromPreviousRelease); every pod stored with the sidecars
// of the sets that select it and without the route annotation; no pod sent once the old
// replicas were gone stored with the route label (a previous release's webhook, which does not
// know the label, leaves it on the pods it admits meanwhile, as the docs say); the sets' status
// counting every pod.
func TestUpgradeInPolicyMode(t *testing.T) {
	version, startUpgraded := runPreviousRelease(t, func() { deletePolicies(t) }, "--injection=policy")
	routePodWebhook(t)

	solo := createAgentSet(t, "e2e-policy-upgrade-solo", "policy-upgrade-solo")
	duo := []*appsv1alpha1.SidecarSet{
		createAgentSet(t, "e2e-policy-upgrade-a", "policy-upgrade-duo"),
		createAgentSet(t, "e2e-policy-upgrade-b", "policy-upgrade-duo"),
	}
	streams := []struct {
		app  string
		ns   string
		sets []*appsv1alpha1.SidecarSet
	}{
		{"policy-upgrade-solo", newNamespace(t, "policy-upgrade-solo", nil), []*appsv1alpha1.SidecarSet{solo}},
		{"policy-upgrade-duo", newNamespace(t, "policy-upgrade-duo", nil), duo},
	}
	// The previous release's policies in force: a pod one set selects is injected by its policy
	// (the webhook is called only for a marked pod), a pod two sets select is routed to the
	// webhook, which injects both.
	for _, s := range streams {
		eventually(t, converge, "the previous release's policies to inject "+s.app, func() (bool, string) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "dry-run",
				Labels: map[string]string{"app": s.app, appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue}}, Spec: podSpec()}
			if err := k8s.Create(ctx, pod, client.DryRunAll); err != nil {
				return false, err.Error()
			}
			return len(pod.Spec.Containers) == 1+len(s.sets), "containers " + strings.Join(containerNames(pod.Spec.Containers), ",")
		})
	}

	var loads []*creations
	for _, s := range streams {
		loads = append(loads, startCreations(t, s.ns, s.app, 200*time.Millisecond, s.sets[0].Spec.Containers[0].Name))
	}
	time.Sleep(2 * time.Second) // pods admitted by the previous release alone
	start := time.Now()
	stops := replaceReplicas(t, []string{"release-0", "release-1"}, []string{"upgraded-0", "upgraded-1"}, startUpgraded)
	upgraded := time.Since(start)
	gone := stops[len(stops)-1].to // the old replicas, and every connection to them

	eventually(t, converge, "the new leader to render the policies anew, routing with the label", func() (bool, string) {
		for _, set := range append([]*appsv1alpha1.SidecarSet{solo}, duo...) {
			var p admissionregistrationv1.MutatingAdmissionPolicy
			if err := k8s.Get(ctx, client.ObjectKey{Name: policy.Name(set.Name)}, &p); err != nil {
				return false, err.Error()
			}
			spec, err := json.Marshal(p.Spec.Mutations)
			must(t, err)
			if !strings.Contains(string(spec), "/metadata/labels/") {
				return false, p.Name + " routes with the annotation alone"
			}
		}
		return true, ""
	})
	time.Sleep(2 * time.Second) // pods admitted by this commit's replicas alone

	labelled := 0
	for i, s := range streams {
		done := loads[i].stop(t)
		t.Logf("%s: %d pods created (%d refused, %d without their sidecars)", s.app, done.created, len(done.refusals), len(done.bare))
		done.refusedOnlyAt(t, stops, "as it stopped, without draining")
		for _, f := range done.bare {
			t.Error(f)
		}
		if done.created < 20 {
			t.Errorf("%s: only %d pods created; the test needs a steady stream across the upgrade", s.app, done.created)
		}
		pods := podsOf(t, s.ns, s.app)
		late := 0
		for _, p := range pods {
			for _, set := range s.sets {
				if !hasContainer(&p, set.Spec.Containers[0].Name) {
					t.Errorf("pod %s stored without %s's sidecar: containers %v", p.Name, set.Name, containerNames(p.Spec.Containers))
				}
			}
			if _, ok := p.Annotations[appsv1alpha1.WebhookRouteAnnotation]; ok {
				t.Errorf("pod %s stored with the route annotation %s", p.Name, appsv1alpha1.WebhookRouteAnnotation)
			}
			sent := done.sent[p.Name]
			if sent.After(gone) {
				late++
			}
			if _, ok := p.Labels[appsv1alpha1.WebhookRouteLabel]; ok {
				labelled++
				if sent.After(gone) {
					t.Errorf("pod %s, sent %s after the old replicas were gone, stored with the route label %s", p.Name,
						sent.Sub(gone).Round(time.Millisecond), appsv1alpha1.WebhookRouteLabel)
				}
			}
		}
		if late < 5 {
			t.Errorf("%s: only %d pods sent once the old replicas were gone; the test needs them", s.app, late)
		}
		n := int32(len(pods))
		for _, set := range s.sets {
			waitForCounts(t, set, counts{n, n, n, n}, converge)
		}
	}
	t.Logf("upgraded %s to this commit in policy mode in %s; %d pods kept the route label a previous release's webhook does not remove",
		version, upgraded.Round(time.Millisecond), labelled)
}
