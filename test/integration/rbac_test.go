package integration

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// asManagerServiceAccount installs the manager's ServiceAccount, ClusterRoles and bindings, and
// the admission policies, from the rendered config/default and returns a config that impersonates that ServiceAccount.
// managerServiceAccount is the ServiceAccount config/default's manager Deployment runs as.
const managerServiceAccount = "sidecarset-controller-manager"

func asManagerServiceAccount(ctx context.Context, cfg *rest.Config, manifests string) (*rest.Config, error) {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, err
	}
	if err := createIgnoreExists(ctx, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}}); err != nil {
		return nil, err
	}
	objs, err := rbacObjects(manifests)
	if err != nil {
		return nil, err
	}
	var account string
	for _, obj := range objs {
		// The manager's own, not the metrics reader config/default also installs.
		if sa, ok := obj.(*corev1.ServiceAccount); ok && sa.Name == managerServiceAccount {
			account = fmt.Sprintf("system:serviceaccount:%s:%s", sa.Namespace, sa.Name)
		}
		if err := createIgnoreExists(ctx, c, obj); err != nil {
			return nil, fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	if account == "" {
		return nil, errors.New("config/default renders no ServiceAccount for the manager")
	}
	managerCfg := rest.CopyConfig(cfg)
	managerCfg.Impersonate = rest.ImpersonationConfig{UserName: account}
	return managerCfg, nil
}

// rbacObjects decodes the ServiceAccount, (Cluster)Roles and (Cluster)RoleBindings of the
// rendered manifests, and the admission policies they ship (the pinned-images check).
func rbacObjects(path string) ([]client.Object, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []client.Object
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		var meta metav1.TypeMeta
		if err := utilyaml.Unmarshal(doc, &meta); err != nil {
			return nil, err
		}
		var obj client.Object
		switch meta.Kind {
		case "ServiceAccount":
			obj = &corev1.ServiceAccount{}
		case "ClusterRole":
			obj = &rbacv1.ClusterRole{}
		case "ClusterRoleBinding":
			obj = &rbacv1.ClusterRoleBinding{}
		case "Role":
			obj = &rbacv1.Role{}
		case "RoleBinding":
			obj = &rbacv1.RoleBinding{}
		case "ValidatingAdmissionPolicy":
			obj = &admissionregistrationv1.ValidatingAdmissionPolicy{}
		case "ValidatingAdmissionPolicyBinding":
			obj = &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
		default:
			continue
		}
		if err := utilyaml.UnmarshalStrict(doc, obj); err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
}

func createIgnoreExists(ctx context.Context, c client.Client, obj client.Object) error {
	if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}
