# cluster-api-provider-mailgun
#
# The two entry points: `make demo` (everything on one machine) and
# `make test` (all tests). Both build the tools they need into bin/.

VERSION ?= 0.1.0
IMAGE_TAG_BASE ?= ghcr.io/capi-mailgun/cluster-api-provider-mailgun
IMG ?= $(IMAGE_TAG_BASE):v$(VERSION)

# OLM packaging (operator-sdk conventions).
PACKAGE ?= cluster-api-provider-mailgun
CHANNELS ?= stable
DEFAULT_CHANNEL ?= stable
# The CSV this version replaces in the upgrade graph, e.g.
# cluster-api-provider-mailgun.v0.0.9; empty for the first release.
REPLACES ?=
BUNDLE_IMG ?= $(IMAGE_TAG_BASE)-bundle:v$(VERSION)
CATALOG_IMG ?= $(IMAGE_TAG_BASE)-catalog:v$(VERSION)
BUNDLE_METADATA_OPTS ?= --channels=$(CHANNELS) --default-channel=$(DEFAULT_CHANNEL)
OPERATOR_SDK ?= operator-sdk

# Container tool for image targets: the first of docker, podman, buildah.
CONTAINER_TOOL ?= $(shell command -v docker 2>/dev/null || command -v podman 2>/dev/null || command -v buildah 2>/dev/null || echo docker)

SHELL = /usr/bin/env bash -o pipefail
.SHELLFLAGS = -ec

LOCALBIN ?= $(CURDIR)/bin
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen
KUSTOMIZE ?= $(LOCALBIN)/kustomize
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint
OPM ?= $(LOCALBIN)/opm
TOOLS_MOD := hack/tools/go.mod

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Display this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs and RBAC from the kubebuilder markers.
	$(CONTROLLER_GEN) crd paths="./api/..." output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=manager-role paths="./controllers/..." output:rbac:artifacts:config=config/rbac

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate DeepCopy methods (zz_generated.deepcopy.go).
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: fmt
fmt: ## Run go fmt.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

# The e2e and faults build tags pull test/e2e and test/faults into the lint;
# the config is .golangci.yml.
.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint (linters and gofmt/goimports checks, see .golangci.yml), including the e2e and faults test suites.
	$(GOLANGCI_LINT) run --timeout 10m --build-tags e2e,faults ./...

.PHONY: verify
verify: manifests generate bundle ## Fail if generated files (CRDs, RBAC, deepcopy, bundle) or go.mod are stale, or code is not gofmt'ed.
	go mod tidy
	cd hack/tools && go mod tidy
	cd hack/controlplane && go mod tidy
	cd hack/opm && go mod tidy
	cd hack/olm && go mod tidy
	cd hack/node && go mod tidy
	cd hack/olmv1 && GONOSUMDB=github.com/operator-framework/operator-controller go mod tidy
	cd hack/capi && go mod tidy
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	@git diff --exit-code -- . || { echo "Generated files are stale: run 'make manifests generate' and 'go mod tidy', and commit the result."; exit 1; }
	@test -z "$$(git status --porcelain --untracked-files=all -- config api)" || { git status --porcelain -- config api; echo "Untracked generated files."; exit 1; }

.PHONY: controlplane
controlplane: ## Build the test control plane (kube-apiserver + etcd) into bin/k8s/.
	hack/build-controlplane.sh

.PHONY: test-unit
test-unit: ## The fast layer: every test that needs no control plane (send protocol, mailer, config, scope, bundle), in seconds.
	go test -short -count=1 ./...

.PHONY: test
test: vet controlplane ## The unit tests and the envtest suite (a real kube-apiserver + etcd), with the race detector.
	KUBEBUILDER_ASSETS="$$(hack/build-controlplane.sh)" go test -race -count=1 ./...

.PHONY: e2e
e2e: ## The user's path on a real single-node cluster: the release commands of docs/install-olm.md -> catalog image -> OLM (as pods) -> operator pod -> email, upgrade, clusterctl move away and back, delete, uninstall (needs root; logs in bin/e2e/logs).
	PACKAGE=$(PACKAGE) hack/e2e.sh

.PHONY: e2e-olmv1
e2e-olmv1: ## The same path with OLM v1 (catalogd + operator-controller as pods): ClusterCatalog -> ClusterExtension -> operator pod -> email, upgrade, drift correction, uninstall; then clusterctl init/generate/upgrade/delete next to Cluster API's controllers as pods (needs root; logs in bin/e2e-olmv1/logs).
	E2E_OLM=v1 PACKAGE=$(PACKAGE) hack/e2e.sh

.PHONY: demo-olm
demo-olm: ## The user's path as a demo on a real node (needs root): install from the catalog image with OLM, print the email; DEMO_KEEP=1 leaves the node running.
	E2E_DEMO=1 E2E_KEEP_NODE=$(DEMO_KEEP) PACKAGE=$(PACKAGE) hack/e2e.sh

.PHONY: node-up
node-up: ## Start the single-node test cluster (hack/node/node.sh; needs root). KUBECONFIG=/var/lib/capmg-node/admin.kubeconfig
	hack/node/prereqs.sh
	hack/node/node.sh up

