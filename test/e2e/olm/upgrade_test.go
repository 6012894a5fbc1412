//go:build e2e

package olm

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// TestUpgradeThroughTheCatalog installs the previous release's bundle (releases.txt, read from
// its commit) from a catalog holding only it, then points the same CatalogSource at a catalog
// whose channel adds this commit's bundle, replacing it, and waits for OLM to upgrade the
// operator by that edge: the release's CRD, RBAC and webhooks replaced by this commit's.
func TestUpgradeThroughTheCatalog(t *testing.T) {
	dir := t.TempDir()
	release, releaseDir := releaseBundle(t, dir)
	from := readBundle(t, releaseDir)
	current := readBundle(t, env.bundle)
	// This commit's bundle carries the release's version until the next release is cut; it
	// is then renamed the next patch version, as the channel needs a new CSV name.
	version := current.csv.Spec.Version.Version
	if !version.GT(from.csv.Spec.Version.Version) {
		version = from.csv.Spec.Version.Version
		version.Patch++
		version.Pre, version.Build = nil, nil
	}
	next := bumpBundle(t, from, current, filepath.Join(dir, "bundle-"+version.String()), version.String())
	start := catalogOf(t, filepath.Join(dir, "catalog-release"), from)
	catalog := catalogOf(t, filepath.Join(dir, "catalog"), from, next)

	startCatalog(t, "catalog-release", start)
	sub := subscribe(t, from, from.csv.Name)
	_, took := waitInstalled(t, sub, from.csv.Name)
	t.Logf("%s (release %s) Succeeded %v after the Subscription", from.csv.Name, release, took)

	startCatalog(t, "catalog-upgrade", catalog)
	csv, took := waitInstalled(t, sub, next.csv.Name)
	t.Logf("%s (this commit's bundle) Succeeded %v after the CatalogSource moved to the new catalog", csv.Name, took)
	if csv.Spec.Replaces != from.csv.Name {
		t.Errorf("CSV %s replaces %q, want %q", csv.Name, csv.Spec.Replaces, from.csv.Name)
	}
	took = eventually(t, converge, from.csv.Name+" to be replaced and deleted", func() (bool, string) {
		var old operatorsv1alpha1.ClusterServiceVersion
		err := k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: from.csv.Name}, &old)
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		return false, fmt.Sprintf("phase %q reason %q (%v)", old.Status.Phase, old.Status.Reason, err)
	})
	t.Logf("%s deleted %v after %s Succeeded", from.csv.Name, took, csv.Name)
	var got operatorsv1alpha1.Subscription
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(sub), &got))
	if got.Status.InstalledCSV != csv.Name || got.Status.CurrentCSV != csv.Name {
		t.Errorf("Subscription installedCSV %q, currentCSV %q; want %s", got.Status.InstalledCSV, got.Status.CurrentCSV, csv.Name)
	}
	checkInstalled(t, csv, next)
	checkRolledOut(t, csv)
	uninstall(t, sub, csv)
}

// releaseBundle extracts the bundle directory of the last release in releases.txt, from its
// commit, into dir, and returns the release and the directory.
func releaseBundle(t *testing.T, dir string) (release, bundleDir string) {
	t.Helper()
	root := strings.TrimSpace(string(run(t, "git", "rev-parse", "--show-toplevel")))
	raw, err := os.ReadFile(filepath.Join(root, "releases.txt"))
	must(t, err)
	var commit string
	for line := range strings.Lines(string(raw)) {
		if fields := strings.Fields(line); len(fields) == 3 && !strings.HasPrefix(fields[0], "#") {
			release, commit = fields[0], fields[1]
		}
	}
	if commit == "" {
		t.Fatal("releases.txt names no release")
	}
	tarball := filepath.Join(dir, "release.tar")
	run(t, "git", "-C", root, "archive", "-o", tarball, commit, "bundle")
	src := filepath.Join(dir, "release")
	must(t, os.MkdirAll(src, 0o755))
	run(t, "tar", "-x", "-f", tarball, "-C", src)
	return release, filepath.Join(src, "bundle")
}

// startCatalog serves the catalog directory as NAME and points the CatalogSource at it, until
// the test ends.
func startCatalog(t *testing.T, name, dir string) {
	t.Helper()
	port := strings.TrimSpace(string(run(t, env.olmScript, "serve", name, dir)))
	t.Cleanup(func() { run(t, env.olmScript, "unserve", name) })
	setCatalogAddress(t, "127.0.0.1:"+port)
	t.Cleanup(func() { setCatalogAddress(t, "127.0.0.1:"+catalogPort) })
}

