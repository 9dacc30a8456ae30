# cluster-api-provider-mailgun
#
# The two entry points: `make demo` (everything on one machine) and
# `make test` (all tests). Both build the tools they need into bin/.

VERSION ?= 0.1.0
IMAGE_TAG_BASE ?= ghcr.io/capi-mailgun/cluster-api-provider-mailgun
IMG ?= $(IMAGE_TAG_BASE):v$(VERSION)

# Container tool for image targets: the first of docker, podman, buildah.
CONTAINER_TOOL ?= $(shell command -v docker 2>/dev/null || command -v podman 2>/dev/null || command -v buildah 2>/dev/null || echo docker)

SHELL = /usr/bin/env bash -o pipefail
.SHELLFLAGS = -ec

LOCALBIN ?= $(CURDIR)/bin
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen
KUSTOMIZE ?= $(LOCALBIN)/kustomize
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

.PHONY: verify
verify: manifests generate ## Fail if generated files or go.mod are stale, or code is not gofmt'ed.
	go mod tidy
	cd hack/tools && go mod tidy
	cd hack/controlplane && go mod tidy
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	@git diff --exit-code -- . || { echo "Generated files are stale: run 'make manifests generate' and 'go mod tidy', and commit the result."; exit 1; }
	@test -z "$$(git status --porcelain --untracked-files=all -- config api)" || { git status --porcelain -- config api; echo "Untracked generated files."; exit 1; }

.PHONY: controlplane
controlplane: ## Build the test control plane (kube-apiserver + etcd) into bin/k8s/.
	hack/build-controlplane.sh

.PHONY: test
test: vet controlplane ## Run all tests (unit and against a real control plane), with the race detector.
	KUBEBUILDER_ASSETS="$$(hack/build-controlplane.sh)" go test -race -count=1 ./...

.PHONY: demo
demo: controlplane ## Run the provider end to end on this machine and print the email it sends.
	KUBEBUILDER_ASSETS="$$(hack/build-controlplane.sh)" go run ./hack/demo $(DEMO_ARGS)

##@ Build

.PHONY: build
build: manifests generate fmt vet ## Build the manager binary.
	go build -o $(LOCALBIN)/manager .

.PHONY: run
run: manifests generate fmt vet ## Run the manager against the cluster of your current kubeconfig.
	go run . --metrics-bind-address=0 $(RUN_ARGS)

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
undeploy: $(KUSTOMIZE) ## Remove the operator.
	$(KUSTOMIZE) build config/default | kubectl delete --ignore-not-found=$(ignore-not-found) -f -

##@ Tools

$(LOCALBIN):
	mkdir -p $(LOCALBIN)

# Tools are built from the versions pinned in hack/tools/go.mod.
$(CONTROLLER_GEN): $(TOOLS_MOD) | $(LOCALBIN)
	cd hack/tools && go build -o $(CONTROLLER_GEN) sigs.k8s.io/controller-tools/cmd/controller-gen

$(KUSTOMIZE): $(TOOLS_MOD) | $(LOCALBIN)
	cd hack/tools && go build -o $(KUSTOMIZE) sigs.k8s.io/kustomize/kustomize/v5
