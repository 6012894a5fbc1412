//go:build e2e

package e2e

// The `make deploy` path, for clusters that run cert-manager. cert-manager's controllers are
// not on the Go module proxy, so this is what can be checked without them: with cert-manager's
// real CRDs installed, the API server accepts every object `kustomize build config/default`
// renders (server-side apply, dry run), and the Certificate, its Issuer, the webhook Service,
// the webhook configurations and the Deployment are wired to each other.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	certmanagerv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sidecarset/sidecarset-operator/test/testutil"
)

// deployFieldOwner owns the fields of the dry-run applies and of the cert-manager CRDs.
const deployFieldOwner = "sidecarset-e2e-deploy"

const certManagerModule = "github.com/cert-manager/cert-manager"

func TestDeployManifests(t *testing.T) {
	installCertManagerCRDs(t)
	objs := renderDefault(t)
	ensureNamespaces(t, objs)

	t.Run("every object passes a server-side dry-run apply", func(t *testing.T) {
		var renamed []string
		for _, obj := range objs {
			target := dryRunTarget(t, obj)
			if target.GetName() != obj.GetName() {
				renamed = append(renamed, obj.GetKind()+" "+obj.GetName())
			}
			if err := applyDryRun(target); err != nil {
				t.Errorf("%s %s: %v", obj.GetKind(), client.ObjectKeyFromObject(target), err)
			}
		}
		if !t.Failed() {
			t.Logf("the API server accepted all %d objects of config/default (these under <name>%s, since they exist: %v)",
				len(objs), dryRunSuffix, renamed)
		}
	})

	// dist/install.yaml is config/default with the image set: the objects the dry run accepted.
	t.Run("make build-installer writes config/default with the image", func(t *testing.T) {
		const img = "registry.example/sidecarset-operator:e2e"
		cmd := exec.Command("make", "build-installer", "IMG="+img)
		cmd.Dir = repoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make build-installer: %v\n%s", err, out)
		}
		raw, err := os.ReadFile(filepath.Join(repoRoot(t), "dist", "install.yaml"))
		must(t, err)
		install := decodeYAML(t, raw)
		want := make([]*unstructured.Unstructured, len(objs))
		for i, obj := range objs {
			want[i] = obj.DeepCopy()
		}
		dep := findRendered(t, want, "Deployment")
		containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
		containers[0].(map[string]any)["image"] = img
		must(t, unstructured.SetNestedSlice(dep.Object, containers, "spec", "template", "spec", "containers"))
		if len(install) != len(want) {
			t.Fatalf("dist/install.yaml has %d objects, config/default renders %d", len(install), len(want))
		}
		for i := range want {
			if !equality.Semantic.DeepEqual(install[i].Object, want[i].Object) {
				t.Errorf("dist/install.yaml object %d (%s %s) differs from config/default with the image %s", i, install[i].GetKind(), install[i].GetName(), img)
			}
		}
	})

	// The dry run must be able to fail: broken copies of rendered objects are refused.
	t.Run("broken objects are refused", func(t *testing.T) {
		cert := renderedOfKind(objs, "Certificate")[0].DeepCopy()
		unstructured.RemoveNestedField(cert.Object, "spec", "secretName")
		if err := applyDryRun(cert); !apierrors.IsInvalid(err) {
			t.Errorf("a Certificate without spec.secretName: want Invalid from cert-manager's CRD schema, got %v", err)
		}
		dep := findRendered(t, objs, "Deployment").DeepCopy()
		containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
		containers[0].(map[string]any)["imagePullPolicy"] = "Sometimes"
		must(t, unstructured.SetNestedSlice(dep.Object, containers, "spec", "template", "spec", "containers"))
		if err := applyDryRun(dep); !apierrors.IsInvalid(err) {
			t.Errorf("a Deployment with imagePullPolicy Sometimes: want Invalid, got %v", err)
		}
	})

	t.Run("certificate wiring", func(t *testing.T) { checkCertificateWiring(t, objs) })
	t.Run("the Helm chart renders config/default and takes its values", helmChart)
}

