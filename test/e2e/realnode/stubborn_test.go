//go:build e2e

package realnode

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/cli"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
)

// stubbornGrace is the grace period of newDeployment's pods: how long the kubelet lets a
// container that ignores SIGTERM run before it kills it.
const stubbornGrace = 10 * time.Second

// TestCompleteWaitsForAStubbornSidecar rolls a new image of a sidecar that does not exit on
// SIGTERM (the test server with EXIT_DELAY=1h keeps serving, Ready, until the kubelet kills it
// when the pod's grace period ends) through two pods on the real node, one at a time. While a
// pod's old container still runs, the set's RollingUpdate condition stays Progressing and says
// that pods wait for an old sidecar container to stop, with the grace period; PodsReady is not
// True; `explain` calls the pod restarting, with its grace period and how long it has waited;
// `rollout plan` lists it as restarting. Complete comes only when the kubelet runs the new image,
// Ready, in every pod, and the rollout takes at least a grace period per pod.
func TestCompleteWaitsForAStubbornSidecar(t *testing.T) {
	ns := newNamespace(t, "realnode-stubborn")
	agent := probed("agent", image("agent:v1"))
	agent.Env = []corev1.EnvVar{{Name: "EXIT_DELAY", Value: "1h"}} // ignores SIGTERM: killed when the grace period ends
	set := &appsv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "realnode-stubborn"},
		Spec: appsv1alpha1.SidecarSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "stubborn"}},
			Containers:     []appsv1alpha1.SidecarContainer{{Container: agent}},
			UpdateStrategy: appsv1alpha1.UpdateStrategy{Type: appsv1alpha1.RollingUpdate},
		},
	}
	createSet(t, set)
	newDeployment(t, ns, "stubborn", 2)
	waitForCounts(t, set, 2)

	editSet(t, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = image("agent:v2") })
	start := time.Now()
	w := stubbornWatch{t: t, ns: ns, set: set, want: image("agent:v2"), stoppingSince: map[string]time.Time{}, explained: map[string]bool{}}
	took := eventually(t, converge, set.Name+"'s RollingUpdate Complete", w.poll)
	waitForCounts(t, set, 2)
	t.Logf("2 pods whose sidecar ignores SIGTERM (grace period %s): rollout complete in %s; %d observations of a pod waiting for its old container, "+
		"each with the set Progressing and PodsReady not True", stubbornGrace, took.Round(100*time.Millisecond), w.checked)
	explained := 0
	for _, ok := range w.explained {
		if ok {
			explained++
		}
	}
	if w.checked == 0 || explained == 0 {
		t.Errorf("never saw a pod wait for its old container long enough to check the status (%d observations) and explain (%d pods)", w.checked, explained)
	}
	if since := time.Since(start); since < 2*stubbornGrace {
		t.Errorf("the rollout of 2 pods took %s, less than their 2 grace periods of %s: the old sidecar did not wait for SIGKILL", since, stubbornGrace)
	}
}

// stubbornWatch polls a rollout of a sidecar that ignores SIGTERM and checks, at each poll,
// that the set's status agrees with what the kubelet reports.
type stubbornWatch struct {
	t       *testing.T
	ns      string
	set     *appsv1alpha1.SidecarSet
	want    string // the image rolled out
	checked int
	// stoppingSince: pod -> when it was first seen with its old container still running.
	stoppingSince map[string]time.Time
	explained     map[string]bool
}

// settle is how long a pod waits for its old container before the status must say so: the
// status is written at most every 250 ms, after the reconcilers hear of the pod.
const settle = 2 * time.Second

