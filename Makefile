# sidecarset-operator Makefile (operator-sdk go/v4 layout). Every tool is built from the Go
# module proxy by hack/ scripts and cached per user, keyed by version; nothing is downloaded
# as a binary.

VERSION ?= 0.1.0
IMAGE_TAG_BASE ?= ghcr.io/sidecarset/sidecarset-operator
IMG ?= $(IMAGE_TAG_BASE):v$(VERSION)
# The image name config/manager/kustomization.yaml replaces (what `make deploy` and build-installer point at IMG).
CONTROLLER_IMAGE ?= ghcr.io/sidecarset/sidecarset-operator

# Tool versions (see ../shared/notes/tooling.md for why these).
CONTROLLER_GEN_VERSION ?= v0.23.0
KUSTOMIZE_VERSION ?= v5.8.2
GOLANGCI_LINT_VERSION ?= v2.15.0
HELM_VERSION ?= v3.22.0
K8S_VERSION ?= v1.37.0
ETCD_VERSION ?= v3.7.3
KWOK_VERSION ?= v0.8.0
export K8S_VERSION ETCD_VERSION KWOK_VERSION

SHELL = /usr/bin/env bash -o pipefail
.SHELLFLAGS = -ec
GOBIN ?= $(shell go env GOPATH)/bin
LOCALBIN ?= $(CURDIR)/bin
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen
KUSTOMIZE ?= $(LOCALBIN)/kustomize
TEST_MANIFESTS ?= $(LOCALBIN)/test-manifests
# DEPLOY_CONFIG is the kustomization make deploy applies: config/default (webhook mode) or
# config/policy-mode (each SidecarSet compiled into a MutatingAdmissionPolicy).
DEPLOY_CONFIG ?= config/default
# kubectl from PATH, else the one hack/controlplane-build.sh builds.
KUBECTL ?= $(shell command -v kubectl 2>/dev/null || echo $(LOCALBIN)/k8s/kubectl)
GO_TEST_FLAGS ?=

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Display this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: controller-gen ## Generate CRD, RBAC and webhook manifests from the Go markers.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd:allowDangerousTypes=false webhook paths="./..." output:crd:artifacts:config=config/crd/bases

.PHONY: generate
generate: controller-gen ## Generate DeepCopy methods.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./..."

.PHONY: fmt
fmt: ## Run go fmt.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet (the end-to-end tests too).
	go vet -tags e2e ./...

.PHONY: verify
verify: manifests generate chart ## Regenerate everything and fail if a generated file, go.mod or formatting differs from the commit.
	go mod tidy
	@if [ -n "$$(git status --porcelain -- api config dist/chart go.mod go.sum)" ]; then \
		echo "Generated files are stale; run 'make manifests generate chart', 'go mod tidy' and commit:"; \
		git status --porcelain -- api config dist/chart go.mod go.sum; git --no-pager diff --stat -- api config dist/chart; exit 1; fi
	@if [ -n "$$(gofmt -l $$(git ls-files '*.go'))" ]; then \
		echo "Not gofmt-ed: $$(gofmt -l $$(git ls-files '*.go'))"; exit 1; fi
	$(MAKE) verify-bundle

.PHONY: test-manifests
test-manifests: manifests kustomize ## Render config/default, whose CRD and webhook configurations the integration tests install.
	@mkdir -p $(TEST_MANIFESTS)
	$(KUSTOMIZE) build config/default > $(TEST_MANIFESTS)/default.yaml
	$(KUSTOMIZE) build config/policy-mode > $(TEST_MANIFESTS)/policy-mode.yaml

.PHONY: test
test: manifests generate fmt vet envtest test-manifests ## Unit tests, then integration tests against a real kube-apiserver.
	KUBEBUILDER_ASSETS="$$(hack/controlplane-build.sh envtest)" \
	SIDECARSET_TEST_MANIFESTS="$(TEST_MANIFESTS)/default.yaml" \
	go test ./... $(GO_TEST_FLAGS) -coverprofile cover.out