// dryRunSuffix names the copies dryRunTarget makes.
const dryRunSuffix = "-e2e-dry-run"

// dryRunTarget returns what to dry-run for obj. An object that already exists in the cluster
// would be merged with the fields other managers own there: hack/demo.sh install applies the
// webhook configurations with clientConfig.url, to which config/default's service would be
// added, and the API server rightly refuses both. Such an object is dry-run under a name of its
// own, so that the API server judges it as config/default renders it, as on a cluster that
// `make deploy` installs first. A CRD keeps its name (it must be <plural>.<group>); hack/demo.sh
// applies the same one.
func dryRunTarget(t *testing.T, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	if obj.GetKind() == "CustomResourceDefinition" {
		return obj
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(obj.GroupVersionKind())
	err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), live)
	if apierrors.IsNotFound(err) {
		return obj
	}
	must(t, err)
	target := obj.DeepCopy()
	target.SetName(obj.GetName() + dryRunSuffix)
	return target
}

// applyDryRun sends obj as a server-side apply in dry-run mode, taking over fields that
// hack/demo.sh install applied to the same objects.
func applyDryRun(obj *unstructured.Unstructured) error {
	return k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj.DeepCopy()),
		client.DryRunAll, client.ForceOwnership, client.FieldOwner(deployFieldOwner))
}

// repoRoot is the module root, two levels above this package.
var repoRoot = testutil.RepoRoot

// renderDefault runs `bin/kustomize build config/default`, which is what `make deploy` applies.
func renderDefault(t *testing.T) []*unstructured.Unstructured { return render(t, "default") }

// render runs `bin/kustomize build config/<dir>`.
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	root := repoRoot(t)
	kustomize := filepath.Join(root, "bin", "kustomize")
	cmd := exec.Command(kustomize, "build", filepath.Join("config", dir))
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s build config/%s (make kustomize builds it): %v\n%s", kustomize, dir, err, stderr.String())
	}
	objs := decodeYAML(t, out)
	if len(objs) == 0 {
		t.Fatalf("kustomize build config/%s rendered no objects", dir)
	}
	return objs
}

func decodeYAML(t *testing.T, raw []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return objs
		}
		must(t, err)
		if len(m) > 0 {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
}

// installCertManagerCRDs applies cert-manager's CRDs from its Go module (the version in
// go.mod) for real and waits until they are Established. Those that did not exist before are
// deleted afterwards.
func installCertManagerCRDs(t *testing.T) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", certManagerModule).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", certManagerModule, err)
	}
	files, err := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "deploy", "crds", "*.yaml"))
	must(t, err)
	var crds []*unstructured.Unstructured
	for _, f := range files {
		raw, err := os.ReadFile(f)
		must(t, err)
		for _, obj := range decodeYAML(t, raw) {
			if obj.GetKind() == "CustomResourceDefinition" {
				crds = append(crds, obj)
			}
		}
	}
	if len(crds) < 2 {
		t.Fatalf("found %d CRDs in %v; want at least Certificate and Issuer", len(crds), files)
	}
	for _, crd := range crds {
		// An earlier test's cleanup may still be deleting it: applying now would be lost.
		var err error
		eventually(t, converge, crd.GetName()+" not to be terminating", func() (bool, string) {
			var live *apiextensionsv1.CustomResourceDefinition
			live, err = getCRD(client.ObjectKeyFromObject(crd))
			return err != nil || live.DeletionTimestamp == nil, "terminating"
		})
		if apierrors.IsNotFound(err) {
			t.Cleanup(func() { deleteIgnoreNotFound(t, crd) })
		} else {
			must(t, err)
		}
		must(t, k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(crd.DeepCopy()),
			client.ForceOwnership, client.FieldOwner(deployFieldOwner)))
	}
	took := eventually(t, 60*time.Second, "cert-manager's CRDs Established", func() (bool, string) {
		for _, crd := range crds {
			got, err := getCRD(client.ObjectKeyFromObject(crd))
			if err != nil {
				return false, err.Error()
			}
			if !crdEstablished(got) {
				return false, got.Name + " not Established"
			}
		}
		return true, ""
	})
	t.Logf("installed %d cert-manager CRDs; Established in %v", len(crds), took)
}

