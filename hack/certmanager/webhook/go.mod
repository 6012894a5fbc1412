module github.com/cert-manager/cert-manager/webhook-binary

go 1.26.0

// cert-manager's cmd/webhook/go.mod at v1.21.1 (its direct requirements), without the
// replace of cert-manager's root module by ../../: hack/certmanager-build.sh copies this
// module, requires the root module at CERT_MANAGER_VERSION from the Go module proxy and tidies.

require (
	github.com/cert-manager/cert-manager v1.21.2
	github.com/spf13/cobra v1.10.2
	k8s.io/component-base v0.36.2
	sigs.k8s.io/controller-runtime v0.24.1
)