.PHONY: fuzz
fuzz: ## Run each fuzz target for FUZZTIME (default 30s); `make test` already runs their seeds.
	go test ./internal/inject -run '^$$' -fuzz FuzzApply -fuzztime $${FUZZTIME:-30s}
	go test ./internal/validation -run '^$$' -fuzz FuzzSelectorsOverlap -fuzztime $${FUZZTIME:-30s}

.PHONY: bench
bench: ## Run the benchmarks (admission handler, engine, status computation).
	go test ./internal/... -run '^$$' -bench . -benchmem -count $${COUNT:-5}

##@ Local cluster

.PHONY: cluster-up
cluster-up: ## Start a local control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok) on 127.0.0.1.
	hack/cluster.sh up

.PHONY: cluster-down
cluster-down: ## Stop the local cluster and everything started on it; remove bin/cluster.
	hack/cluster.sh down

.PHONY: demo
demo: manifests kustomize ## Run the operator on a local cluster and show it injecting sidecars (reuses what runs).
	hack/demo.sh up

.PHONY: demo-down
demo-down: ## Stop the demo's operators, webhook proxy and cluster.
	hack/demo.sh down

E2E_CLUSTER_DIR ?= $(LOCALBIN)/e2e-cluster

.PHONY: test-e2e
test-e2e: test-e2e-operator test-e2e-olm ## All end-to-end tests: the operator binary, then OLM install/upgrade/uninstall.

.PHONY: test-e2e-operator
test-e2e-operator: manifests kustomize helm ## End-to-end tests against the operator binary (and a make-deploy dry run) on a local cluster of their own, torn down afterwards.
	export SIDECARSET_CLUSTER_DIR="$(E2E_CLUSTER_DIR)"; \
	trap 'hack/demo.sh down' EXIT; \
	hack/cluster.sh up && hack/demo.sh build && hack/demo.sh install && \
	SIDECARSET_DEMO="$(CURDIR)/hack/demo.sh" KUBECONFIG="$(E2E_CLUSTER_DIR)/kubeconfig" \
	go test ./test/e2e -tags e2e -count=1 -timeout 30m -v $(GO_TEST_FLAGS)

# OLM's logs of the last run stay in $(OLM_CLUSTER_DIR).logs.
OLM_CLUSTER_DIR ?= $(LOCALBIN)/olm-cluster

.PHONY: test-e2e-olm
test-e2e-olm: opm ## Install, upgrade and uninstall the operator through OLM (olm and catalog operators as host processes, catalog/ served by opm) on a local cluster of its own, torn down afterwards.
	export SIDECARSET_CLUSTER_DIR="$(OLM_CLUSTER_DIR)"; \
	trap 'rm -rf "$(OLM_CLUSTER_DIR).logs"; cp -r "$(OLM_CLUSTER_DIR)/logs" "$(OLM_CLUSTER_DIR).logs" 2>/dev/null || true; hack/cluster.sh down' EXIT; \
	hack/cluster.sh up && hack/olm.sh build && hack/olm.sh up $(CATALOG_ROOT) && \
	KUBECONFIG="$(OLM_CLUSTER_DIR)/kubeconfig" SIDECARSET_OLM="$(CURDIR)/hack/olm.sh" SIDECARSET_OPM="$(OPM)" \
	SIDECARSET_CATALOG="$(CURDIR)/$(CATALOG_ROOT)" SIDECARSET_BUNDLE="$(CURDIR)/bundle" \
	go test ./test/e2e/olm -tags e2e -count=1 -timeout 30m -v $(GO_TEST_FLAGS)

##@ Build

.PHONY: build
build: manifests generate fmt vet ## Build the manager binary and the kubectl plugin (bin/kubectl-sidecarset).
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o bin/manager main.go
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o bin/kubectl-sidecarset ./cmd/kubectl-sidecarset

