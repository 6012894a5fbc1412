// Our launchers for cert-manager's controller, webhook and cainjector, over cert-manager's root
// module from the Go module proxy (hack/certmanager-build.sh builds them; README.md says why they
// exist). The module path sits below cert-manager's because the launchers import packages under
// the root module's internal/, which Go allows only from below github.com/cert-manager/cert-manager.
// No go.sum: the build script requires the root module at the version it builds and tidies.
module github.com/cert-manager/cert-manager/sidecarset-launchers

go 1.26.0

require github.com/cert-manager/cert-manager v1.21.2
