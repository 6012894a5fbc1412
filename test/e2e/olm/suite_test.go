//go:build e2e

// Package olm installs, upgrades and uninstalls the operator through OLM, for real: OLM's olm
// and catalog operators run as host processes on a local cluster of their own (hack/olm.sh),
// read the file-based catalog from `opm serve` through a CatalogSource with spec.address, and
// own the CRD, the RBAC and the webhook configurations they create from the bundle. kwok
// marks the operator's pods Running and Ready; they run no code, so nothing here calls the
// webhooks. Run it with `make test-e2e-olm`, which starts the cluster and OLM, serves
// catalog/, and tears everything down afterwards.
package olm

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	operatorsv2 "github.com/operator-framework/api/pkg/operators/v2"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/test/testutil"
)

// The names this test gives what it creates; the package, channel and CSV names come from the
// bundle (see bundleInfo).
const (
	operatorNamespace = "sidecarset-system"
	olmNamespace      = "olm"
	catalogSourceName = "sidecarset-operator"
	operatorGroupName = "sidecarset-operator"
	subscriptionName  = "sidecarset-operator"
	// fallbackNode is an untainted kwok node without the type=kwok label; see createShared.
	fallbackNode = "kwok-untainted-0"
	// converge bounds every wait on OLM; an install takes seconds here.
	converge = 3 * time.Minute
)

var (
	// k8s talks to the cluster directly (no cache).
	k8s client.Client
	ctx = context.Background()
	env struct {
		stateDir  string // SIDECARSET_CLUSTER_DIR: the cluster's and OLM's state
		olmScript string // SIDECARSET_OLM: hack/olm.sh, which serves catalogs
		opm       string // SIDECARSET_OPM: bin/opm
		catalog   string // SIDECARSET_CATALOG: the catalog hack/olm.sh up serves (catalog/)
		bundle    string // SIDECARSET_BUNDLE: the bundle directory that catalog was rendered from
	}
	// catalogPort is where hack/olm.sh up serves env.catalog.
	catalogPort string
)

func TestMain(m *testing.M) {
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "olm e2e:", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := teardown(); err != nil {
		fmt.Fprintln(os.Stderr, "olm e2e: teardown:", err)
		code = max(code, 1)
	}
	os.Exit(code)
}

func setup() error {
	vars := map[string]*string{
		"SIDECARSET_CLUSTER_DIR": &env.stateDir, "SIDECARSET_OLM": &env.olmScript, "SIDECARSET_OPM": &env.opm,
		"SIDECARSET_CATALOG": &env.catalog, "SIDECARSET_BUNDLE": &env.bundle,
	}
	var missing []string
	for name, v := range vars {
		if *v = os.Getenv(name); *v == "" {
			missing = append(missing, name)
		}
	}
	if os.Getenv("KUBECONFIG") == "" {
		missing = append(missing, "KUBECONFIG")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s not set: run these tests with `make test-e2e-olm`, which starts a local cluster "+
			"with OLM (hack/cluster.sh up, hack/olm.sh build up) and sets KUBECONFIG, SIDECARSET_CLUSTER_DIR, "+
			"SIDECARSET_OLM, SIDECARSET_OPM, SIDECARSET_CATALOG and SIDECARSET_BUNDLE", strings.Join(missing, ", "))
	}
	var err error
	if catalogPort, err = olmEnv("CATALOG_PORT"); err != nil {
		return err
	}
	cfg, err := config.GetConfig()
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme,
		operatorsv1alpha1.AddToScheme, operatorsv1.AddToScheme, operatorsv2.AddToScheme, appsv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	return createShared()
}

// olmEnv reads KEY from the olm.env that hack/olm.sh writes into the state directory.
func olmEnv(key string) (string, error) {
	path := filepath.Join(env.stateDir, "olm.env")
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%w: is OLM up (hack/olm.sh up)?", err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key+"="); ok {
			return v, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s records no %s: is OLM up (hack/olm.sh up)?", path, key)
}

// createShared creates what every test installs through: the operator's namespace (opted out
// of injection, as config/ labels it), an OperatorGroup for AllNamespaces (no
// targetNamespaces), a CatalogSource reading catalog/ through hack/olm.sh's opm serve, and a
// second kwok node.
//
// The second node has no taint and no type=kwok label, so the operator's pods, which the
// Subscription's config pins to type=kwok, never stay there. It is there for an OLM race: OLM
// applies a Subscription's config only once the Subscription's status.installedCSV names the
// CSV (overrides.findOwner), which the catalog operator sets concurrently with the olm
// operator's install, and it compares the Deployment with the CSV plus config only once the
// Deployment is available (install.checkForDeployments). When the install wins the race, the
// Deployment has no tolerations; on a cluster whose only node is tainted its pods never
// schedule and the CSV waits in Installing. With a node they can reach, they turn Ready, OLM
// sees the Deployment differs, and rolls it out again with the Subscription's config.
func createShared() error {
	objs := []client.Object{
		&corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: fallbackNode, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
				Labels: map[string]string{"kubernetes.io/hostname": fallbackNode, "kubernetes.io/os": "linux"}},
			Status: corev1.NodeStatus{
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"),
					corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("110")},
				Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"),
					corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("110")},
			},
		},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace,
			Labels: map[string]string{"sidecarset.io/injection": "disabled"}}},
		&operatorsv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: operatorGroupName}},
		&operatorsv1alpha1.CatalogSource{
			ObjectMeta: metav1.ObjectMeta{Namespace: olmNamespace, Name: catalogSourceName},
			Spec: operatorsv1alpha1.CatalogSourceSpec{SourceType: operatorsv1alpha1.SourceTypeGrpc,
				Address: "127.0.0.1:" + catalogPort, DisplayName: "sidecarset-operator (local)", Publisher: "e2e"},
		},
	}
	for _, obj := range objs {
		if err := k8s.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return nil
}

// teardown deletes what createShared created; the cluster goes with `make test-e2e-olm`.
func teardown() error {
	objs := []client.Object{
		&operatorsv1alpha1.CatalogSource{ObjectMeta: metav1.ObjectMeta{Namespace: olmNamespace, Name: catalogSourceName}},
		&operatorsv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: operatorGroupName}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fallbackNode}},
	}
	for _, obj := range objs {
		if err := k8s.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	// Wait for the namespace to go, so that running the tests again on this cluster starts
	// clean.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(250 * time.Millisecond) {
		err := k8s.Get(ctx, client.ObjectKey{Name: operatorNamespace}, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil || time.Now().After(deadline) {
			return fmt.Errorf("namespace %s still there after a minute (%v)", operatorNamespace, err)
		}
	}
}

var must = testutil.Must

// eventually polls cond every 250 ms until it holds or timeout passes, and returns how long
// that took.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	return testutil.Eventually(t, timeout, 250*time.Millisecond, what, cond)
}

// run runs a command and returns its stdout; a failure fails the test with its stderr.
var run = testutil.Run
