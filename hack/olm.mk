# OLM bundle and file-based catalog; included by the Makefile, whose VERSION, IMAGE_TAG_BASE,
# IMG, LOCALBIN and KUSTOMIZE it uses.
#
#   make bundle [VERSION=x.y.z] [IMG=...]   bundle/ and bundle.Dockerfile from config/manifests
#   make catalog                            catalog/sidecarset-operator/ from bundle/ (offline)
#   make verify-bundle                      both regenerated; fails if they differ from git
#
# The catalog embeds the bundle's manifests (`opm render` of the bundle directory), so OLM can
# install from it without pulling a bundle image. Building and pushing images needs a container
# engine (CONTAINER_TOOL), which `make bundle`, `make catalog` and `make verify-bundle` do not.

OPERATOR_SDK_VERSION ?= v1.42.2
OPM_VERSION ?= v1.73.0
OPERATOR_SDK ?= $(LOCALBIN)/operator-sdk
OPM ?= $(LOCALBIN)/opm
CONTAINER_TOOL ?= docker

PACKAGE_NAME ?= sidecarset-operator
# CHANNELS is a comma-separated list; DEFAULT_CHANNEL is the one subscriptions get by default.
CHANNELS ?= alpha
DEFAULT_CHANNEL ?= alpha
BUNDLE_METADATA_OPTS ?= --channels=$(CHANNELS) --default-channel=$(DEFAULT_CHANNEL)
# The newest Kubernetes minor the bundle is checked against (APIs removed by then fail).
BUNDLE_K8S_VERSION ?= 1.33
BUNDLE_VALIDATE_OPTS ?= --select-optional suite=operatorframework --optional-values=k8s-version=$(BUNDLE_K8S_VERSION)

BUNDLE_IMG ?= $(IMAGE_TAG_BASE)-bundle:v$(VERSION)
CATALOG_IMG ?= $(IMAGE_TAG_BASE)-catalog:v$(VERSION)
CATALOG_ROOT ?= catalog
CATALOG_DIR := $(CATALOG_ROOT)/$(PACKAGE_NAME)
BUNDLE_CSV := bundle/manifests/$(PACKAGE_NAME).clusterserviceversion.yaml

##@ OLM

# operator-sdk stamps createdAt with the current time on every run. Regenerating the same
# VERSION keeps the committed stamp, so `make verify-bundle` is reproducible; a new VERSION
# gets a fresh one.
.PHONY: bundle
bundle: manifests kustomize operator-sdk ## Generate bundle/ and bundle.Dockerfile for VERSION and IMG, then validate them.
	$(OPERATOR_SDK) generate kustomize manifests -q --interactive=false
	cd config/olm && $(KUSTOMIZE) edit set image controller=$(IMG)
	@created=$$(sed -n 's/^    createdAt: //p' $(BUNDLE_CSV) 2>/dev/null || true); \
	version=$$(sed -n 's/^  version: //p' $(BUNDLE_CSV) 2>/dev/null || true); \
	rm -rf bundle/manifests bundle/metadata bundle/tests; \
	echo "$(KUSTOMIZE) build config/manifests | $(OPERATOR_SDK) generate bundle -q --overwrite --version $(VERSION) $(BUNDLE_METADATA_OPTS)"; \
	$(KUSTOMIZE) build config/manifests | $(OPERATOR_SDK) generate bundle -q --overwrite --version $(VERSION) $(BUNDLE_METADATA_OPTS); \
	if [ -n "$$created" ] && [ "$$version" = "$(VERSION)" ]; then \
		sed -i "s/^    createdAt: .*/    createdAt: $$created/" $(BUNDLE_CSV); fi
	$(OPERATOR_SDK) bundle validate ./bundle $(BUNDLE_VALIDATE_OPTS)

.PHONY: bundle-build
bundle-build: ## Build the bundle image (needs a container engine).
	$(CONTAINER_TOOL) build -f bundle.Dockerfile -t $(BUNDLE_IMG) .