.PHONY: image
image: ## Build the manager image without a container engine: bin/manager-image.tar (IMG=...), for docker/podman load, kind load image-archive or crane push.
	CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w" -o $(LOCALBIN)/manager-linux main.go
	go run ./hack/devtool image $(LOCALBIN)/manager-linux $(LOCALBIN)/manager-image.tar $(IMG) $(VERSION)
	@echo "wrote $(LOCALBIN)/manager-image.tar ($(IMG)): docker load -i $(LOCALBIN)/manager-image.tar"

# Where install-plugin puts kubectl-sidecarset: any directory on PATH makes `kubectl sidecarset` work.
PLUGIN_DIR ?= $(HOME)/.local/bin

.PHONY: install-plugin
install-plugin: ## Build the kubectl plugin and install it into PLUGIN_DIR (default ~/.local/bin), for `kubectl sidecarset ...`.
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o bin/kubectl-sidecarset ./cmd/kubectl-sidecarset
	mkdir -p "$(PLUGIN_DIR)"
	install -m 0755 bin/kubectl-sidecarset "$(PLUGIN_DIR)/kubectl-sidecarset"
	@echo "installed $(PLUGIN_DIR)/kubectl-sidecarset; with $(PLUGIN_DIR) on PATH, run: kubectl sidecarset --help"

.PHONY: run
run: manifests generate fmt vet install ## Install the CRD and run the manager on this host against the current kubeconfig.
	hack/run-certs.sh $(LOCALBIN)/run-certs
	go run ./main.go --webhook-cert-path=$(LOCALBIN)/run-certs --webhook-host=127.0.0.1 \
		--health-probe-bind-address=127.0.0.1:8081 $(RUN_ARGS)

.PHONY: docker-build
docker-build: ## Build the manager image (needs a container engine).
	docker build -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the manager image (needs a container engine).
	docker push $(IMG)

##@ Deployment

.PHONY: kubectl
kubectl: ## Use kubectl from PATH; only when there is none, build one (with the test control plane).
	@command -v kubectl >/dev/null 2>&1 || $(MAKE) envtest

.PHONY: install
install: kustomize kubectl ## Install the CRD into the cluster of the current kubeconfig.
	$(KUSTOMIZE) build config/crd | $(KUBECTL) apply --server-side -f -

.PHONY: uninstall
uninstall: kustomize kubectl ## Remove the CRD (and every SidecarSet) from the cluster.
	$(KUSTOMIZE) build config/crd | $(KUBECTL) delete --ignore-not-found -f -

.PHONY: deploy
deploy: kustomize kubectl ## Deploy to the cluster of the current kubeconfig, which must run cert-manager (IMG=...; DEPLOY_CONFIG=config/policy-mode for policy mode).
	cd config/manager && $(KUSTOMIZE) edit set image controller=$(IMG)
	$(KUSTOMIZE) build $(DEPLOY_CONFIG) | $(KUBECTL) apply --server-side -f -

.PHONY: build-installer
build-installer: kustomize ## Write dist/install.yaml: CRD, RBAC, manager, webhooks and the cert-manager Issuer/Certificate in one file (IMG=...).
	@mkdir -p dist $(LOCALBIN)/installer
	printf 'resources:\n- ../../config/default\n' > $(LOCALBIN)/installer/kustomization.yaml
	cd $(LOCALBIN)/installer && $(KUSTOMIZE) edit set image $(CONTROLLER_IMAGE)=$(IMG)
	$(KUSTOMIZE) build $(LOCALBIN)/installer > dist/install.yaml
	@echo "wrote dist/install.yaml (image $(IMG)); install with: kubectl apply --server-side -f dist/install.yaml"

.PHONY: undeploy
undeploy: kustomize kubectl ## Remove everything `make deploy` created, the CRD and every SidecarSet included.
	$(KUSTOMIZE) build $(DEPLOY_CONFIG) | $(KUBECTL) delete --ignore-not-found -f -

##@ Tools

.PHONY: controller-gen
controller-gen: ## Build controller-gen from the Go module proxy.
	@hack/tool.sh controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)