// getCRD reads a CRD through the suite's client, whose scheme knows only the operator's types:
// as unstructured, converted.
func getCRD(key client.ObjectKey) (*apiextensionsv1.CustomResourceDefinition, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	if err := k8s.Get(ctx, key, u); err != nil {
		return nil, err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &crd); err != nil {
		return nil, err
	}
	return &crd, nil
}

func crdEstablished(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

// ensureNamespaces creates the rendered Namespaces that do not exist yet, for real: a dry run
// of a namespaced object in a namespace that does not exist fails. (hack/demo.sh install
// already created sidecarset-system.)
func ensureNamespaces(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, obj := range objs {
		if obj.GetKind() != "Namespace" {
			continue
		}
		err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			ns := obj.DeepCopy()
			must(t, k8s.Create(ctx, ns))
			t.Cleanup(func() { deleteIgnoreNotFound(t, ns) })
			continue
		}
		must(t, err)
	}
}

func findRendered(t *testing.T, objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	found := renderedOfKind(objs, kind)
	if len(found) != 1 {
		t.Fatalf("config/default renders %d objects of kind %s; want exactly one", len(found), kind)
	}
	return found[0]
}

// renderedOfKind is every rendered object of kind.
func renderedOfKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var found []*unstructured.Unstructured
	for _, obj := range objs {
		if obj.GetKind() == kind {
			found = append(found, obj)
		}
	}
	return found
}

// findNamed is the rendered object of kind in namespace named name.
func findNamed(t *testing.T, objs []*unstructured.Unstructured, kind, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	for _, obj := range renderedOfKind(objs, kind) {
		if obj.GetNamespace() == namespace && obj.GetName() == name {
			return obj
		}
	}
	t.Fatalf("config/default renders no %s %s/%s", kind, namespace, name)
	return nil
}

