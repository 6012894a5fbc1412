//go:build e2e

package olm

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	operatorsv2 "github.com/operator-framework/api/pkg/operators/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
	"github.com/sidecarset/sidecarset-operator/internal/inject"
	"github.com/sidecarset/sidecarset-operator/test/testutil"
)

// TestUpgradeableFollowsRollouts: the OperatorCondition OLM creates for the installed CSV says
// Upgradeable=False while a SidecarSet's rolling update is in progress (here paused with pods
// waiting), so OLM does not replace the operator mid-rollout, and True once nothing is left to
// update.
//
// There is no container runtime here, so the operator OLM deploys never runs and its webhooks
// cannot be reached: the pods and the SidecarSet are created before the install, and the
// manager binary runs on this host as OLM would run it, with OPERATOR_CONDITION_NAME set and
// its namespace in the ServiceAccount mount operator-lib reads (a private mount namespace).
func TestUpgradeableFollowsRollouts(t *testing.T) {
	b := readBundle(t, env.bundle)
	applyBundleCRD(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "upgradeable-e2e"}}
	must(t, k8s.Create(ctx, ns))
	t.Cleanup(func() { _ = k8s.Delete(ctx, ns) })

	// The pods were injected with agent 1.0; the set now declares 2.0, its rollout paused.
	set := &appsv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-upgradeable"},
		Spec: appsv1alpha1.SidecarSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "gated"}},
			Containers:     []appsv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "agent", Image: "registry.example/agent:1.0"}}},
			UpdateStrategy: appsv1alpha1.UpdateStrategy{Type: appsv1alpha1.RollingUpdate, Paused: true},
		},
	}
	var pods []*corev1.Pod
	for i := range 2 {
		pods = append(pods, injectedPod(t, set, ns.Name, fmt.Sprintf("gated-%d", i)))
	}
	set.Spec.Containers[0].Image = "registry.example/agent:2.0"
	must(t, k8s.Create(ctx, set))
	t.Cleanup(func() { _ = k8s.Delete(ctx, set) })

	sub := subscribe(t, b, b.csv.Name)
	csv, _ := waitInstalled(t, sub, b.csv.Name)
	stop := startManager(t, csv.Name)

	upgradeable := func(want metav1.ConditionStatus, reason, mention string) {
		t.Helper()
		took := eventually(t, converge, fmt.Sprintf("OperatorCondition %s Upgradeable=%s (%s)", csv.Name, want, reason), func() (bool, string) {
			var oc operatorsv2.OperatorCondition
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: csv.Name}, &oc); err != nil {
				return false, err.Error()
			}
			c := meta.FindStatusCondition(oc.Spec.Conditions, operatorsv2.Upgradeable)
			if c == nil {
				return false, fmt.Sprintf("spec.conditions %+v", oc.Spec.Conditions)
			}
			return c.Status == want && c.Reason == reason && strings.Contains(c.Message, mention), fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
		})
		t.Logf("Upgradeable=%s (%s) %v later", want, reason, took.Round(time.Millisecond))
	}
	upgradeable(metav1.ConditionFalse, "RolloutInProgress", set.Name)

	// Nothing left to update: the waiting pods go.
	for _, p := range pods {
		must(t, k8s.Delete(ctx, p, client.GracePeriodSeconds(0)))
	}
	upgradeable(metav1.ConditionTrue, "NoRolloutInProgress", "")

	stop()
	must(t, k8s.Delete(ctx, set))
	uninstall(t, sub, csv)
}

// applyBundleCRD installs the bundle's CRD ahead of OLM, which adopts it at install.
func applyBundleCRD(t *testing.T) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(env.bundle, "manifests", "apps.sidecarset.io_sidecarsets.yaml"))
	must(t, err)
	crd := &unstructured.Unstructured{}
	must(t, yaml.Unmarshal(raw, &crd.Object))
	must(t, k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(crd), client.FieldOwner("e2e-olm"), client.ForceOwnership))
	eventually(t, converge, "the SidecarSet CRD Established", func() (bool, string) {
		var list appsv1alpha1.SidecarSetList
		err := k8s.List(ctx, &list)
		return err == nil, fmt.Sprint(err)
	})
}

// injectedPod creates the pod the webhook would have made of an opted-in pod for set, on the
// kwok node.
func injectedPod(t *testing.T, set *appsv1alpha1.SidecarSet, ns, name string) *corev1.Pod {
	t.Helper()
	c, err := inject.Compile(set)
	must(t, err)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{"app": "gated", appsv1alpha1.InjectLabel: appsv1alpha1.InjectLabelValue}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1.0"}},
			Tolerations: kwokTolerations, NodeSelector: kwokNodeSelector, TerminationGracePeriodSeconds: ptr.To[int64](0)},
	}
	res, err := inject.Apply(inject.Input{Pod: pod, Sets: []*inject.CompiledSet{c}})
	must(t, err)
	injected := res.Pod()
	must(t, k8s.Create(ctx, injected))
	return injected
}

// startManager runs bin/manager-olm (built here) against the cluster as OLM runs it: its
// OperatorCondition named in OPERATOR_CONDITION_NAME and its namespace where operator-lib reads
// it, /var/run/secrets/kubernetes.io/serviceaccount/namespace, in a mount namespace of its own.
// The returned function stops it; so does the test's end.
func startManager(t *testing.T, conditionName string) func() {
	t.Helper()
	root := testutil.RepoRoot(t)
	dir := t.TempDir()
	manager := filepath.Join(dir, "manager")
	testutil.Run(t, "go", "build", "-C", root, "-o", manager, ".")
	certs := filepath.Join(dir, "certs")
	testutil.Run(t, filepath.Join(root, "hack", "run-certs.sh"), certs)
	logFile, err := os.Create(filepath.Join(env.stateDir, "logs", "upgradeable-manager.log"))
	must(t, err)
	const sa = "/var/run/secrets/kubernetes.io/serviceaccount"
	cmd := exec.Command("unshare", "--map-root-user", "--mount", "--propagation", "private", "sh", "-c",
		`mount -t tmpfs tmpfs /var/run && mkdir -p "$1" && printf %s "$2" > "$1/namespace" && shift 2 && exec "$@"`,
		"sh", sa, operatorNamespace, manager,
		"--kubeconfig="+os.Getenv("KUBECONFIG"), "--metrics-bind-address=0",
		"--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(freePort(t)),
		"--webhook-cert-path="+certs, "--webhook-host=127.0.0.1", "--webhook-port="+strconv.Itoa(freePort(t)))
	cmd.Env = append(os.Environ(), "POD_NAMESPACE="+operatorNamespace, "OPERATOR_CONDITION_NAME="+conditionName)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	must(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	stop := func() {
		select {
		case <-done:
			return
		default:
		}
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = logFile.Close()
	}
	t.Cleanup(stop)
	return stop
}

// freePort is a loopback port free at the time of the call.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}
