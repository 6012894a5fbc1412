//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/cli"
)

// TestUpgradeFromPreviousRelease runs the previous release (releases.txt's last line, built from
// its commit) as two replicas, with a Deployment whose in-place rollout is in flight and opted-in
// pods created several times a second, then replaces the replicas one at a time by this commit's,
// as a Deployment's rolling update does. Before the upgrade, this commit's upgrade-check reports
// nothing to change. The bar: no pod creation refused or stored without its sidecars, no pod
// patched by the upgrade itself (one patch per pod of the rollout, none of the other pods), the
// budget held, and the rollout finished by the new replicas.
func TestUpgradeFromPreviousRelease(t *testing.T) {
	version, startUpgraded := runPreviousRelease(t, nil)

	ns := newNamespace(t, "upgrade", nil)
	set := createSet(t, &appsv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-upgrade"},
		Spec: appsv1alpha1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "upgraded"}},
			Containers: []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "agent", Image: "registry.example/agent:1.0"}}},
			UpdateStrategy: appsv1alpha1.UpdateStrategy{Type: appsv1alpha1.RollingUpdate,
				MaxUnavailable: ptr.To(intstr.FromInt32(1))},
		},
	})
	burst := createAgentSet(t, "e2e-upgrade-burst", "burst")
	// Each restart takes 5 s, so the rollout (five steps after the first) outlasts the upgrade
	// however slowly the replicas start.
	newDeploymentWith(t, ns, "upgraded", 6, map[string]string{"sidecar-update.stage.sidecarset.io/delay": "5000"})
	waitForCounts(t, set, counts{6, 6, 6, 6}, converge)
	before := map[string]string{} // pod name -> UID: none may be recreated
	for _, p := range podsOf(t, ns, "upgraded") {
		before[p.Name] = string(p.UID)
	}

	// This commit's plugin, against the running release: nothing to change.
	report, code := upgradeCheck(t)
	t.Logf("kubectl sidecarset upgrade-check against %s, exit %d:\n%s", version, code, report)
	if code != cli.ExitOK {
		t.Errorf("upgrade-check against %s exited %d; want %d (nothing to change)", version, code, cli.ExitOK)
	}

	load := startCreations(t, newNamespace(t, "upgrade-burst", nil), "burst", 250*time.Millisecond, burst.Spec.Containers[0].Name)
	budget := watchBudget(t, ns)
	budget.Reset()
	writes := podWrites(t)
	editSet(t, set, func(s *appsv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "registry.example/agent:2.0" })
	eventually(t, converge, "the rollout to be under way", func() (bool, string) {
		var cur appsv1alpha1.SidecarSet
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), &cur))
		return cur.Status.UpdatedPods >= 1 && cur.Status.UpdatedPods < 6, fmt.Sprintf("%d updated", cur.Status.UpdatedPods)
	})

	// The rolling update: a new replica, Ready, then an old one stopped (TERM: it releases the
	// lease if it leads), twice.
	start := time.Now()
	stops := replaceReplicas(t, []string{"release-0", "release-1"}, []string{"upgraded-0", "upgraded-1"}, startUpgraded)
	upgraded := time.Since(start)
	var mid appsv1alpha1.SidecarSet
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(set), &mid))
	if mid.Status.UpdatedPods >= 6 {
		t.Errorf("the rollout was over before the last old replica stopped (%d updated): the upgrade must happen mid-rollout", mid.Status.UpdatedPods)
	}

	waitForRollout(t, set, "Complete", "6 of 6 matched pods carry hash")
	waitForCounts(t, set, counts{6, 6, 6, 6}, converge)
	created := load.stop(t)
	patched := podWrites(t) - writes
	t.Logf("upgraded %s to this commit in %s with a rollout in flight (%d of 6 pods updated when the last old replica stopped): %d pods created meanwhile (%d refused, %d without their sidecars), "+
		"%.0f pod writes for a rollout of 6 pods, highest unavailable %d of 1", version, upgraded.Round(time.Millisecond), mid.Status.UpdatedPods,
		created.created, len(created.refusals), len(created.bare), patched, budget.Highest())
	// The previous release does not drain: stopping, it closes the API server's idle
	// keep-alive connections, and a review sent on one as it closes is lost (see
	// TestRollingRestartRefusesNoPod for this version, which drains).
	created.refusedOnlyAt(t, stops, "as it stopped, without draining")
	for _, f := range created.bare {
		t.Error(f)
	}
	if created.created < 10 {
		t.Errorf("only %d pods created during the upgrade; the test needs a steady stream", created.created)
	}
	if patched != 6 {
		t.Errorf("%.0f pod writes; want 6, one per pod of the rollout and none by the upgrade itself", patched)
	}
	if budget.Highest() > 1 {
		t.Errorf("highest unavailable %d exceeds maxUnavailable 1", budget.Highest())
	}
	for _, p := range podsOf(t, ns, "upgraded") {
		if uid, ok := before[p.Name]; !ok || uid != string(p.UID) {
			t.Errorf("pod %s was recreated during the upgrade", p.Name)
		}
		if img := containerNamed(p.Spec.Containers, "agent").Image; img != "registry.example/agent:2.0" || restarts(&p, "agent") != 1 {
			t.Errorf("pod %s: agent %s restarted %d times; want 2.0 and one restart", p.Name, img, restarts(&p, "agent"))
		}
	}
}