// decodeStrict converts a rendered object into its Go type, failing on unknown fields.
func decodeStrict(t *testing.T, obj *unstructured.Unstructured, into runtime.Object) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, into, true); err != nil {
		t.Fatalf("decoding %s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
}

// checkCertificateWiring follows every reference between the cert-manager objects and the
// operator's: the names are derived from the rendered objects, not hard-coded, so a rename in
// one place that misses another fails here. The chain: the webhook configurations take their
// caBundle from the serving Certificate, which a CA Issuer signs with the CA Certificate's
// Secret, which a self-signed Issuer signs, so that renewing the serving certificate leaves the
// caBundle as it is.
func checkCertificateWiring(t *testing.T, objs []*unstructured.Unstructured) {
	var (
		cert, caCert     certmanagerv1.Certificate
		caIssuer, issuer certmanagerv1.Issuer
		dep              appsv1.Deployment
		mutating         admissionregistrationv1.MutatingWebhookConfiguration
		validate         admissionregistrationv1.ValidatingWebhookConfiguration
	)
	decodeStrict(t, findRendered(t, objs, "Deployment"), &dep)
	decodeStrict(t, findRendered(t, objs, "MutatingWebhookConfiguration"), &mutating)
	decodeStrict(t, findRendered(t, objs, "ValidatingWebhookConfiguration"), &validate)
	injectFrom := mutating.Annotations["cert-manager.io/inject-ca-from"]
	certNamespace, certName, _ := strings.Cut(injectFrom, "/")
	decodeStrict(t, findNamed(t, objs, "Certificate", certNamespace, certName), &cert)
	issuerRef := func(c *certmanagerv1.Certificate, into *certmanagerv1.Issuer) {
		ref := c.Spec.IssuerRef
		if (ref.Kind != "" && ref.Kind != "Issuer") || (ref.Group != "" && ref.Group != "cert-manager.io") {
			t.Fatalf("Certificate %s refers to issuer %+v; want an Issuer of its namespace", c.Name, ref)
		}
		decodeStrict(t, findNamed(t, objs, "Issuer", c.Namespace, ref.Name), into)
	}
	issuerRef(&cert, &caIssuer)
	if caIssuer.Spec.CA == nil {
		t.Fatalf("the serving Certificate's Issuer %s is not a CA Issuer (%+v): each renewal would change the caBundle", caIssuer.Name, caIssuer.Spec)
	}
	var caFound bool
	for _, obj := range renderedOfKind(objs, "Certificate") {
		var c certmanagerv1.Certificate
		decodeStrict(t, obj, &c)
		if c.Namespace == caIssuer.Namespace && c.Spec.SecretName == caIssuer.Spec.CA.SecretName {
			caCert, caFound = c, true
		}
	}
	if !caFound || !caCert.Spec.IsCA {
		t.Fatalf("the CA Issuer %s signs with Secret %s, which no CA Certificate writes (found %v, isCA %v)",
			caIssuer.Name, caIssuer.Spec.CA.SecretName, caFound, caCert.Spec.IsCA)
	}
	issuerRef(&caCert, &issuer)
	if issuer.Spec.SelfSigned == nil {
		t.Errorf("the CA Certificate %s is signed by %s, which is not self-signed: %+v", caCert.Name, issuer.Name, issuer.Spec)
	}

	if dep.Namespace != cert.Namespace {
		t.Errorf("Deployment in %s, Certificate (and its Secret) in %s", dep.Namespace, cert.Namespace)
	}
	if got := mountedCertSecret(t, &dep); got != cert.Spec.SecretName {
		t.Errorf("the manager reads its serving certificate from Secret %q; the Certificate writes %q", got, cert.Spec.SecretName)
	}

	svc := webhookService(t, objs, &mutating, &validate)
	checkServiceReachesWebhookPort(t, svc, &dep)
	want := []string{
		fmt.Sprintf("%s.%s.svc", svc.Name, svc.Namespace),
		fmt.Sprintf("%s.%s.svc.cluster.local", svc.Name, svc.Namespace),
	}
	if got := slices.Sorted(slices.Values(cert.Spec.DNSNames)); !slices.Equal(got, want) {
		t.Errorf("Certificate dnsNames = %v; the webhook Service %s/%s needs %v", cert.Spec.DNSNames, svc.Namespace, svc.Name, want)
	}

	for _, m := range []metav1.Object{&mutating, &validate} {
		if got := m.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != injectFrom {
			t.Errorf("%s: cert-manager.io/inject-ca-from = %q, want %q", m.GetName(), got, injectFrom)
		}
	}
}

// mountedCertSecret follows the manager's --webhook-cert-path to its volume mount and the
// Secret behind it.
func mountedCertSecret(t *testing.T, dep *appsv1.Deployment) string {
	t.Helper()
	pod := dep.Spec.Template.Spec
	i := slices.IndexFunc(pod.Containers, func(c corev1.Container) bool { return c.Name == "manager" })
	if i < 0 {
		t.Fatalf("Deployment %s has no container named manager", dep.Name)
	}
	manager := pod.Containers[i]
	var certPath string
	for _, arg := range manager.Args {
		if p, ok := strings.CutPrefix(arg, "--webhook-cert-path="); ok {
			certPath = p
		}
	}
	if certPath == "" {
		t.Fatalf("the manager's args %v set no --webhook-cert-path", manager.Args)
	}
	var volume string
	for _, m := range manager.VolumeMounts {
		if m.MountPath == certPath {
			volume = m.Name
		}
	}
	for _, v := range pod.Volumes {
		if v.Name == volume && v.Secret != nil {
			return v.Secret.SecretName
		}
	}
	t.Fatalf("nothing mounts a Secret at the manager's --webhook-cert-path %s", certPath)
	return ""
}

// webhookService is the one Service every webhook of both configurations calls.
func webhookService(t *testing.T, objs []*unstructured.Unstructured,
	mutating *admissionregistrationv1.MutatingWebhookConfiguration,
	validate *admissionregistrationv1.ValidatingWebhookConfiguration) *corev1.Service {
	t.Helper()
	var refs []*admissionregistrationv1.ServiceReference
	for _, w := range mutating.Webhooks {
		refs = append(refs, w.ClientConfig.Service)
	}
	for _, w := range validate.Webhooks {
		refs = append(refs, w.ClientConfig.Service)
	}
	for _, r := range refs {
		if r == nil || r.Name != refs[0].Name || r.Namespace != refs[0].Namespace || !samePort(r.Port, refs[0].Port) {
			t.Fatalf("the webhooks do not all call one Service: %+v and %+v", refs[0], r)
		}
	}
	for _, obj := range objs {
		if obj.GetKind() == "Service" && obj.GetName() == refs[0].Name && obj.GetNamespace() == refs[0].Namespace {
			var svc corev1.Service
			decodeStrict(t, obj, &svc)
			port := int32(443)
			if refs[0].Port != nil {
				port = *refs[0].Port
			}
			if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == port }) {
				t.Errorf("the webhooks call port %d of Service %s; it exposes %+v", port, svc.Name, svc.Spec.Ports)
			}
			return &svc
		}
	}
	t.Fatalf("the webhooks call Service %s/%s, which config/default does not render", refs[0].Namespace, refs[0].Name)
	return nil
}

