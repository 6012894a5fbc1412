//go:build e2e

package olm

import (
	"bytes"
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

// upgradeVersion is the version of the bundle built from bundle/ to upgrade to.
const upgradeVersion = "0.1.1"

// TestUpgradeThroughTheCatalog installs the shipped bundle with startingCSV, then serves a
// catalog whose channel adds a next version that replaces it, points the same CatalogSource at
// it, and waits for OLM to upgrade the operator.
func TestUpgradeThroughTheCatalog(t *testing.T) {
	from := readBundle(t, env.bundle)
	dir := t.TempDir()
	next := bumpBundle(t, from, env.bundle, filepath.Join(dir, "bundle-"+upgradeVersion), upgradeVersion)
	catalog := upgradeCatalog(t, from, next, filepath.Join(dir, "catalog"))

	sub := subscribe(t, from, from.csv.Name)
	_, took := waitInstalled(t, sub, from.csv.Name)
	t.Logf("%s Succeeded %v after the Subscription", from.csv.Name, took)

	port := strings.TrimSpace(string(run(t, env.olmScript, "serve", "catalog-upgrade", catalog)))
	t.Cleanup(func() { run(t, env.olmScript, "unserve", "catalog-upgrade") })
	setCatalogAddress(t, "127.0.0.1:"+port)
	t.Cleanup(func() { setCatalogAddress(t, "127.0.0.1:"+catalogPort) })

	csv, took := waitInstalled(t, sub, next.csv.Name)
	t.Logf("%s Succeeded %v after the CatalogSource moved to the new catalog", csv.Name, took)
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

// bumpBundle copies the bundle directory src to dst as version: the CSV gets the new name and
// version, replaces from's CSV, and runs the image tagged with the new version.
func bumpBundle(t *testing.T, from bundle, src, dst, version string) bundle {
	t.Helper()
	must(t, os.CopyFS(dst, os.DirFS(src)))
	csvs, err := filepath.Glob(filepath.Join(dst, "manifests", "*.clusterserviceversion.yaml"))
	must(t, err)
	raw, err := os.ReadFile(csvs[0])
	must(t, err)
	var csv unstructured.Unstructured
	must(t, yaml.Unmarshal(raw, &csv.Object))
	oldVersion := from.csv.Spec.Version.String()
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

// upgradeCatalog writes a file-based catalog into dir with both bundles rendered by
// `opm render` (manifests inline, image ""), a channel in which next replaces from, and
// validates it with `opm validate`. It returns the catalog's root.
func upgradeCatalog(t *testing.T, from, next bundle, dir string) string {
	t.Helper()
	pkgDir := filepath.Join(dir, from.pkg)
	must(t, os.MkdirAll(pkgDir, 0o755))
	files := map[string][]byte{
		"package.yaml": run(t, env.opm, "init", from.pkg, "--default-channel="+from.channel, "--output=yaml"),
		"bundle-v" + from.csv.Spec.Version.String() + ".yaml": run(t, env.opm, "render", from.dir, "--output=yaml"),
		"bundle-v" + next.csv.Spec.Version.String() + ".yaml": run(t, env.opm, "render", next.dir, "--output=yaml"),
		"channels.yaml": fmt.Appendf(nil, "schema: olm.channel\npackage: %s\nname: %s\nentries:\n- name: %s\n- name: %s\n  replaces: %s\n",
			from.pkg, from.channel, from.csv.Name, next.csv.Name, from.csv.Name),
	}
	// The starting bundle must be the one the served catalog/ holds, or OLM would see two
	// different bundles under one name.
	shipped, err := os.ReadFile(filepath.Join(env.catalog, from.pkg, "bundle.yaml"))
	must(t, err)
	if rendered := files["bundle-v"+from.csv.Spec.Version.String()+".yaml"]; !bytes.Equal(bytes.TrimSpace(shipped), bytes.TrimSpace(rendered)) {
		t.Fatalf("%s differs from `opm render %s`: catalog/ is stale (make catalog)", filepath.Join(env.catalog, from.pkg, "bundle.yaml"), from.dir)
	}
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