// TestRollingRestartRefusesNoPod: replicas of this commit replaced one at a time, as a
// Deployment's rolling update (or kubectl rollout restart) does, while opted-in pods are created
// ten times a second: none stored without its sidecar, and none refused but for the one race
// HTTP/1.1 leaves (below). Each stopped replica drains (--webhook-drain-duration) rather than
// close the API server's kept-alive connections under a review it is sending, which failed such
// a creation with EOF.
func TestRollingRestartRefusesNoPod(t *testing.T) {
	const rounds = 4
	names := []string{"operator-0"}
	for i := range rounds {
		names = append(names, fmt.Sprintf("restarted-%d", i))
	}
	t.Cleanup(func() {
		for _, name := range names[1:] {
			if err := run("operator-stop", name); err != nil {
				t.Error(err)
			}
		}
		must(t, startOperator("operator-0"))
	})
	burst := createAgentSet(t, "e2e-restart-burst", "restart-burst")
	// Three streams, so that the API server keeps several connections open to the replicas.
	var loads []*creations
	for range 3 {
		loads = append(loads, startCreations(t, newNamespace(t, "restart-burst", nil), "restart-burst", 100*time.Millisecond,
			burst.Spec.Containers[0].Name))
	}
	drain := time.Second // hack/demo.sh's --webhook-drain-duration
	if d := os.Getenv("SIDECARSET_WEBHOOK_DRAIN"); d != "" {
		var err error
		drain, err = time.ParseDuration(d)
		must(t, err)
	}
	start := time.Now()
	stops := replaceReplicas(t, names[:rounds], names[1:], startOperator)
	restarted := time.Since(start)
	// Once drained, a replica shuts down, closing the connections no review came on for the
	// whole drain; the API server may take one for a review as it closes (HTTP/1.1 has no way to
	// say so first), and does not retry that POST. Only then may a creation fail so: a replica
	// that did not drain loses them at TERM, a drain's length earlier.
	for i := range stops {
		stops[i].from = stops[i].from.Add(drain)
	}
	created, refused := 0, 0
	for _, load := range loads {
		done := load.stop(t)
		created, refused = created+done.created, refused+len(done.refusals)
		done.refusedOnlyAt(t, stops, "as it shut down after its drain")
		for _, f := range done.bare {
			t.Error(f)
		}
	}
	t.Logf("%d replicas replaced one at a time in %s: %d pods created meanwhile, %d refused", rounds,
		restarted.Round(time.Millisecond), created, refused)
	if created < 3*5*rounds {
		t.Errorf("only %d pods created during the restarts; the test needs a steady stream", created)
	}
}