func samePort(a, b *int32) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// checkServiceReachesWebhookPort: the Service selects the manager's pods and targets the
// container port its webhook server listens on.
func checkServiceReachesWebhookPort(t *testing.T, svc *corev1.Service, dep *appsv1.Deployment) {
	t.Helper()
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(dep.Spec.Template.Labels)) || len(svc.Spec.Selector) == 0 {
		t.Errorf("Service %s selects %v; the manager's pods are labelled %v", svc.Name, svc.Spec.Selector, dep.Spec.Template.Labels)
	}
	var webhookPort *corev1.ContainerPort
	for _, c := range dep.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == "webhook-server" {
				webhookPort = &p
			}
		}
	}
	if webhookPort == nil {
		t.Fatal("the manager declares no container port named webhook-server")
	}
	for _, p := range svc.Spec.Ports {
		target := p.TargetPort
		if target == (intstr.IntOrString{}) {
			target = intstr.FromInt32(p.Port)
		}
		if target.IntValue() == int(webhookPort.ContainerPort) || target.String() == webhookPort.Name {
			return
		}
	}
	t.Errorf("Service %s ports %+v do not target the webhook server's container port %d", svc.Name, svc.Spec.Ports, webhookPort.ContainerPort)
}

// TestManagerImage: `make image` builds, without a container engine, an image holding the
// manager binary it built at /manager, run as non-root with /manager as the entrypoint.
func TestManagerImage(t *testing.T) {
	const ref = "registry.example/sidecarset-operator:e2e"
	root := repoRoot(t)
	testutil.Run(t, "make", "-C", root, "image", "IMG="+ref)
	binary, err := os.ReadFile(filepath.Join(root, "bin", "manager-linux"))
	must(t, err)
	if !bytes.HasPrefix(binary, []byte("\x7fELF")) {
		t.Fatalf("bin/manager-linux is not an ELF binary")
	}
	testutil.AssertManagerImage(t, filepath.Join(root, "bin", "manager-image.tar"), ref, binary)
}

// sameAsKustomize checks that got, what the chart rendered, is what kustomize renders from
// config/<dir> (less the Namespace), object for object.
func sameAsKustomize(t *testing.T, dir string, got []*unstructured.Unstructured) {
	t.Helper()
	want := map[string]*unstructured.Unstructured{}
	for _, obj := range render(t, dir) {
		if obj.GetKind() != "Namespace" {
			want[objectKey(obj)] = obj
		}
	}
	if len(got) != len(want) {
		t.Errorf("helm template renders %d objects, config/%s %d (without its Namespace)", len(got), dir, len(want))
	}
	for _, obj := range got {
		w, ok := want[objectKey(obj)]
		labels := obj.GetLabels()
		if labels["app.kubernetes.io/managed-by"] == "Helm" {
			labels["app.kubernetes.io/managed-by"] = "kustomize"
			obj.SetLabels(labels)
		}
		if !ok || !equality.Semantic.DeepEqual(obj.Object, w.Object) {
			t.Errorf("%s: the chart's rendering differs from config/%s", objectKey(obj), dir)
		}
	}
}