.PHONY: bundle-push
bundle-push: ## Push the bundle image (needs a container engine).
	$(CONTAINER_TOOL) push $(BUNDLE_IMG)

# The catalog is regenerated from scratch from bundle/: a package (opm init), the rendered
# bundle with its manifests inline (image ""), and an entry for it in every channel of CHANNELS.
.PHONY: catalog
catalog: opm ## Generate the file-based catalog in catalog/ from bundle/ and validate it.
	rm -rf $(CATALOG_DIR)
	mkdir -p $(CATALOG_DIR)
	$(OPM) init $(PACKAGE_NAME) --default-channel=$(DEFAULT_CHANNEL) --output yaml > $(CATALOG_DIR)/package.yaml
	$(OPM) render ./bundle --output yaml > $(CATALOG_DIR)/bundle.yaml
	@csv=$$(sed -n 's/^  name: //p' $(BUNDLE_CSV)); \
	for channel in $$(echo "$(CHANNELS)" | tr ',' ' '); do \
		printf -- '---\nschema: olm.channel\npackage: %s\nname: %s\nentries:\n- name: %s\n' \
			"$(PACKAGE_NAME)" "$$channel" "$$csv"; \
	done > $(CATALOG_DIR)/channels.yaml
	$(OPM) validate $(CATALOG_ROOT)

# `opm generate dockerfile` writes $(CATALOG_ROOT).Dockerfile beside the catalog directory (and
# refuses to overwrite it). The catalog's bundle has image "" and its manifests inline, which OLM
# (v0) installs from without a bundle image.
.PHONY: catalog-build
catalog-build: opm ## Build a catalog image serving catalog/ (needs a container engine).
	rm -f $(CATALOG_ROOT).Dockerfile
	$(OPM) generate dockerfile $(CATALOG_ROOT) --base-image quay.io/operator-framework/opm:$(OPM_VERSION) --builder-image quay.io/operator-framework/opm:$(OPM_VERSION)
	$(CONTAINER_TOOL) build -f $(CATALOG_ROOT).Dockerfile -t $(CATALOG_IMG) .

.PHONY: catalog-push
catalog-push: ## Push the catalog image (needs a container engine).
	$(CONTAINER_TOOL) push $(CATALOG_IMG)

.PHONY: verify-bundle
verify-bundle: ## Regenerate bundle/ and catalog/ and fail if they differ from the commit.
	$(MAKE) --no-print-directory bundle
	$(MAKE) --no-print-directory catalog
	@if [ -n "$$(git status --porcelain -- bundle bundle.Dockerfile catalog config/manifests config/olm)" ]; then \
		echo "The OLM bundle or catalog is stale; run 'make bundle catalog' and commit:"; \
		git status --porcelain -- bundle bundle.Dockerfile catalog config/manifests config/olm; \
		git --no-pager diff --stat -- bundle bundle.Dockerfile catalog config/manifests config/olm; exit 1; fi

# Tools (listed under OLM by `make help`).

.PHONY: operator-sdk
operator-sdk: ## Build operator-sdk from the Go module proxy.
	@hack/tool.sh operator-sdk github.com/operator-framework/operator-sdk/cmd/operator-sdk@$(OPERATOR_SDK_VERSION) containers_image_openpgp "-X github.com/operator-framework/operator-sdk/internal/version.Version=$(OPERATOR_SDK_VERSION) -X github.com/operator-framework/operator-sdk/internal/version.GitVersion=$(OPERATOR_SDK_VERSION) -X github.com/operator-framework/operator-sdk/internal/version.KubernetesVersion=v1.33.0"

.PHONY: opm
opm: ## Build opm from the Go module proxy.
	@hack/tool.sh opm github.com/operator-framework/operator-registry/cmd/opm@$(OPM_VERSION) "containers_image_openpgp json1" "-X github.com/operator-framework/operator-registry/cmd/opm/version.opmVersion=$(OPM_VERSION)"
