package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// TestCompleteWaitsForTheKubelet: a kubelet that, like a real one, reports the old image running
// and Ready for 6 s after each patch (the old container's grace period). Through the API
// server, the set never says RollingUpdate Complete, nor PodsReady True, while a pod it
// patched reports the old image for longer than the status takes to follow; it says Complete
// once the kubelet reports the new images in every pod, with updatedReadyPods equal to the
// matched pods.
func TestCompleteWaitsForTheKubelet(t *testing.T) {
	ns := newNamespace(t, nil)
	runFakeKubelet(t, &fakeKubelet{ns: ns, delay: 6 * time.Second, keepsReady: true})
	set := createSet(t, rollingSet("complete", "complete"))
	pods := rolloutPods(t, ns, "complete", 2)
	waitForCounts(t, set, counts{2, 2, 2, 2})

	setImages(t, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "registry.example/agent:2.0" })
	// The status follows a pod within this: 250 ms between writes, and the rest for a loaded
	// 2-core machine, well short of the kubelet's delay so that every pod is checked.
	const follow = 2500 * time.Millisecond
	oldSince := map[string]time.Time{}
	// old reports the pods whose spec names the new image while the kubelet reports another,
	// with when each was first seen so.
	old := func() map[string]time.Time {
		out := map[string]time.Time{}
		for _, p := range pods {
			got := getPod(t, p)
			sidecar := got.Spec.Containers[len(got.Spec.Containers)-1]
			reported := ""
			for _, st := range got.Status.ContainerStatuses {
				if st.Name == sidecar.Name {
					reported = st.Image
				}
			}
			if sidecar.Image != "registry.example/agent:2.0" || reported == sidecar.Image {
				delete(oldSince, p.Name)
				continue
			}
			if _, ok := oldSince[p.Name]; !ok {
				oldSince[p.Name] = time.Now()
			}
			out[p.Name] = oldSince[p.Name]
		}
		return out
	}
	checked := 0
	eventually(t, "RollingUpdate Complete once the kubelet runs the new image in every pod", func() (bool, string) {
		before := old()
		var cur appsv1alpha1.SidecarSet
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), &cur))
		after := old()
		rolling := meta.FindStatusCondition(cur.Status.Conditions, appsv1alpha1.ConditionRollingUpdate)
		podsReady := meta.FindStatusCondition(cur.Status.Conditions, appsv1alpha1.ConditionPodsReady)
		if rolling == nil || podsReady == nil || cur.Status.ObservedGeneration != cur.Generation {
			return false, fmt.Sprintf("%+v", cur.Status)
		}
		for name, since := range after {
			if _, was := before[name]; !was || time.Since(since) < follow {
				continue
			}
			checked++
			if rolling.Reason != "Progressing" || !strings.Contains(rolling.Message, "restarting") {
				t.Errorf("pod %s reports the old image for %s, and RollingUpdate says %s: %s", name, time.Since(since).Round(100*time.Millisecond), rolling.Reason, rolling.Message)
			}
			if podsReady.Status == metav1.ConditionTrue {
				t.Errorf("pod %s reports the old image for %s, and PodsReady is True: %s", name, time.Since(since).Round(100*time.Millisecond), podsReady.Message)
			}
		}
		state := fmt.Sprintf("RollingUpdate %s: %s; PodsReady %s; updatedReady %d of %d; pods on the old image: %v",
			rolling.Reason, rolling.Message, podsReady.Status, cur.Status.UpdatedReadyPods, cur.Status.MatchedPods, after)
		if rolling.Reason != "Complete" {
			return false, state
		}
		if len(after) > 0 || cur.Status.UpdatedReadyPods != 2 || podsReady.Status != metav1.ConditionTrue {
			t.Errorf("RollingUpdate Complete too early: %s", state)
		}
		return true, state
	})
	if checked == 0 {
		t.Error("never saw a pod report the old image long enough to check the status")
	}
	for _, p := range pods {
		got := getPod(t, p)
		for _, st := range got.Status.ContainerStatuses {
			if st.Name == "complete-agent" && st.Image != "registry.example/agent:2.0" {
				t.Errorf("pod %s: the kubelet reports %s after Complete", p.Name, st.Image)
			}
		}
	}
}