// previousRelease is the last release of releases.txt and its manager, built from the
// release's commit, cached per user as hack/tool.sh caches tools (keyed by commit and Go
// version), so a later run, from any clone, reuses it.
func previousRelease(t *testing.T) (version, manager string) {
	t.Helper()
	root := strings.TrimSpace(output(t, "git", "rev-parse", "--show-toplevel"))
	f, err := os.Open(filepath.Join(root, "releases.txt"))
	must(t, err)
	defer func() { _ = f.Close() }()
	var commit string
	for s := bufio.NewScanner(f); s.Scan(); {
		if fields := strings.Fields(s.Text()); len(fields) == 3 && !strings.HasPrefix(fields[0], "#") {
			version, commit = fields[0], fields[1]
		}
	}
	if commit == "" {
		t.Fatal("releases.txt names no release")
	}
	if err := exec.Command("git", "-C", root, "cat-file", "-e", commit+"^{commit}").Run(); err != nil {
		t.Fatalf("the commit of %s (%s) is not in this clone (a shallow one?): fetch it, for example with git fetch --unshallow", version, commit)
	}
	cacheRoot := os.Getenv("SIDECARSET_CACHE_DIR")
	if cacheRoot == "" {
		dir, err := os.UserCacheDir()
		must(t, err)
		cacheRoot = filepath.Join(dir, "sidecarset-operator")
	}
	manager = filepath.Join(cacheRoot, "releases", commit+"-"+runtime.Version(), "manager")
	if _, err := os.Stat(manager); err == nil {
		return version, manager
	}
	must(t, os.MkdirAll(filepath.Dir(manager), 0o755))
	src := t.TempDir()
	tarball := filepath.Join(src, "release.tar")
	for _, cmd := range [][]string{{"git", "-C", root, "archive", "-o", tarball, commit}, {"tar", "-x", "-f", tarball, "-C", src}} {
		if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(cmd, " "), err, out)
		}
	}
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", manager+".tmp", ".")
	build.Dir, build.Env = src, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the manager of %s (%s): %v\n%s", version, commit, err, out)
	}
	must(t, os.Rename(manager+".tmp", manager))
	return version, manager
}

func output(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	must(t, err)
	return string(out)
}

