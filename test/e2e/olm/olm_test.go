//go:build e2e

package olm

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	appsv1alpha1 "github.com/sidecarset/sidecarset-operator/api/v1alpha1"
)

// The labels OLM puts on what it creates for a CSV (operator-lifecycle-manager's ownerutil and
// install packages).
const (
	ownerLabel          = "olm.owner"
	ownerNamespaceLabel = "olm.owner.namespace"
	webhookDescLabel    = "olm.webhook-description-generate-name"
)

// kwokTolerations and kwokNodeSelector put the operator's pods on the kwok node. They travel in
// the Subscription's spec.config, which OLM applies to the CSV's Deployments: the bundle stays
// what a real cluster gets.
var (
	kwokTolerations = []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpEqual,
		Value: "fake", Effect: corev1.TaintEffectNoSchedule}}
	kwokNodeSelector = map[string]string{"type": "kwok"}
)

// TestInstallAndUninstall subscribes to the package in the shipped catalog, checks what OLM
// made of the bundle, and uninstalls it.
func TestInstallAndUninstall(t *testing.T) {
	b := readBundle(t, env.bundle)
	// The shipped catalog must hold this bundle, or the test would install another.
	shipped, err := os.ReadFile(filepath.Join(env.catalog, b.pkg, "bundle.yaml"))
	must(t, err)
	if rendered := run(t, env.opm, "render", b.dir, "--output=yaml"); !bytes.Equal(bytes.TrimSpace(shipped), bytes.TrimSpace(rendered)) {
		t.Fatalf("%s differs from `opm render %s`: catalog/ is stale (make catalog)", filepath.Join(env.catalog, b.pkg, "bundle.yaml"), b.dir)
	}
	sub := subscribe(t, b, "")
	csv, took := waitInstalled(t, sub, b.csv.Name)
	t.Logf("InstallPlan Complete and CSV %s Succeeded %v after the Subscription", csv.Name, took)
	checkInstalled(t, csv, b)
	logRaces(t, b)
	uninstall(t, sub, csv)
}

// logRaces says when a fresh install's Deployment needed a second revision: OLM created it
// before it saw the Subscription's config (see createShared).
func logRaces(t *testing.T, b bundle) {
	t.Helper()
	for _, spec := range b.csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs {
		var dep appsv1.Deployment
		must(t, k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: spec.Name}, &dep))
		if rev := dep.Annotations["deployment.kubernetes.io/revision"]; rev != "1" {
			t.Logf("Deployment %s is at revision %s: OLM created it without the Subscription's config, then rolled "+
				"it out again with it (see createShared)", dep.Name, rev)
		}
	}
}

// bundle is what the tests read from a bundle directory.
type bundle struct {
	dir, pkg, channel string
	csv               operatorsv1alpha1.ClusterServiceVersion
}