.PHONY: node-down
node-down: ## Stop the single-node test cluster and check that nothing of it is left.
	hack/node/node.sh down
	hack/node/node.sh check

# FAULTS_OUTAGE (default 1m) sets the Mailgun outage of the chaos test and
# FAULTS_LONG_FAILURE (default 10m) the failures of the long-failure test,
# which run side by side; raise FAULTS_TIMEOUT with them, e.g.
# FAULTS_OUTAGE=10m FAULTS_TIMEOUT=40m.
FAULTS_TIMEOUT ?= 30m

.PHONY: test-faults
test-faults: controlplane ## 300 MailgunClusters and 100 MailgunMachines through crashes, freezes, a flaky Mailgun and apiserver, copies and an outage; side by side, 10 minutes of refused connections, 429 without hints, lagging events and reused resend values at the shipped flags: exactly one email each, bounded cost (logs in bin/faults-logs).
	go build -o $(LOCALBIN)/manager .
	rm -rf $(LOCALBIN)/faults-logs
	KUBEBUILDER_ASSETS="$$(hack/build-controlplane.sh)" MANAGER=$(LOCALBIN)/manager FAULTS_LOG_DIR=$(LOCALBIN)/faults-logs \
	go test -tags faults ./test/faults/ -count=1 -v -timeout $(FAULTS_TIMEOUT)

.PHONY: bench
bench: controlplane ## Benchmark the operator (shipped flags, and --mailgun-qps=0) against bare clients (N=100,1000, median of 5 runs) and a bare informer (10k objects); prints a Markdown report.
	go build -o $(LOCALBIN)/manager .
	go build -o $(LOCALBIN)/bench ./hack/bench
	KUBEBUILDER_ASSETS="$$(hack/build-controlplane.sh)" $(LOCALBIN)/bench -manager $(LOCALBIN)/manager $(BENCH_ARGS) 2>$(LOCALBIN)/bench.stderr

.PHONY: demo
demo: controlplane ## Run the provider end to end on this machine and print the email it sends.
	KUBEBUILDER_ASSETS="$$(hack/build-controlplane.sh)" go run ./hack/demo $(DEMO_ARGS)

##@ Build

.PHONY: build
build: manifests generate fmt vet ## Build the manager binary.
	go build -o $(LOCALBIN)/manager .

# The namespace make run reads the Mailgun settings from (and creates the
# empty Secret and ConfigMap in, if missing): where make deploy and the
# README put them.
RUN_CONFIG_NAMESPACE ?= capmg-system

.PHONY: run
run: manifests generate fmt vet ## Run the manager against the cluster of your current kubeconfig, with the settings in RUN_CONFIG_NAMESPACE (capmg-system).
	go run . --metrics-bind-address=0 --config-namespace=$(RUN_CONFIG_NAMESPACE) $(RUN_ARGS)

.PHONY: docker-build
docker-build: ## Build the manager image.
	$(CONTAINER_TOOL) build -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the manager image.
	$(CONTAINER_TOOL) push $(IMG)

.PHONY: build-installer
build-installer: manifests generate $(KUSTOMIZE) ## Write dist/install.yaml with everything `make deploy` installs.
	mkdir -p dist
	cd config/manager && $(KUSTOMIZE) edit set image controller=$(IMG)
	$(KUSTOMIZE) build config/default > dist/install.yaml
	cd config/manager && $(KUSTOMIZE) edit set image controller=controller:latest

##@ OLM bundle and catalog

.PHONY: bundle
bundle: manifests ## Generate bundle/ and bundle.Dockerfile from config/ (no operator-sdk CLI needed).
	go run ./hack/bundle --version $(VERSION) --image $(IMG) --channels $(CHANNELS) --default-channel $(DEFAULT_CHANNEL) --replaces "$(REPLACES)"

OPERATORHUB_DIR ?= out/operatorhub

.PHONY: operatorhub
operatorhub: manifests ## Write the bundle in the community-operators layout (operators/<package>/<version>/, ci.yaml) under OPERATORHUB_DIR.
	go run ./hack/bundle --version $(VERSION) --image $(IMG) --channels $(CHANNELS) --default-channel $(DEFAULT_CHANNEL) --replaces "$(REPLACES)" --operatorhub-dir $(OPERATORHUB_DIR)

.PHONY: bundle-sdk
bundle-sdk: manifests $(KUSTOMIZE) ## Generate a bundle with the operator-sdk CLI, to compare: not what make bundle ships (see docs/install-olm.md).
	cd config/manager && $(KUSTOMIZE) edit set image controller=$(IMG)
	$(KUSTOMIZE) build config/manifests | $(OPERATOR_SDK) generate bundle -q --overwrite --version $(VERSION) $(BUNDLE_METADATA_OPTS)
	cd config/manager && $(KUSTOMIZE) edit set image controller=controller:latest
	$(OPERATOR_SDK) bundle validate ./bundle --select-optional suite=operatorframework