// upgradeCheck runs this commit's kubectl sidecarset upgrade-check against the cluster and
// returns its report and exit code.
func upgradeCheck(t *testing.T) (string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Run(ctx, []string{"upgrade-check", "--operator-namespace", operatorNamespace},
		genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	return out.String() + errOut.String(), code
}

// creations creates opted-in pods at a steady pace until stopped, and keeps what went wrong:
// each creation refused, and each pod stored without its sidecar.
type creations struct {
	done    chan struct{}
	wg      sync.WaitGroup
	created int
	// refusals are the failed creations, with when each was sent and answered.
	refusals []refusal
	bare     []string
	// sent is when each pod created was sent.
	sent map[string]time.Time
}

// refusal is a creation the API server refused: sent at start, answered at end.
type refusal struct {
	start, end time.Time
	err        error
	text       string // the pod, when it was answered, and the error
}

// runPreviousRelease stops the suite's operator and runs the previous release (previousRelease)
// as two replicas, release-0 and release-1, with the manager flags given besides leader
// election; it returns the release's version and how to start a replica of this commit with the
// same flags. After the test every replica stops, then cleanup runs (when not nil), then the
// suite's operator starts again.
func runPreviousRelease(t *testing.T, cleanup func(), flags ...string) (version string, startUpgraded func(name string) error) {
	t.Helper()
	version, old := previousRelease(t)
	stopOperator(t, "operator-0", "TERM")
	t.Cleanup(func() {
		for _, name := range []string{"release-0", "release-1", "upgraded-0", "upgraded-1"} {
			if err := run("operator-stop", name); err != nil {
				t.Error(err)
			}
		}
		if cleanup != nil {
			cleanup()
		}
		must(t, startOperator("operator-0"))
	})
	start := func(env []string) func(name string) error {
		return func(name string) error {
			return runWithEnv(env, append([]string{"operator-start", name, "--leader-elect", "--leader-election-namespace", operatorNamespace}, flags...)...)
		}
	}
	for _, name := range []string{"release-0", "release-1"} {
		must(t, start([]string{"SIDECARSET_MANAGER=" + old})(name))
	}
	return version, start(nil)
}

// window is when a replica stopping could lose a creation's webhook call: from when it was asked
// to stop (or later) to a second after it had stopped, the time the API server may take to see
// a kept-alive connection to it closed.
type window struct {
	replica  string
	from, to time.Time
}

// replaceReplicas starts each of next (start returns once it is ready) and then stops the old
// replica at the same index with TERM, as a Deployment's rolling update does, and returns the
// windows of the stops.
func replaceReplicas(t *testing.T, old, next []string, start func(name string) error) []window {
	t.Helper()
	var out []window
	for i, name := range next {
		must(t, start(name))
		stopping := time.Now()
		stopOperator(t, old[i], "TERM")
		out = append(out, window{replica: old[i], from: stopping, to: time.Now().Add(time.Second)})
	}
	return out
}

// refusedOnlyAt fails the test for each refused creation but those whose webhook call lost its
// connection within one of windows, which it logs, saying why the replica lost it: the API
// server does not retry a webhook call that fails so. c sends one creation at a time, so at
// most one was in flight at each window.
func (c *creations) refusedOnlyAt(t *testing.T, windows []window, why string) {
	t.Helper()
	lost := make([]int, len(windows))
	for _, r := range c.refusals {
		i := slices.IndexFunc(windows, func(w window) bool { return r.inFlightAt(w.from, w.to) })
		if i < 0 {
			t.Error(r.text)
			continue
		}
		lost[i]++
		t.Logf("lost its connection to %s %s: %s", windows[i].replica, why, r.text)
	}
	for i, n := range lost {
		if n > 1 {
			t.Errorf("%d creations of one stream lost their connection to %s %s; it sends one at a time, so at most one was in flight", n, windows[i].replica, why)
		}
	}
}

// inFlightAt reports whether the creation was sent before to and answered after from, failing
// as a request does whose connection is lost under it (a webhook replica stopped or killed
// while it answered: a Service's endpoints fail the same way, and the API server does not
// retry a webhook call).
func (r refusal) inFlightAt(from, to time.Time) bool {
	return connectionLost(r.err) && r.start.Before(to) && r.end.After(from)
}

func startCreations(t *testing.T, ns, app string, every time.Duration, sidecar string) *creations {
	t.Helper()
	c := &creations{done: make(chan struct{}), sent: map[string]time.Time{}}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-c.done:
				return
			case <-tick.C:
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", app, i),
				Labels: map[string]string{"app": app, appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue}}, Spec: podSpec()}
			start := time.Now()
			switch err := k8s.Create(ctx, pod); {
			case err != nil:
				end := time.Now()
				text := fmt.Sprintf("creating pod %s at %s: %v", pod.Name, end.Format(time.StampMilli), err)
				c.refusals = append(c.refusals, refusal{start: start, end: end, err: err, text: text})
			case !hasContainer(pod, sidecar):
				c.bare = append(c.bare, fmt.Sprintf("pod %s stored without %s at %s", pod.Name, sidecar, time.Now().Format(time.StampMilli)))
			default:
				c.created++
				c.sent[pod.Name] = start
			}
		}
	}()
	t.Cleanup(func() { c.stop(t) })
	return c
}

// stop ends the creations (once) and returns what they did.
func (c *creations) stop(*testing.T) *creations {
	select {
	case <-c.done:
	default:
		close(c.done)
	}
	c.wg.Wait()
	return c
}
