// Package release checks releases.txt, where the upgrade tests find each release's commit:
// every line names a commit of this repository's history whose CHANGELOG dates that version and
// whose bundle, catalog and chart carry it.
package release

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sidecarset/sidecarset-operator/test/testutil"
)

// release is one line of releases.txt.
type release struct {
	version, commit string
	date            time.Time
}

var versionPattern = regexp.MustCompile(`^v(\d+)\.(\d+)\.(\d+)$`)

func readReleases(t *testing.T, root string) []release {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "releases.txt"))
	testutil.Must(t, err)
	defer func() { _ = f.Close() }()
	var out []release
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 3 || !versionPattern.MatchString(fields[0]) || !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(fields[1]) {
			t.Fatalf("releases.txt:%d: %q; want VERSION (vX.Y.Z) COMMIT (40 hex digits) DATE (YYYY-MM-DD)", n, line)
		}
		date, err := time.Parse(time.DateOnly, fields[2])
		if err != nil {
			t.Fatalf("releases.txt:%d: date %q: %v", n, fields[2], err)
		}
		out = append(out, release{version: fields[0], commit: fields[1], date: date})
	}
	testutil.Must(t, sc.Err())
	if len(out) == 0 {
		t.Fatal("releases.txt names no release")
	}
	return out
}

// show is the file at path in commit.
func show(t *testing.T, root, commit, path string) []byte {
	t.Helper()
	cmd := exec.Command("git", "show", commit+":"+path)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git show %s:%s: %v\n%s", commit, path, err, stderr.String())
	}
	return out
}

// TestReleasesNameTheirCommits: each release's commit is in this repository's history, and at
// that commit the CHANGELOG has the version's dated section and the CSV, the catalog and the
// chart carry the version; releases are listed oldest first.
func TestReleasesNameTheirCommits(t *testing.T) {
	root := testutil.RepoRoot(t)
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Fatalf("no git history at %s (a release's commit is checked in it): %v", root, err)
	}
	releases := readReleases(t, root)
	shallow := exec.Command("git", "rev-parse", "--is-shallow-repository")
	shallow.Dir = root
	if out, err := shallow.Output(); err != nil || strings.TrimSpace(string(out)) != "false" {
		// A clone made with --depth holds no release's commit to read.
		t.Skipf("the clone at %s is shallow (git rev-parse --is-shallow-repository: %q, %v): a release's commit cannot be read; "+
			"run it in a full clone", root, strings.TrimSpace(string(out)), err)
	}
	for i, r := range releases {
		t.Run(r.version, func(t *testing.T) {
			ancestor := exec.Command("git", "merge-base", "--is-ancestor", r.commit, "HEAD")
			ancestor.Dir = root
			if out, err := ancestor.CombinedOutput(); err != nil {
				t.Fatalf("commit %s of %s is not in HEAD's history: %v %s", r.commit, r.version, err, out)
			}
			plain := strings.TrimPrefix(r.version, "v")
			heading := fmt.Sprintf("## [%s] - %s", plain, r.date.Format(time.DateOnly))
			if !bytes.Contains(show(t, root, r.commit, "CHANGELOG.md"), []byte("\n"+heading+"\n")) {
				t.Errorf("CHANGELOG.md at %s has no section %q", r.commit, heading)
			}
			for path, want := range map[string]string{
				"bundle/manifests/sidecarset-operator.clusterserviceversion.yaml": "\n  version: " + plain + "\n",
				"catalog/sidecarset-operator/bundle.yaml":                         "name: sidecarset-operator." + r.version + "\n",
				"dist/chart/Chart.yaml":                                           "\nversion: " + plain + "\n",
			} {
				if !bytes.Contains(show(t, root, r.commit, path), []byte(want)) {
					t.Errorf("%s at %s does not carry %s (%q)", path, r.commit, r.version, strings.TrimSpace(want))
				}
			}
			if i > 0 && releases[i-1].date.After(r.date) {
				t.Errorf("%s (%s) is listed after %s (%s): list releases oldest first", r.version, r.date.Format(time.DateOnly),
					releases[i-1].version, releases[i-1].date.Format(time.DateOnly))
			}
		})
	}
}