// helmTemplate renders dist/chart with bin/helm (make helm) into namespace ns.
func helmTemplate(t *testing.T, ns string, args ...string) []*unstructured.Unstructured {
	t.Helper()
	root := repoRoot(t)
	args = append([]string{"template", "sidecarset", filepath.Join(root, "dist", "chart"), "--namespace", ns, "--include-crds"}, args...)
	return decodeYAML(t, testutil.Run(t, filepath.Join(root, "bin", "helm"), args...))
}

func objectKey(obj *unstructured.Unstructured) string {
	return obj.GetKind() + " " + obj.GetNamespace() + "/" + obj.GetName()
}

// helmChart, a subtest of TestDeployManifests (which installs cert-manager's CRDs once): the
// chart generated from config/default (make chart) renders, with its
// default values in the kustomize namespace, exactly what `make deploy` applies (less the
// Namespace, which `helm install --create-namespace` makes), and with injection=policy exactly
// what config/policy-mode renders; its values land where they should; an unknown injection
// mode is refused; and what it renders with values passes a server-side dry-run apply.
func helmChart(t *testing.T) {
	sameAsKustomize(t, "default", helmTemplate(t, operatorNamespace))
	sameAsKustomize(t, "policy-mode", helmTemplate(t, operatorNamespace, "--set", "injection=policy"))
	// The local cluster's real node: whatever replicas says, one replica on the host's network.
	sameAsKustomize(t, "local-node", helmTemplate(t, operatorNamespace, "--set", "localNode=true,replicas=3"))
	// Where the cluster serves the Prometheus Operator's API, the ServiceMonitor and the alert
	// rules (the refusal alert among them) are on by default, exactly as config/monitoring
	// renders them; metrics.monitoring=false leaves them out.
	monitored := helmTemplate(t, operatorNamespace, "--api-versions", "monitoring.coreos.com/v1/PrometheusRule")
	var monitoring []*unstructured.Unstructured
	for _, obj := range monitored {
		if obj.GetKind() == "PrometheusRule" || obj.GetKind() == "ServiceMonitor" {
			monitoring = append(monitoring, obj)
		}
	}
	sameAsKustomize(t, "monitoring", monitoring)
	var rendered strings.Builder
	for _, obj := range monitoring {
		raw, err := json.Marshal(obj.Object)
		must(t, err)
		rendered.Write(raw)
	}
	if rules := rendered.String(); len(monitoring) != 2 || !strings.Contains(rules, "SidecarSetPodsDenied") || !strings.Contains(rules, "{{ $labels.sidecarset }}") {
		t.Errorf("with monitoring.coreos.com/v1 the chart renders %d monitoring objects, want the ServiceMonitor and the PrometheusRule with SidecarSetPodsDenied and Prometheus' own templates", len(monitoring))
	}
	for _, obj := range helmTemplate(t, operatorNamespace, "--api-versions", "monitoring.coreos.com/v1/PrometheusRule", "--set", "metrics.monitoring=false") {
		if obj.GetKind() == "PrometheusRule" || obj.GetKind() == "ServiceMonitor" {
			t.Errorf("metrics.monitoring=false still renders %s", objectKey(obj))
		}
	}
	for _, obj := range helmTemplate(t, operatorNamespace, "--set", "pinnedImagesPolicy=false") {
		if strings.HasPrefix(obj.GetKind(), "ValidatingAdmissionPolicy") {
			t.Errorf("pinnedImagesPolicy=false still renders %s", objectKey(obj))
		}
	}
	root := repoRoot(t)
	out, err := exec.Command(filepath.Join(root, "bin", "helm"), "template", "sidecarset", filepath.Join(root, "dist", "chart"),
		"--set", "injection=Policy").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `injection: "Policy" is not a mode; use webhook or policy`) {
		t.Errorf("helm template --set injection=Policy: %v, want it refused naming the value:\n%s", err, out)
	}

	const ns = "ops-e2e-helm"
	must(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	t.Cleanup(func() { deleteIgnoreNotFound(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) })
	custom := helmTemplate(t, ns, "--set", "image.repository=registry.example/op,image.tag=t1,image.pullPolicy=Always,replicas=3",
		"--set", "resources.limits.memory=512Mi,webhook.failurePolicy=Ignore,metrics.enabled=false",
		"--set-json", `webhook.excludedNamespaces=["legacy"]`, "--set-json", `env=[{"name":"GOMEMLIMIT","value":"200MiB"}]`,
		"--set-json", `insecureRegistries=["registry.lab:5000","10.0.0.7:5000"]`)
	var dep appsv1.Deployment
	var hook admissionregistrationv1.MutatingWebhookConfiguration
	var cert certmanagerv1.Certificate
	for _, obj := range custom {
		switch obj.GetKind() {
		case "Deployment":
			must(t, runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &dep))
		case "MutatingWebhookConfiguration":
			must(t, runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &hook))
		case "Certificate":
			if obj.GetName() == "sidecarset-serving-cert" {
				must(t, runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &cert))
			}
		case "Service":
			if strings.Contains(obj.GetName(), "metrics") {
				t.Errorf("metrics.enabled=false still renders %s", obj.GetName())
			}
		}
		if obj.GetKind() != "CustomResourceDefinition" && obj.GetKind() != "ClusterRole" && obj.GetKind() != "ClusterRoleBinding" &&
			!strings.HasSuffix(obj.GetKind(), "WebhookConfiguration") && !strings.HasPrefix(obj.GetKind(), "ValidatingAdmissionPolicy") && obj.GetNamespace() != ns {
			t.Errorf("%s is not in the release namespace %s", objectKey(obj), ns)
		}
	}
	c := dep.Spec.Template.Spec.Containers[0]
	if c.Image != "registry.example/op:t1" || c.ImagePullPolicy != corev1.PullAlways || *dep.Spec.Replicas != 3 ||
		c.Resources.Limits.Memory().String() != "512Mi" || c.Resources.Requests.Cpu().String() != "50m" ||
		!slices.Contains(c.Args, "--metrics-bind-address=0") ||
		// One exclusion list: the manager's flag (status, rollout, policies) from the value
		// that also renders the webhook's namespaceSelector below.
		!slices.Contains(c.Args, "--excluded-namespaces=legacy") ||
		!slices.Contains(c.Args, "--insecure-registries=registry.lab:5000,10.0.0.7:5000") ||
		// The extra environment after the manager's own.
		len(c.Env) != 3 || c.Env[0].Name != "POD_NAMESPACE" || c.Env[2] != (corev1.EnvVar{Name: "GOMEMLIMIT", Value: "200MiB"}) {
		t.Errorf("Deployment: image %s (%s), replicas %d, resources %v, args %v, env %v", c.Image, c.ImagePullPolicy, *dep.Spec.Replicas, c.Resources, c.Args, c.Env)
	}
	if len(hook.Webhooks) != 1 || *hook.Webhooks[0].FailurePolicy != admissionregistrationv1.Ignore ||
		!slices.Equal(hook.Webhooks[0].NamespaceSelector.MatchExpressions[0].Values, []string{"kube-system", ns, "legacy"}) ||
		hook.Annotations["cert-manager.io/inject-ca-from"] != ns+"/sidecarset-serving-cert" {
		t.Errorf("MutatingWebhookConfiguration: %+v", hook)
	}
	if !slices.Contains(cert.Spec.DNSNames, "sidecarset-webhook-service."+ns+".svc") {
		t.Errorf("Certificate DNS names %v", cert.Spec.DNSNames)
	}
	for _, obj := range custom {
		if err := applyDryRun(dryRunTarget(t, obj)); err != nil {
			t.Errorf("%s: %v", objectKey(obj), err)
		}
	}
}
