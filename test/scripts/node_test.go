// Package scripts tests what the hack/ scripts promise about the machine they run on where no
// cluster is needed: `hack/node.sh down` stops only what its own node started and touches only a
// state directory `hack/cluster.sh up` created. The tests run the script in a private mount
// namespace over a fake cgroup tree (a tmpfs on /sys/fs/cgroup that only the namespace sees), so
// they need root; elsewhere they are skipped.
package scripts

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// process is a `sleep` the test started, standing for a container of some node.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startProcess(t *testing.T) *process {
	t.Helper()
	p := &process{cmd: exec.Command("sleep", "300"), done: make(chan struct{})}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Reap it as soon as it dies, so that a killed one leaves no zombie behind.
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

func (p *process) pid() string { return strconv.Itoa(p.cmd.Process.Pid) }

// killed reports whether the process died of SIGKILL within a second.
func (p *process) killed() bool {
	select {
	case <-p.done:
		ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
		return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
	case <-time.After(time.Second):
		return false
	}
}

// survived reports whether the process still runs half a second after (a SIGKILL sent before
// has had its effect by then).
func (p *process) survived() bool {
	select {
	case <-p.done:
		return false
	case <-time.After(500 * time.Millisecond):
		return true
	}
}

// fakeCgroupScript mounts a tmpfs over /sys/fs/cgroup (in the private mount namespace it runs
// in), puts each pid given as "CGROUP PID" arguments in that cgroup's cgroup.procs, then runs
// `hack/node.sh down`.
const fakeCgroupScript = `set -euo pipefail
node=$1
shift
mount -t tmpfs tmpfs /sys/fs/cgroup
while (($# > 0)); do
  mkdir -p "/sys/fs/cgroup/$1"
  echo "$2" >>"/sys/fs/cgroup/$1/cgroup.procs"
  shift 2
done
"$node" down
`

type scriptTest struct {
	t    *testing.T
	node string
}

func newScriptTest(t *testing.T) scriptTest {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: hack/node.sh down runs in a private mount namespace over a fake cgroup tree")
	}
	if out, err := exec.Command("unshare", "--mount", "--propagation", "private", "true").CombinedOutput(); err != nil {
		t.Skipf("no private mount namespace here (unshare --mount: %v: %s)", err, bytes.TrimSpace(out))
	}
	node, err := filepath.Abs("../../hack/node.sh")
	if err != nil {
		t.Fatal(err)
	}
	return scriptTest{t: t, node: node}
}

// down runs `hack/node.sh down` on stateDir over a fake cgroup tree holding the given processes
// (cgroup path under /sys/fs/cgroup -> process); it returns the script's output and error.
func (s scriptTest) down(stateDir string, procs map[string]*process) (string, error) {
	args := []string{"--mount", "--propagation", "private", "bash", "-c", fakeCgroupScript, "fake-cgroups", s.node}
	for cg, p := range procs {
		args = append(args, cg, p.pid())
	}
	cmd := exec.Command("unshare", args...)
	cmd.Env = append(os.Environ(), "SIDECARSET_CLUSTER_DIR="+stateDir)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// cgroupName is the node's cgroup for stateDir (`hack/node.sh cgroup`).
func (s scriptTest) cgroupName(stateDir string) string {
	cmd := exec.Command(s.node, "cgroup")
	cmd.Env = append(os.Environ(), "SIDECARSET_CLUSTER_DIR="+stateDir)
	out, err := cmd.Output()
	if err != nil {
		s.t.Fatalf("hack/node.sh cgroup: %v", err)
	}
	name := strings.TrimSpace(string(out))
	if !strings.HasPrefix(name, "sidecarset-node-") {
		s.t.Fatalf("hack/node.sh cgroup printed %q", name)
	}
	return name
}

// stateDir makes DIR/state with a node directory holding a file; with the marker
// hack/cluster.sh up writes when owned.
func stateDir(t *testing.T, owned bool) (dir, kept string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "state")
	kept = filepath.Join(dir, "node", "data.txt")
	if err := os.MkdirAll(filepath.Dir(kept), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kept, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if owned {
		if err := os.WriteFile(filepath.Join(dir, ".sidecarset-local-cluster"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir, kept
}

// TestNodeDownKillsOnlyItsOwnCgroup: in a state directory hack/cluster.sh created, `down` kills
// the processes in this node's cgroup (its pods below the kubelet's cgroupRoot, in any hierarchy)
// and removes its directory, but leaves alone every other process: the pods of a kubelet with
// the default /kubepods, and those of another checkout's node.
func TestNodeDownKillsOnlyItsOwnCgroup(t *testing.T) {
	s := newScriptTest(t)
	dir, kept := stateDir(t, true)
	own := s.cgroupName(dir)
	other := s.cgroupName(dir + "-other")
	ours := map[string]*process{
		"pids/" + own + "/kubepods/besteffort/pod-a": startProcess(t),
		"memory/" + own + "/kubepods/pod-b":          startProcess(t),
		"pids/" + own:                                startProcess(t), // a daemon that outlived node-ns.sh
	}
	foreign := map[string]*process{
		"pids/kubepods/foreign-pod":                startProcess(t),
		"memory/kubepods/burstable/foreign-pod":    startProcess(t),
		"pids/" + other + "/kubepods/another-node": startProcess(t),
	}
	all := map[string]*process{}
	for cg, p := range ours {
		all[cg] = p
	}
	for cg, p := range foreign {
		all[cg] = p
	}
	out, err := s.down(dir, all)
	if err != nil {
		t.Fatalf("hack/node.sh down: %v\n%s", err, out)
	}
	for cg, p := range ours {
		if !p.killed() {
			t.Errorf("the process in this node's cgroup %s was not killed\n%s", cg, out)
		}
	}
	for cg, p := range foreign {
		if !p.survived() {
			t.Errorf("hack/node.sh down killed a process it did not start, in %s\n%s", cg, out)
		}
	}
	if _, err := os.Stat(kept); !os.IsNotExist(err) {
		t.Errorf("the node's directory was not removed: %v", err)
	}
}

// TestNodeDownRefusesAStateDirectoryItDidNotCreate: without the marker hack/cluster.sh up writes,
// `down` fails, kills nothing (not even what sits in the cgroup named after that directory) and
// removes nothing.
func TestNodeDownRefusesAStateDirectoryItDidNotCreate(t *testing.T) {
	s := newScriptTest(t)
	dir, kept := stateDir(t, false)
	procs := map[string]*process{
		"pids/kubepods/foreign-pod":                           startProcess(t),
		"pids/" + s.cgroupName(dir) + "/kubepods/pod-a":       startProcess(t),
		"memory/" + s.cgroupName(dir) + "/kubepods/burstable": startProcess(t),
	}
	out, err := s.down(dir, procs)
	if err == nil {
		t.Errorf("hack/node.sh down succeeded on a directory hack/cluster.sh did not create\n%s", out)
	} else if !strings.Contains(out, ".sidecarset-local-cluster") {
		t.Errorf("hack/node.sh down failed without naming the missing marker: %v\n%s", err, out)
	}
	for cg, p := range procs {
		if !p.survived() {
			t.Errorf("hack/node.sh down killed the process in %s\n%s", cg, out)
		}
	}
	if b, err := os.ReadFile(kept); err != nil || string(b) != "precious\n" {
		t.Errorf("hack/node.sh down removed or changed %s: %q, %v", kept, b, err)
	}
}