.PHONY: kustomize
kustomize: ## Build kustomize from the Go module proxy.
	@hack/tool.sh kustomize sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)

.PHONY: envtest
envtest: ## Build (or reuse) kube-apiserver, etcd and kubectl for the integration tests.
	@mkdir -p $(LOCALBIN)
	@ln -sfn "$$(hack/controlplane-build.sh envtest)" $(LOCALBIN)/k8s

# OLM bundle and catalog targets (bundle, catalog, verify-bundle, operator-sdk, opm).
-include hack/olm.mk

.PHONY: bench-rollout
bench-rollout: manifests kustomize ## Roll a new sidecar image through BENCH_PODS (default 1000) pods on a local cluster of its own (maxUnavailable 10%): wall time, API writes per pod, peak unavailable.
	export SIDECARSET_CLUSTER_DIR="$(LOCALBIN)/bench-cluster"; \
	trap 'hack/demo.sh down' EXIT; \
	hack/cluster.sh up && hack/demo.sh build && hack/demo.sh install && \
	SIDECARSET_DEMO="$(CURDIR)/hack/demo.sh" KUBECONFIG="$(LOCALBIN)/bench-cluster/kubeconfig" SIDECARSET_BENCH_PODS="$${BENCH_PODS:-1000}" \
	go test ./test/e2e -tags e2e -run '^$$' -bench BenchmarkInPlaceRollout -benchtime 1x -count=1 -timeout 40m -v

.PHONY: lint
lint: golangci-lint lint-scripts ## golangci-lint (.golangci.yml: govet, staticcheck, errcheck, gosec, ...) on every package, e2e included, and shellcheck on hack/.
	$(LOCALBIN)/golangci-lint run ./...

.PHONY: helm
helm: ## Build helm from the Go module proxy (the chart's tests render with it).
	@hack/tool.sh helm helm.sh/helm/v3/cmd/helm@$(HELM_VERSION) "" "-X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION)"

.PHONY: chart
chart: manifests kustomize ## Generate the Helm chart dist/chart from config/default, with config/policy-mode as injection=policy (committed; make verify checks it).
	rm -rf dist/chart
	$(KUSTOMIZE) build config/policy-mode > $(LOCALBIN)/chart-policy-mode.yaml
	$(KUSTOMIZE) build config/default | go run ./hack/devtool chart dist/chart $(VERSION) $(LOCALBIN)/chart-policy-mode.yaml

.PHONY: golangci-lint
golangci-lint: ## Build golangci-lint from the Go module proxy.
	@hack/tool.sh golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

.PHONY: lint-scripts
lint-scripts: ## shellcheck the hack/ scripts and .ci/run (hack/shellcheck.sh: from PATH, or from apt when root).
	hack/shellcheck.sh

.PHONY: bench-scale
bench-scale: manifests kustomize ## Scale measurements on a local cluster of its own: pod creation throughput with no webhook / a no-op webhook / ours, status lag and work per pod event at two sizes, heap with pods not opted in. Sizes: SIDECARSET_SCALE_* (see test/e2e/scale_bench_test.go).
	export SIDECARSET_CLUSTER_DIR="$(LOCALBIN)/bench-cluster"; \
	if [ -n "$$SIDECARSET_SCALE_PROFILE_DIR" ]; then export SIDECARSET_APISERVER_PROFILING=true; mkdir -p "$$SIDECARSET_SCALE_PROFILE_DIR"; fi; \
	trap 'hack/demo.sh down' EXIT; \
	hack/cluster.sh up && hack/demo.sh build && hack/demo.sh install && \
	SIDECARSET_DEMO="$(CURDIR)/hack/demo.sh" KUBECONFIG="$(LOCALBIN)/bench-cluster/kubeconfig" \
	go test ./test/e2e -tags e2e -run '^$$' -bench BenchmarkScale -benchtime 1x -count=1 -timeout 60m -v
