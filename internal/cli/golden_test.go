package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

var update = flag.Bool("update", false, "rewrite testdata/*/golden from the plugin's output instead of comparing")

// TestGolden runs the plugin on each case under testdata (a directory with an args file, run
// from that directory, with the case's stdin.yaml, if any, on standard input) and compares the
// exit code, standard output and standard error with the case's golden file.
func TestGolden(t *testing.T) {
	cases, err := filepath.Glob("testdata/*/args")
	if err != nil || len(cases) == 0 {
		t.Fatalf("no cases under testdata: %v", err)
	}
	for _, argsFile := range cases {
		dir := filepath.Dir(argsFile)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			raw, err := os.ReadFile(argsFile)
			if err != nil {
				t.Fatal(err)
			}
			t.Chdir(dir)
			stdin, err := os.ReadFile("stdin.yaml")
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Fatal(err)
			}
			code, stdout, stderr := runPlugin(t, strings.Fields(string(raw)), string(stdin))
			got := fmt.Sprintf("exit code %d\n--- stdout\n%s--- stderr\n%s", code, stdout, stderr)
			compareGolden(t, "golden", got)
		})
	}
}

// runPlugin runs the plugin with stdin and returns its exit code and output.
func runPlugin(t *testing.T, args []string, stdin string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Run(context.Background(), args, genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut})
	return code, out.String(), errOut.String()
}

func compareGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden file missing; run: go test ./internal/cli -run Golden -update")
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("output differs from %s (-want +got):\n%s\nIf the change is intended, run: go test ./internal/cli -run Golden -update", path, diff)
	}
}

// TestInjectIsIdempotent feeds inject its own output: nothing changes, and every pod is
// reported unchanged as already injected.
func TestInjectIsIdempotent(t *testing.T) {
	t.Chdir("testdata/workloads")
	args := []string{"inject", "-f", "-", "--sidecarsets", "../sidecarsets.yaml", "--namespace-labels", "mesh=enabled"}
	input, err := os.ReadFile("input.yaml")
	if err != nil {
		t.Fatal(err)
	}
	code, once, _ := runPlugin(t, args, string(input))
	if code != 0 || once == string(input) {
		t.Fatalf("first pass: exit %d, output unchanged %v", code, once == string(input))
	}
	code, twice, stderr := runPlugin(t, args, once)
	if code != 0 || twice != once {
		t.Errorf("second pass: exit %d, changed:\n%s", code, cmp.Diff(once, twice))
	}
	if strings.Contains(stderr, ": injected") {
		t.Errorf("second pass injected again:\n%s", stderr)
	}
}

// TestUsageErrors: wrong flags and arguments exit 2 with a message, never a stack trace.
func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"inject"},
		{"inject", "deploy.yaml"},
		{"inject", "-f", "x.yaml", "--bogus"},
		{"explain"},
		{"explain", "pod"},
		{"explain", "pod", "x", "-f", "y.yaml"},
		{"status"},
		{"status", "a", "b"},
		{"rollout"},
		{"rollout", "bogus"},
		{"rollout", "plan"},
		{"rollout", "plan", "a", "b"},
		{"rollout", "plan", "a", "-o", "yaml"},
		{"nonsense"},
		{"inject", "-f", "-", "--sidecarsets", "-"},
	} {
		code, stdout, stderr := runPlugin(t, args, "")
		if code != ExitUsage || stdout != "" || !strings.HasPrefix(stderr, "error: ") || strings.Contains(stderr, "goroutine") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and one error line", args, code, stdout, stderr, ExitUsage)
		}
	}
}

// TestUnreachableCluster: a kubeconfig pointing nowhere exits 3.
func TestUnreachableCluster(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: x}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"status", "x", "--kubeconfig", kubeconfig},
		{"explain", "pod", "x", "--kubeconfig", kubeconfig},
		{"rollout", "plan", "x", "--kubeconfig", kubeconfig},
		{"inject", "-f", "testdata/workloads/input.yaml", "--kubeconfig", kubeconfig},
	} {
		code, _, stderr := runPlugin(t, args, "")
		if code != ExitCluster || !strings.Contains(stderr, "127.0.0.1:1") {
			t.Errorf("%v: exit %d, stderr %q; want exit %d naming the server", args, code, stderr, ExitCluster)
		}
	}
}