.PHONY: bundle-validate
bundle-validate: ## Validate the bundle like `operator-sdk bundle validate` and the scorecard's basic/olm suites, offline: every bundle test but the one that starts a control plane (the image build is skipped without buildah).
	go test ./hack/packaging/bundle/ -short -count=1 -v

.PHONY: scorecard
scorecard: ## Run the scorecard against a cluster (needs the operator-sdk CLI).
	$(OPERATOR_SDK) scorecard bundle

.PHONY: bundle-build
bundle-build: ## Build the bundle image (docker, podman or buildah).
	$(CONTAINER_TOOL) build -f bundle.Dockerfile -t $(BUNDLE_IMG) .

.PHONY: bundle-push
bundle-push: ## Push the bundle image.
	$(CONTAINER_TOOL) push $(BUNDLE_IMG)

# The versions the catalog's channel lists, oldest first; each replaces the
# one before. Their bundle images must be pushed (bundle-build bundle-push).
CATALOG_VERSIONS ?= $(VERSION)
# true pulls the bundle images over plain HTTP (a registry without TLS).
CATALOG_USE_HTTP ?= false

.PHONY: catalog
catalog: $(OPM) ## Render the file-based catalog (catalog/) from the bundle images of CATALOG_VERSIONS, write catalog.Dockerfile, and validate it.
	CATALOG_USE_HTTP=$(CATALOG_USE_HTTP) hack/render-catalog.sh $(OPM) $(PACKAGE) $(DEFAULT_CHANNEL) catalog $(IMAGE_TAG_BASE)-bundle $(CATALOG_VERSIONS)

.PHONY: catalog-build
catalog-build: ## Build the catalog image from what make catalog rendered (run it first, with the same variables).
	@test -f catalog.Dockerfile || { echo "catalog.Dockerfile is missing: run make catalog first"; exit 1; }
	$(CONTAINER_TOOL) build -f catalog.Dockerfile -t $(CATALOG_IMG) .

.PHONY: catalog-push
catalog-push: ## Push the catalog image.
	$(CONTAINER_TOOL) push $(CATALOG_IMG)

##@ clusterctl

RELEASE_DIR ?= out

.PHONY: release-manifests
release-manifests: manifests $(KUSTOMIZE) ## Write clusterctl's provider artifacts to out/: infrastructure-components.yaml, metadata.yaml, cluster-template*.yaml (flavors).
	mkdir -p $(RELEASE_DIR)
	cd config/manager && $(KUSTOMIZE) edit set image controller=$(IMG)
	$(KUSTOMIZE) build config/clusterctl > $(RELEASE_DIR)/infrastructure-components.yaml
	cd config/manager && $(KUSTOMIZE) edit set image controller=controller:latest
	cp metadata.yaml templates/cluster-template*.yaml $(RELEASE_DIR)/

##@ Deployment

ifndef ignore-not-found
  ignore-not-found = false
endif

.PHONY: install
install: manifests $(KUSTOMIZE) ## Install the CRDs into the cluster of your current kubeconfig.
	$(KUSTOMIZE) build config/crd | kubectl apply -f -

.PHONY: uninstall
uninstall: manifests $(KUSTOMIZE) ## Remove the CRDs.
	$(KUSTOMIZE) build config/crd | kubectl delete --ignore-not-found=$(ignore-not-found) -f -

.PHONY: deploy
deploy: manifests $(KUSTOMIZE) ## Deploy the operator to the cluster of your current kubeconfig.
	cd config/manager && $(KUSTOMIZE) edit set image controller=$(IMG)
	$(KUSTOMIZE) build config/default | kubectl apply -f -
	cd config/manager && $(KUSTOMIZE) edit set image controller=controller:latest

.PHONY: undeploy
undeploy: $(KUSTOMIZE) ## Remove what make deploy applied: the operator, its CRDs (and with them every MailgunCluster, MailgunMachine, template and identity) and the capmg-system namespace (and with it your Mailgun settings Secret and ConfigMap).
	$(KUSTOMIZE) build config/default | kubectl delete --ignore-not-found=$(ignore-not-found) -f -

##@ Tools

$(LOCALBIN):
	mkdir -p $(LOCALBIN)

# Tools are built from the versions pinned in hack/tools/go.mod.
$(CONTROLLER_GEN): $(TOOLS_MOD) | $(LOCALBIN)
	cd hack/tools && go build -o $(CONTROLLER_GEN) sigs.k8s.io/controller-tools/cmd/controller-gen

$(KUSTOMIZE): $(TOOLS_MOD) | $(LOCALBIN)
	cd hack/tools && go build -o $(KUSTOMIZE) sigs.k8s.io/kustomize/kustomize/v5

$(GOLANGCI_LINT): $(TOOLS_MOD) | $(LOCALBIN)
	cd hack/tools && go build -o $(GOLANGCI_LINT) github.com/golangci/golangci-lint/v2/cmd/golangci-lint

# opm needs these build tags (sqlite JSON1, no gpgme).
$(OPM): hack/opm/go.mod | $(LOCALBIN)
	cd hack/opm && go build -tags "json1 containers_image_openpgp" -o $(OPM) github.com/operator-framework/operator-registry/cmd/opm