// poll reads the pods, the set, and the pods again: a pod seen waiting for its old container in
// both reads, for longer than settle, must be in the status the set shows between them. It
// reports done when the set says Complete, which it must say only when both reads show every
// pod running the new image, Ready.
func (w *stubbornWatch) poll() (bool, string) {
	t := w.t
	before := w.stopping(podsOf(t, w.ns, "stubborn"))
	var got appsv1alpha1.SidecarSet
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(w.set), &got))
	after := podsOf(t, w.ns, "stubborn")
	stopping := w.stopping(after)
	rolling := meta.FindStatusCondition(got.Status.Conditions, appsv1alpha1.ConditionRollingUpdate)
	podsReady := meta.FindStatusCondition(got.Status.Conditions, appsv1alpha1.ConditionPodsReady)
	if rolling == nil || podsReady == nil || got.Status.ObservedGeneration != got.Generation {
		return false, fmt.Sprintf("status at generation %d of %d", got.Status.ObservedGeneration, got.Generation)
	}
	state := fmt.Sprintf("RollingUpdate %s: %s; PodsReady %s; pods waiting for their old container: %v", rolling.Reason, rolling.Message, podsReady.Status, stopping)
	for name, since := range stopping {
		if _, was := before[name]; !was || time.Since(since) < settle {
			continue
		}
		w.checked++
		if rolling.Reason != "Progressing" || !strings.Contains(rolling.Message, "wait for an old sidecar container to stop") ||
			!strings.Contains(rolling.Message, "grace period "+stubbornGrace.String()) {
			t.Errorf("pod %s has waited %s for its old sidecar container, and RollingUpdate says %s: %s", name, time.Since(since).Round(time.Second), rolling.Reason, rolling.Message)
		}
		if podsReady.Status == metav1.ConditionTrue {
			t.Errorf("pod %s has waited %s for its old sidecar container, and PodsReady is True: %s", name, time.Since(since).Round(time.Second), podsReady.Message)
		}
		if !w.explained[name] {
			w.explained[name] = w.explain(name)
		}
	}
	if rolling.Reason != "Complete" {
		return false, state
	}
	for _, p := range after {
		st := status(&p, "agent")
		if !inject.SameImage(w.want, st.Image, st.ImageID) || !st.Ready || !podReady(&p) {
			t.Errorf("RollingUpdate Complete while pod %s's kubelet reports agent %s (ready %v, pod Ready %v), want %s: %s",
				p.Name, st.Image, st.Ready, podReady(&p), w.want, rolling.Message)
		}
	}
	if got.Status.UpdatedReadyPods != got.Status.MatchedPods || podsReady.Status != metav1.ConditionTrue {
		t.Errorf("RollingUpdate Complete with updatedReadyPods %d of %d matched, PodsReady %s", got.Status.UpdatedReadyPods, got.Status.MatchedPods, podsReady.Status)
	}
	return true, state
}

// stopping are the pods whose spec names the new image while the kubelet still runs the old
// container, with when each was first seen so.
func (w *stubbornWatch) stopping(pods []corev1.Pod) map[string]time.Time {
	out := map[string]time.Time{}
	for i := range pods {
		p := &pods[i]
		st := status(p, "agent")
		if containerNamed(p.Spec.Containers, "agent").Image != w.want || inject.SameImage(w.want, st.Image, st.ImageID) || st.State.Running == nil {
			delete(w.stoppingSince, p.Name)
			continue
		}
		if _, ok := w.stoppingSince[p.Name]; !ok {
			w.stoppingSince[p.Name] = time.Now()
		}
		out[p.Name] = w.stoppingSince[p.Name]
	}
	return out
}

// explain runs `kubectl sidecarset explain pod` and `rollout plan` while the pod waits for its
// old container: both call it restarting, with its grace period (and, explain, how long it has
// waited: the API server's managedFields say when the image was written). It reports false,
// having checked nothing, when the pod was not waiting any more once they ran.
func (w *stubbornWatch) explain(pod string) bool {
	t := w.t
	out := plugin(t, "explain", "pod", pod, "-n", w.ns)
	plan := plugin(t, "rollout", "plan", w.set.Name)
	if _, still := w.stopping(podsOf(t, w.ns, "stubborn"))[pod]; !still {
		t.Logf("pod %s's old container stopped while explain ran: not checked", pod)
		return false
	}
	if want := "restarting, waiting for the old container to stop (grace period " + stubbornGrace.String() + ", waited "; !strings.Contains(out, want) {
		t.Errorf("explain pod %s:\n%s\nwant it to say %q", pod, out, want)
	}
	if strings.Contains(out, "current (hash") {
		t.Errorf("explain calls pod %s current while its old sidecar still runs:\n%s", pod, out)
	}
	for _, line := range strings.Split(plan, "\n") {
		if strings.Contains(line, " "+pod+" ") && (!strings.Contains(line, "restarting") ||
			!strings.Contains(line, "waiting for the old container to stop (grace period "+stubbornGrace.String())) {
			t.Errorf("rollout plan's row of pod %s: %q, want it restarting, waiting for the old container", pod, line)
		}
	}
	t.Logf("explain pod %s while its old sidecar runs:\n%s", pod, out)
	return true
}

// plugin runs kubectl-sidecarset against the cluster (KUBECONFIG) and returns its output; a
// failure fails the test.
func plugin(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	args = append(args, "--operator-namespace", operatorNamespace)
	if code := cli.Run(ctx, args, genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}); code != 0 {
		t.Fatalf("kubectl sidecarset %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errOut.String())
	}
	return out.String()
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
