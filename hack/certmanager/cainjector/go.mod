module github.com/cert-manager/cert-manager/cainjector-binary

go 1.26.0

// cert-manager's cmd/cainjector/go.mod at v1.21.1 (its direct requirements), without the
// replace of cert-manager's root module by ../../: hack/certmanager-build.sh copies this
// module, requires the root module at CERT_MANAGER_VERSION from the Go module proxy and tidies.

require (
	github.com/cert-manager/cert-manager v1.21.2
	github.com/spf13/cobra v1.10.2
	github.com/spf13/pflag v1.0.10
	k8s.io/api v0.36.2
	k8s.io/apiextensions-apiserver v0.36.2
	k8s.io/apimachinery v0.36.2
	k8s.io/client-go v0.36.2
	k8s.io/component-base v0.36.2
	k8s.io/kube-aggregator v0.36.2
	sigs.k8s.io/controller-runtime v0.24.1
)