// bumpBundle copies the bundle src to dst as version: the CSV gets the new name and version,
// replaces from's CSV, and runs the image tagged with the new version.
func bumpBundle(t *testing.T, from, src bundle, dst, version string) bundle {
	t.Helper()
	must(t, os.CopyFS(dst, os.DirFS(src.dir)))
	csvs, err := filepath.Glob(filepath.Join(dst, "manifests", "*.clusterserviceversion.yaml"))
	must(t, err)
	raw, err := os.ReadFile(csvs[0])
	must(t, err)
	var csv unstructured.Unstructured
	must(t, yaml.Unmarshal(raw, &csv.Object))
	oldVersion := src.csv.Spec.Version.String()
	csv.SetName(from.pkg + ".v" + version)
	must(t, unstructured.SetNestedField(csv.Object, version, "spec", "version"))
	must(t, unstructured.SetNestedField(csv.Object, from.csv.Name, "spec", "replaces"))
	// The image: every container of every Deployment, and the containerImage annotation.
	retag := func(image string) string { return strings.Replace(image, ":v"+oldVersion, ":v"+version, 1) }
	deployments, _, err := unstructured.NestedSlice(csv.Object, "spec", "install", "spec", "deployments")
	must(t, err)
	for _, d := range deployments {
		containers, _, err := unstructured.NestedSlice(d.(map[string]any), "spec", "template", "spec", "containers")
		must(t, err)
		for _, c := range containers {
			c.(map[string]any)["image"] = retag(c.(map[string]any)["image"].(string))
		}
		must(t, unstructured.SetNestedSlice(d.(map[string]any), containers, "spec", "template", "spec", "containers"))
	}
	must(t, unstructured.SetNestedSlice(csv.Object, deployments, "spec", "install", "spec", "deployments"))
	if annotations := csv.GetAnnotations(); annotations["containerImage"] != "" {
		annotations["containerImage"] = retag(annotations["containerImage"])
		csv.SetAnnotations(annotations)
	}
	out, err := yaml.Marshal(csv.Object)
	must(t, err)
	must(t, os.WriteFile(csvs[0], out, 0o644))
	next := readBundle(t, dst)
	if next.csv.Spec.Version.String() != version || next.csv.Spec.Replaces != from.csv.Name {
		t.Fatalf("bumped CSV: version %s replaces %q", next.csv.Spec.Version, next.csv.Spec.Replaces)
	}
	return next
}

// catalogOf writes a file-based catalog into dir with the bundles rendered by `opm render`
// (manifests inline, image ""), a channel in which each replaces the one before, and validates
// it with `opm validate`. It returns the catalog's root.
func catalogOf(t *testing.T, dir string, bundles ...bundle) string {
	t.Helper()
	first := bundles[0]
	pkgDir := filepath.Join(dir, first.pkg)
	must(t, os.MkdirAll(pkgDir, 0o755))
	channel := fmt.Sprintf("schema: olm.channel\npackage: %s\nname: %s\nentries:\n", first.pkg, first.channel)
	files := map[string][]byte{"package.yaml": run(t, env.opm, "init", first.pkg, "--default-channel="+first.channel, "--output=yaml")}
	for i, b := range bundles {
		files["bundle-v"+b.csv.Spec.Version.String()+".yaml"] = run(t, env.opm, "render", b.dir, "--output=yaml")
		channel += "- name: " + b.csv.Name + "\n"
		if i > 0 {
			channel += "  replaces: " + bundles[i-1].csv.Name + "\n"
		}
	}
	files["channels.yaml"] = []byte(channel)
	for name, content := range files {
		must(t, os.WriteFile(filepath.Join(pkgDir, name), content, 0o644))
	}
	run(t, env.opm, "validate", dir)
	return dir
}

// setCatalogAddress points the CatalogSource at another `opm serve` and waits until OLM's
// catalog operator is connected to it.
func setCatalogAddress(t *testing.T, address string) {
	t.Helper()
	var src operatorsv1alpha1.CatalogSource
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: olmNamespace, Name: catalogSourceName}, &src))
	patch := client.MergeFrom(src.DeepCopy())
	src.Spec.Address = address
	must(t, k8s.Patch(ctx, &src, patch))
	eventually(t, converge, "CatalogSource connected to "+address, func() (bool, string) {
		must(t, k8s.Get(ctx, client.ObjectKeyFromObject(&src), &src))
		st := src.Status.GRPCConnectionState
		if st == nil {
			return false, "no connection state"
		}
		return st.Address == address && st.LastObservedState == "READY", fmt.Sprintf("%s %s", st.Address, st.LastObservedState)
	})
}

// checkRolledOut: the upgraded Deployment's pods all run the new CSV's image.
func checkRolledOut(t *testing.T, csv *operatorsv1alpha1.ClusterServiceVersion) {
	t.Helper()
	for _, spec := range csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs {
		var dep appsv1.Deployment
		must(t, k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: spec.Name}, &dep))
		if dep.Status.UpdatedReplicas != ptrValue(dep.Spec.Replicas, 1) || dep.Status.Replicas != dep.Status.UpdatedReplicas {
			t.Errorf("Deployment %s: %d of %d replicas updated, %d in all", dep.Name, dep.Status.UpdatedReplicas,
				ptrValue(dep.Spec.Replicas, 1), dep.Status.Replicas)
		}
		t.Logf("Deployment %s runs %s", dep.Name, dep.Spec.Template.Spec.Containers[0].Image)
	}
}