// readBundle reads the package, default channel and CSV of a bundle directory.
func readBundle(t *testing.T, dir string) bundle {
	t.Helper()
	var annotations struct {
		Annotations map[string]string `json:"annotations"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "metadata", "annotations.yaml"))
	must(t, err)
	must(t, yaml.UnmarshalStrict(raw, &annotations))
	b := bundle{
		dir:     dir,
		pkg:     annotations.Annotations["operators.operatorframework.io.bundle.package.v1"],
		channel: annotations.Annotations["operators.operatorframework.io.bundle.channel.default.v1"],
	}
	csvs, err := filepath.Glob(filepath.Join(dir, "manifests", "*.clusterserviceversion.yaml"))
	must(t, err)
	if len(csvs) != 1 || b.pkg == "" || b.channel == "" {
		t.Fatalf("bundle %s: want one CSV, a package and a default channel; got CSVs %v, package %q, channel %q",
			dir, csvs, b.pkg, b.channel)
	}
	raw, err = os.ReadFile(csvs[0])
	must(t, err)
	must(t, yaml.Unmarshal(raw, &b.csv))
	return b
}

// subscribe subscribes to the bundle's package and channel in the CatalogSource, from
// startingCSV when it is set. Whatever the test leaves installed is removed afterwards.
func subscribe(t *testing.T, b bundle, startingCSV string) *operatorsv1alpha1.Subscription {
	t.Helper()
	sub := &operatorsv1alpha1.Subscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: subscriptionName},
		Spec: &operatorsv1alpha1.SubscriptionSpec{
			CatalogSource: catalogSourceName, CatalogSourceNamespace: olmNamespace,
			Package: b.pkg, Channel: b.channel, StartingCSV: startingCSV,
			InstallPlanApproval: operatorsv1alpha1.ApprovalAutomatic,
			Config:              &operatorsv1alpha1.SubscriptionConfig{Tolerations: kwokTolerations, NodeSelector: kwokNodeSelector},
		},
	}
	must(t, k8s.Create(ctx, sub))
	t.Cleanup(func() { removeLeftovers(t) })
	return sub
}

// removeLeftovers deletes the Subscription and every CSV in the operator's namespace, so a
// failed test does not leave an install behind for the next one.
func removeLeftovers(t *testing.T) {
	sub := &operatorsv1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: subscriptionName}}
	if err := k8s.Delete(ctx, sub); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting Subscription: %v", err)
	}
	if err := k8s.DeleteAllOf(ctx, &operatorsv1alpha1.ClusterServiceVersion{}, client.InNamespace(operatorNamespace)); err != nil {
		t.Errorf("deleting CSVs: %v", err)
	}
	eventually(t, converge, "no CSV, Deployment or pod left in "+operatorNamespace, func() (bool, string) {
		var (
			csvs operatorsv1alpha1.ClusterServiceVersionList
			deps appsv1.DeploymentList
			pods corev1.PodList
		)
		for _, list := range []client.ObjectList{&csvs, &deps, &pods} {
			if err := k8s.List(ctx, list, client.InNamespace(operatorNamespace)); err != nil {
				return false, err.Error()
			}
		}
		if len(csvs.Items) > 0 { // again: see uninstall
			if err := k8s.DeleteAllOf(ctx, &operatorsv1alpha1.ClusterServiceVersion{}, client.InNamespace(operatorNamespace)); err != nil {
				return false, err.Error()
			}
		}
		return len(csvs.Items)+len(deps.Items)+len(pods.Items) == 0,
			fmt.Sprintf("%d CSVs, %d Deployments, %d pods", len(csvs.Items), len(deps.Items), len(pods.Items))
	})
}

// waitInstalled waits until the Subscription's InstallPlan that installs csvName is Complete
// and that CSV Succeeded, and returns the CSV and how long that took. A failed InstallPlan or
// CSV fails at once, with OLM's reason.
func waitInstalled(t *testing.T, sub *operatorsv1alpha1.Subscription, csvName string) (*operatorsv1alpha1.ClusterServiceVersion, time.Duration) {
	t.Helper()
	planTook := eventually(t, converge, "an InstallPlan for "+csvName+" to complete", func() (bool, string) {
		var got operatorsv1alpha1.Subscription
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(sub), &got); err != nil {
			return false, err.Error()
		}
		if got.Status.InstallPlanRef == nil {
			return false, fmt.Sprintf("Subscription state %q, no InstallPlan yet; conditions %+v", got.Status.State, got.Status.Conditions)
		}
		var plan operatorsv1alpha1.InstallPlan
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: got.Status.InstallPlanRef.Name}, &plan); err != nil {
			return false, err.Error()
		}
		if !slices.Contains(plan.Spec.ClusterServiceVersionNames, csvName) {
			return false, fmt.Sprintf("InstallPlan %s installs %v", plan.Name, plan.Spec.ClusterServiceVersionNames)
		}
		if plan.Status.Phase == operatorsv1alpha1.InstallPlanPhaseFailed {
			t.Fatalf("InstallPlan %s failed: %+v", plan.Name, plan.Status.Conditions)
		}
		return plan.Status.Phase == operatorsv1alpha1.InstallPlanPhaseComplete, fmt.Sprintf("InstallPlan %s phase %q", plan.Name, plan.Status.Phase)
	})
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	csvTook := eventually(t, converge, "CSV "+csvName+" to succeed", func() (bool, string) {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: csvName}, csv); err != nil {
			return false, err.Error()
		}
		if csv.Status.Phase == operatorsv1alpha1.CSVPhaseFailed {
			t.Fatalf("CSV %s failed: %s: %s", csvName, csv.Status.Reason, csv.Status.Message)
		}
		if csv.Status.Phase == operatorsv1alpha1.CSVPhaseSucceeded {
			return true, ""
		}
		return false, fmt.Sprintf("phase %q reason %q: %s\n%s", csv.Status.Phase, csv.Status.Reason, csv.Status.Message, workloads())
	})
	return csv, planTook + csvTook
}

// checkInstalled asserts what OLM made of the bundle's CSV, installed as csv: the CRDs, the
// Deployments (on the kwok node through the Subscription's config, all replicas available),
// the manager's ClusterRole and both webhook configurations.
func checkInstalled(t *testing.T, csv *operatorsv1alpha1.ClusterServiceVersion, b bundle) {
	t.Helper()
	want := b.csv.Spec
	for _, owned := range want.CustomResourceDefinitions.Owned {
		var crd apiextensionsv1.CustomResourceDefinition
		must(t, k8s.Get(ctx, client.ObjectKey{Name: owned.Name}, &crd))
		if !crdEstablished(&crd) {
			t.Errorf("CRD %s is not Established", crd.Name)
		}
	}
	for _, spec := range want.InstallStrategy.StrategySpec.DeploymentSpecs {
		checkDeployment(t, spec)
	}
	for _, perm := range want.InstallStrategy.StrategySpec.ClusterPermissions {
		checkClusterRole(t, csv, perm)
	}
	for _, desc := range want.WebhookDefinitions {
		checkWebhook(t, csv, desc)
	}
}

// workloads summarises the Deployments, ReplicaSets and pods in the operator's namespace, for
// the message of a wait that times out.
func workloads() string {
	var (
		deps appsv1.DeploymentList
		rss  appsv1.ReplicaSetList
		pods corev1.PodList
		b    strings.Builder
	)
	for _, list := range []client.ObjectList{&deps, &rss, &pods} {
		if err := k8s.List(ctx, list, client.InNamespace(operatorNamespace)); err != nil {
			return err.Error()
		}
	}
	for _, d := range deps.Items {
		fmt.Fprintf(&b, "  Deployment %s: %d replicas, %d updated, %d available; tolerations %+v, nodeSelector %v; conditions %+v\n",
			d.Name, d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.AvailableReplicas,
			d.Spec.Template.Spec.Tolerations, d.Spec.Template.Spec.NodeSelector, d.Status.Conditions)
	}
	for _, rs := range rss.Items {
		fmt.Fprintf(&b, "  ReplicaSet %s: %d/%d ready\n", rs.Name, rs.Status.ReadyReplicas, ptrValue(rs.Spec.Replicas, 1))
	}
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "  Pod %s: %s on %q, deleting %v; conditions %+v\n", p.Name, p.Status.Phase, p.Spec.NodeName,
			p.DeletionTimestamp != nil, p.Status.Conditions)
	}
	return b.String()
}

func crdEstablished(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

func checkDeployment(t *testing.T, spec operatorsv1alpha1.StrategyDeploymentSpec) {
	t.Helper()
	var dep appsv1.Deployment
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: spec.Name}, &dep))
	pod := dep.Spec.Template.Spec
	if !slices.Contains(pod.Tolerations, kwokTolerations[0]) || pod.NodeSelector["type"] != "kwok" {
		t.Errorf("Deployment %s: the Subscription's config did not reach the pods: tolerations %+v, nodeSelector %v",
			dep.Name, pod.Tolerations, pod.NodeSelector)
	}
	if want := ptrValue(spec.Spec.Replicas, 1); dep.Status.AvailableReplicas != want {
		t.Errorf("Deployment %s: %d of %d replicas available", dep.Name, dep.Status.AvailableReplicas, want)
	}
	if got, want := pod.Containers[0].Image, spec.Spec.Template.Spec.Containers[0].Image; got != want {
		t.Errorf("Deployment %s runs %s; the bundle says %s", dep.Name, got, want)
	}
	// Every pod of the current revision runs on the tainted kwok node, which it reaches only
	// through the Subscription's tolerations.
	sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
	must(t, err)
	var pods corev1.PodList
	must(t, k8s.List(ctx, &pods, client.InNamespace(operatorNamespace), client.MatchingLabelsSelector{Selector: sel}))
	for _, p := range pods.Items {
		var node corev1.Node
		must(t, k8s.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, &node))
		tolerated := func(taint corev1.Taint) bool {
			tol := kwokTolerations[0]
			return taint.Key == tol.Key && taint.Value == tol.Value && taint.Effect == tol.Effect
		}
		if p.DeletionTimestamp == nil && !slices.ContainsFunc(node.Spec.Taints, tolerated) {
			t.Errorf("pod %s runs on %q, which lacks the taint %s", p.Name, p.Spec.NodeName, kwokTolerations[0].Key)
		}
	}
}

func ptrValue(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

// checkClusterRole: OLM names the ClusterRole of a clusterPermissions entry itself; it is the
// one owned by the CSV with exactly those rules, bound to the entry's ServiceAccount.
func checkClusterRole(t *testing.T, csv *operatorsv1alpha1.ClusterServiceVersion, perm operatorsv1alpha1.StrategyDeploymentPermissions) {
	t.Helper()
	var roles rbacv1.ClusterRoleList
	must(t, k8s.List(ctx, &roles, ownedBy(csv)))
	i := slices.IndexFunc(roles.Items, func(r rbacv1.ClusterRole) bool { return apiequality.Semantic.DeepEqual(r.Rules, perm.Rules) })
	if i < 0 {
		t.Fatalf("no ClusterRole owned by %s has the rules of the bundle's clusterPermissions for %s (it owns %d ClusterRoles)",
			csv.Name, perm.ServiceAccountName, len(roles.Items))
	}
	role := roles.Items[i]
	var bindings rbacv1.ClusterRoleBindingList
	must(t, k8s.List(ctx, &bindings, ownedBy(csv)))
	sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: perm.ServiceAccountName, Namespace: operatorNamespace}
	if !slices.ContainsFunc(bindings.Items, func(b rbacv1.ClusterRoleBinding) bool {
		return b.RoleRef.Name == role.Name && slices.Contains(b.Subjects, sa)
	}) {
		t.Errorf("ClusterRole %s is not bound to ServiceAccount %s/%s", role.Name, sa.Namespace, sa.Name)
	}
	t.Logf("manager ClusterRole: %s (%d rules), bound to %s", role.Name, len(role.Rules), sa.Name)
}

func ownedBy(csv *operatorsv1alpha1.ClusterServiceVersion) client.MatchingLabels {
	return client.MatchingLabels{ownerLabel: csv.Name, ownerNamespaceLabel: csv.Namespace}
}

// checkWebhook finds the configuration OLM generated for one webhookdefinition (named
// <generateName>-<random>) and compares it with the definition.
func checkWebhook(t *testing.T, csv *operatorsv1alpha1.ClusterServiceVersion, desc operatorsv1alpha1.WebhookDescription) {
	t.Helper()
	sel := ownedBy(csv)
	sel[webhookDescLabel] = desc.GenerateName
	var (
		names             []string
		objectSelector    *metav1.LabelSelector
		namespaceSelector *metav1.LabelSelector
		clientConfig      admissionregistrationv1.WebhookClientConfig
		generatedName     string
		kind              string
	)
	switch desc.Type {
	case operatorsv1alpha1.MutatingAdmissionWebhook:
		var list admissionregistrationv1.MutatingWebhookConfigurationList
		must(t, k8s.List(ctx, &list, sel))
		for _, c := range list.Items {
			names = append(names, c.Name)
			generatedName, objectSelector, namespaceSelector, clientConfig = c.Webhooks[0].Name, c.Webhooks[0].ObjectSelector,
				c.Webhooks[0].NamespaceSelector, c.Webhooks[0].ClientConfig
		}
		kind = "MutatingWebhookConfiguration"
	case operatorsv1alpha1.ValidatingAdmissionWebhook:
		var list admissionregistrationv1.ValidatingWebhookConfigurationList
		must(t, k8s.List(ctx, &list, sel))
		for _, c := range list.Items {
			names = append(names, c.Name)
			generatedName, objectSelector, namespaceSelector, clientConfig = c.Webhooks[0].Name, c.Webhooks[0].ObjectSelector,
				c.Webhooks[0].NamespaceSelector, c.Webhooks[0].ClientConfig
		}
		kind = "ValidatingWebhookConfiguration"
	default:
		t.Fatalf("webhookdefinition %s has type %s, which this test does not know", desc.GenerateName, desc.Type)
	}
	if len(names) != 1 || !strings.HasPrefix(names[0], desc.GenerateName+"-") || generatedName != desc.GenerateName {
		t.Fatalf("want one %s named %s-<suffix> for webhookdefinition %s, got %v", kind, desc.GenerateName, desc.GenerateName, names)
	}
	if !apiequality.Semantic.DeepEqual(objectSelector, desc.ObjectSelector) && (desc.ObjectSelector != nil || !isEmpty(objectSelector)) {
		t.Errorf("%s: objectSelector %+v; the bundle's webhookdefinition has %+v", names[0], objectSelector, desc.ObjectSelector)
	}
	svc := clientConfig.Service
	if svc == nil || svc.Name != desc.DeploymentName+"-service" || svc.Namespace != operatorNamespace ||
		svc.Path == nil || *svc.Path != ptrString(desc.WebhookPath) || len(clientConfig.CABundle) == 0 {
		t.Errorf("%s: clientConfig %+v (caBundle %d bytes) does not call %s-service at %s with OLM's CA",
			names[0], svc, len(clientConfig.CABundle), desc.DeploymentName, ptrString(desc.WebhookPath))
	}
	// OLM sets every webhook's namespaceSelector to its OperatorGroup's: none for AllNamespaces,
	// which the API server stores as {}, every namespace. (A webhookdefinition cannot carry a
	// namespaceSelector.) The injector therefore honours the namespace opt-out itself.
	if !isEmpty(namespaceSelector) {
		t.Errorf("%s: namespaceSelector %+v; OLM gives an AllNamespaces OperatorGroup's webhooks {}", names[0], namespaceSelector)
	}
	t.Logf("%s %s: objectSelector %s, namespaceSelector %s, service %s/%s:%d%s",
		kind, names[0], toJSON(objectSelector), toJSON(namespaceSelector), svc.Namespace, svc.Name, ptrValue(svc.Port, 443), *svc.Path)
	if desc.Type == operatorsv1alpha1.MutatingAdmissionWebhook &&
		(objectSelector == nil || objectSelector.MatchLabels[appsv1alpha1.InjectLabel] != appsv1alpha1.InjectLabelValue) {
		t.Errorf("%s: the pod webhook lost its objectSelector %s=%s: %+v", names[0], appsv1alpha1.InjectLabel, appsv1alpha1.InjectLabelValue, objectSelector)
	}
}

// isEmpty: the selector selects everything.
func isEmpty(sel *metav1.LabelSelector) bool {
	return sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0)
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func toJSON(v any) string {
	raw, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return string(raw)
	}
	return string(js)
}

// uninstall removes the operator the way OLM documents it: delete the Subscription, then the
// CSV. OLM and the garbage collector remove what the CSV owns; the CRD stays by design (deleting
// it would delete every SidecarSet). What else stays is logged.
func uninstall(t *testing.T, sub *operatorsv1alpha1.Subscription, csv *operatorsv1alpha1.ClusterServiceVersion) {
	t.Helper()
	start := time.Now()
	must(t, k8s.Delete(ctx, sub))
	// The CSV goes only once the Subscription and its InstallPlans have: deleted earlier, the
	// catalog operator, still holding the Subscription, may install it again.
	eventually(t, converge, "the Subscription and its InstallPlans to go", func() (bool, string) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(sub), &operatorsv1alpha1.Subscription{})
		if !apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("Subscription: %v", err)
		}
		names, err := listNames(&operatorsv1alpha1.InstallPlanList{}, client.InNamespace(operatorNamespace))
		if err != nil {
			return false, err.Error()
		}
		return len(names) == 0, strings.Join(names, ", ")
	})
	// Creation times have a resolution of one second.
	deleted := metav1.NewTime(time.Now().Truncate(time.Second))
	must(t, k8s.Delete(ctx, csv))
	recreated := 0
	var late []string
	eventually(t, converge, "the CSV's Deployments, pods, webhook configurations, RBAC and other owned objects to go", func() (bool, string) {
		var left []string
		var csvs operatorsv1alpha1.ClusterServiceVersionList
		if err := k8s.List(ctx, &csvs, client.MatchingFields{"metadata.name": csv.Name}); err != nil {
			return false, err.Error()
		}
		for _, c := range csvs.Items {
			left = append(left, "ClusterServiceVersion "+c.Namespace+"/"+c.Name)
			// The catalog operator can still be executing an InstallPlan it has not yet seen
			// Complete, from its cache, after the plan is gone: it creates the CSV again.
			// Delete that one too, as an administrator would.
			if c.Namespace == csv.Namespace && c.UID != csv.UID && c.DeletionTimestamp == nil {
				if err := k8s.Delete(ctx, &c); err != nil && !apierrors.IsNotFound(err) {
					return false, err.Error()
				}
				recreated++
			}
		}
		if len(csvs.Items) == 0 {
			// The CSV is gone, so OLM's finalizer has deleted every cluster-wide object
			// labelled as its own. One the catalog operator made after the deletion, executing
			// the InstallPlan from its cache (with or without creating the CSV again), outlives
			// it: OLM never deletes it. Delete those, as docs/operations.md tells an
			// administrator to; one made before the deletion that is still here is OLM's
			// failure, and fails the wait.
			names, err := deleteOwnedSince(csv, deleted)
			if err != nil {
				return false, err.Error()
			}
			late = append(late, names...)
		}
		for _, spec := range csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs {
			err := k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: spec.Name}, &appsv1.Deployment{})
			if !apierrors.IsNotFound(err) {
				left = append(left, fmt.Sprintf("Deployment %s (%v)", spec.Name, err))
			}
		}
		for _, list := range []client.ObjectList{&admissionregistrationv1.MutatingWebhookConfigurationList{},
			&admissionregistrationv1.ValidatingWebhookConfigurationList{}, &rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{}} {
			names, err := listNames(list, ownedBy(csv))
			if err != nil {
				return false, err.Error()
			}
			left = append(left, names...)
		}
		names, err := ownedInNamespace(csv)
		if err != nil {
			return false, err.Error()
		}
		left = append(left, names...)
		// The pods too: a later install creates ReplicaSets of the same names.
		var pods corev1.PodList
		if err := k8s.List(ctx, &pods, client.InNamespace(operatorNamespace)); err != nil {
			return false, err.Error()
		}
		for _, p := range pods.Items {
			left = append(left, "Pod "+p.Name)
		}
		return len(left) == 0, strings.Join(left, ", ")
	})
	t.Logf("uninstalled %s in %v", csv.Name, time.Since(start))
	if recreated > 0 {
		t.Logf("OLM's catalog operator created %s again %d time(s) after the Subscription and its InstallPlans were gone, "+
			"from an InstallPlan it was still executing; deleted again", csv.Name, recreated)
	}
	if len(late) > 0 {
		t.Logf("OLM's catalog operator created %s after %s was deleted, labelled as its own; OLM never deletes those, so the test did",
			strings.Join(late, ", "), csv.Name)
	}
	for _, owned := range csv.Spec.CustomResourceDefinitions.Owned {
		must(t, k8s.Get(ctx, client.ObjectKey{Name: owned.Name}, &apiextensionsv1.CustomResourceDefinition{}))
	}
	logLeftovers(t)
}

// deleteOwnedSince deletes the cluster-wide objects labelled as the CSV's that were created at
// or after since, and names them.
func deleteOwnedSince(csv *operatorsv1alpha1.ClusterServiceVersion, since metav1.Time) ([]string, error) {
	var deleted []string
	for _, list := range []client.ObjectList{&admissionregistrationv1.MutatingWebhookConfigurationList{},
		&admissionregistrationv1.ValidatingWebhookConfigurationList{}, &rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{}} {
		if err := k8s.List(ctx, list, ownedBy(csv)); err != nil {
			return nil, err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, err
		}
		for _, item := range items {
			obj := item.(client.Object)
			if created := obj.GetCreationTimestamp(); created.Before(&since) || obj.GetDeletionTimestamp() != nil {
				continue
			}
			if err := k8s.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				return nil, err
			}
			kind := strings.TrimSuffix(fmt.Sprintf("%T", list), "List")
			deleted = append(deleted, kind[strings.LastIndex(kind, ".")+1:]+" "+obj.GetName())
		}
	}
	return deleted, nil
}

// namespacedKinds are what OLM creates in the operator's namespace for a CSV besides its
// Deployments, owned through ownerReferences, which the garbage collector follows.
var namespacedKinds = []func() client.ObjectList{
	func() client.ObjectList { return &corev1.ServiceList{} },
	func() client.ObjectList { return &corev1.ServiceAccountList{} },
	func() client.ObjectList { return &corev1.SecretList{} },
	func() client.ObjectList { return &corev1.ConfigMapList{} },
	func() client.ObjectList { return &rbacv1.RoleList{} },
	func() client.ObjectList { return &rbacv1.RoleBindingList{} },
	func() client.ObjectList { return &policyv1.PodDisruptionBudgetList{} },
	func() client.ObjectList { return &operatorsv1alpha1.InstallPlanList{} },
}

// ownedInNamespace names the objects in the operator's namespace that the CSV owns.
func ownedInNamespace(csv *operatorsv1alpha1.ClusterServiceVersion) ([]string, error) {
	var owned []string
	for _, newList := range namespacedKinds {
		list := newList()
		if err := k8s.List(ctx, list, client.InNamespace(operatorNamespace)); err != nil {
			return nil, err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, err
		}
		for _, item := range items {
			obj, err := meta.Accessor(item)
			if err != nil {
				return nil, err
			}
			if slices.ContainsFunc(obj.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return r.UID == csv.UID }) {
				owned = append(owned, fmt.Sprintf("%T %s", item, obj.GetName()))
			}
		}
	}
	return owned, nil
}

// listNames lists objects and returns "Kind name" for each.
func listNames(list client.ObjectList, opts ...client.ListOption) ([]string, error) {
	if err := k8s.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	kind := strings.TrimSuffix(fmt.Sprintf("%T", list), "List")
	kind = kind[strings.LastIndex(kind, ".")+1:]
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, item := range items {
		obj, err := meta.Accessor(item)
		if err != nil {
			return nil, err
		}
		name := obj.GetName()
		if obj.GetNamespace() != "" {
			name = obj.GetNamespace() + "/" + name
		}
		names = append(names, kind+" "+name)
	}
	return names, nil
}

// logLeftovers logs what an uninstall leaves in the operator's namespace and cluster-wide,
// besides what the test itself created (namespace, OperatorGroup, CatalogSource).
func logLeftovers(t *testing.T) {
	t.Helper()
	var left []string
	for _, newList := range namespacedKinds {
		names, err := listNames(newList(), client.InNamespace(operatorNamespace))
		must(t, err)
		for _, n := range names {
			// What every namespace has.
			if n != "ServiceAccount "+operatorNamespace+"/default" && n != "ConfigMap "+operatorNamespace+"/kube-root-ca.crt" {
				left = append(left, n)
			}
		}
	}
	for _, list := range []client.ObjectList{&rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{},
		&admissionregistrationv1.MutatingWebhookConfigurationList{}, &admissionregistrationv1.ValidatingWebhookConfigurationList{},
		&apiextensionsv1.CustomResourceDefinitionList{}, &operatorsv1.OperatorList{}} {
		names, err := listNames(list)
		must(t, err)
		for _, n := range names {
			if strings.Contains(n, "sidecarset") {
				left = append(left, n)
			}
		}
	}
	t.Logf("left after the uninstall (besides the namespace, OperatorGroup and CatalogSource):\n  %s", strings.Join(left, "\n  "))
}
