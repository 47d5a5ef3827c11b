# Stevedore. `make test` runs every test; `make demo` plays the seeds' inflate scenario in the sandbox.
SHELL         := /bin/bash
GO            ?= go
BIN           := $(CURDIR)/bin
MODULE        := github.com/stevedore-dev/stevedore
K8S_VERSION   := v1.37.2
# the version this tree is (pkg/version.Release): builds without a git tag are $(RELEASE)-dev
RELEASE       := $(shell sed -n 's/^const Release = "\(.*\)"/\1/p' pkg/version/version.go)
VERSION       ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo $(RELEASE)-dev)
COMMIT        ?= $(shell git rev-parse --short HEAD 2>/dev/null)
LDFLAGS       := -X k8s.io/component-base/version.gitVersion=$(K8S_VERSION) \
                 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 \
                 -X $(MODULE)/pkg/version.gitVersion=$(VERSION) -X $(MODULE)/pkg/version.gitCommit=$(COMMIT)
UNIT_PKGS := ./pkg/... ./cmd/... ./config/... ./deploy/... ./hack/testsummary/... ./hack/catalog/...
TEST_FLAGS    ?=
SUMMARY       := $(GO) run ./hack/testsummary

.PHONY: all build test unit integration soak demo bench generate verify verify-deadcode verify-generated verify-catalog lint tools clean image image-binary catalog release publish figures verify-figures kube-binaries test-versions

all: build

## build: the scheduler binary (bin/scheduler), static (CGO_ENABLED=0) as the image ships it
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/scheduler ./cmd/scheduler

$(BIN)/kubectl: go.mod
	CGO_ENABLED=0 $(GO) build -o $(BIN)/kubectl k8s.io/kubernetes/cmd/kubectl

# golangci-lint (make lint), pinned in hack/lint/go.mod
$(BIN)/golangci-lint: hack/lint/go.mod
	cd hack/lint && $(GO) build -o $(BIN)/golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint

# deadcode (make verify: no function that neither the binary nor a test reaches), pinned in hack/lint/go.mod
$(BIN)/deadcode: hack/lint/go.mod
	cd hack/lint && $(GO) build -o $(BIN)/deadcode golang.org/x/tools/cmd/deadcode

# helm (lint and template of charts/stevedore in the tests), pinned in hack/helm/go.mod
$(BIN)/helm: hack/helm/go.mod
	cd hack/helm && $(GO) build -o $(BIN)/helm helm.sh/helm/v3/cmd/helm

# cosign (signs a release) and cyclonedx-gomod (its SBOMs), pinned in hack/signing/go.mod
$(BIN)/cosign: hack/signing/go.mod
	cd hack/signing && $(GO) build -o $(BIN)/cosign github.com/sigstore/cosign/v2/cmd/cosign
$(BIN)/cyclonedx-gomod: hack/signing/go.mod
	cd hack/signing && $(GO) build -o $(BIN)/cyclonedx-gomod github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod

# Kueue's controller manager and its CRDs (a test runs them against a sandbox), pinned in hack/kueue/go.mod
$(BIN)/kueue: hack/kueue/go.mod
	cd hack/kueue && $(GO) build -o $(BIN)/kueue sigs.k8s.io/kueue/cmd/kueue
$(BIN)/kueue-crds: hack/kueue/go.mod
	rm -rf $(BIN)/kueue-crds && cp -r "$$(cd hack/kueue && $(GO) list -m -f '{{.Dir}}' sigs.k8s.io/kueue)/config/components/crd/bases" \
	  $(BIN)/kueue-crds && chmod -R u+w $(BIN)/kueue-crds

# Karpenter's controller with its kwok cloud provider, and the CRD of its node class (a test runs them beside
# Stevedore to follow the migration guide), pinned in hack/karpenter/go.mod
$(BIN)/karpenter-kwok: hack/karpenter/go.mod
	cd hack/karpenter && CGO_ENABLED=0 $(GO) build -o $(BIN)/karpenter-kwok sigs.k8s.io/karpenter/kwok
$(BIN)/karpenter-kwok-crds: hack/karpenter/go.mod
	rm -rf $(BIN)/karpenter-kwok-crds && cp -r "$$(cd hack/karpenter && $(GO) list -m -f '{{.Dir}}' sigs.k8s.io/karpenter)/kwok/apis/crds" \
	  $(BIN)/karpenter-kwok-crds && chmod -R u+w $(BIN)/karpenter-kwok-crds

## test: unit tests (race detector on) and integration/e2e tests against in-process sandboxes, then the hunt for
## pods deleted on their way to a new node, repeated
test: build $(BIN)/kubectl $(BIN)/helm $(BIN)/cosign $(BIN)/cyclonedx-gomod $(BIN)/registry $(BIN)/kueue $(BIN)/kueue-crds $(BIN)/karpenter-kwok $(BIN)/karpenter-kwok-crds kube-binaries
	set -o pipefail; $(GO) test -json -race $(TEST_FLAGS) $(UNIT_PKGS) 2>&1 | $(SUMMARY)
	set -o pipefail; STEVEDORE_BIN=$(BIN)/scheduler KUBECTL=$(BIN)/kubectl HELM=$(BIN)/helm COSIGN=$(BIN)/cosign REGISTRY_BIN=$(BIN)/registry STEVEDORE_KUBE_BINARIES=$(BIN)/kube \
	  STEVEDORE_KUEUE_BIN=$(BIN)/kueue STEVEDORE_KUEUE_CRDS=$(BIN)/kueue-crds \
	  STEVEDORE_KARPENTER_BIN=$(BIN)/karpenter-kwok STEVEDORE_KARPENTER_CRDS=$(BIN)/karpenter-kwok-crds \
	  CGO_ENABLED=0 $(GO) test -json -count=1 -timeout 60m $(TEST_FLAGS) ./test/... 2>&1 | $(SUMMARY)
	set -o pipefail; CGO_ENABLED=0 $(GO) test -json -count=3 -timeout 20m -run '^$(REGISTRATION_HUNT)$$' \
	  ./test/integration/provisioning/ 2>&1 | $(SUMMARY)
	set -o pipefail; (cd hack/promrules && $(GO) test -json ./...) 2>&1 | $(SUMMARY)

REGISTRATION_HUNT := TestBarePodsBoundToNewNodesAreNeverEvicted

## soak: 200 randomized bursts against a sandbox (make test runs 10); prints the slowest wait for a ready node
SOAK_BURSTS ?= 200
soak:
	set -o pipefail; STEVEDORE_BURSTS=$(SOAK_BURSTS) CGO_ENABLED=0 $(GO) test -count=1 -timeout 600m -v \
	  -run TestRandomBurstsBindAsSoonAsTheirNodesAreReady ./test/integration/bursts/ 2>&1 | \
	  grep -E --line-buffered '^\s*(--- |bursts_test.go:[0-9]+: ([0-9]+ bursts|slowest|seed [0-9]+: ))|^(ok|FAIL|PASS)'

## unit: unit tests only
unit:
	set -o pipefail; $(GO) test -json -race $(TEST_FLAGS) $(UNIT_PKGS) 2>&1 | $(SUMMARY)

## integration: integration and e2e tests only
integration: build $(BIN)/kubectl $(BIN)/helm $(BIN)/registry $(BIN)/kueue $(BIN)/kueue-crds $(BIN)/karpenter-kwok $(BIN)/karpenter-kwok-crds kube-binaries
	set -o pipefail; STEVEDORE_BIN=$(BIN)/scheduler KUBECTL=$(BIN)/kubectl HELM=$(BIN)/helm COSIGN=$(BIN)/cosign REGISTRY_BIN=$(BIN)/registry STEVEDORE_KUBE_BINARIES=$(BIN)/kube \
	  STEVEDORE_KUEUE_BIN=$(BIN)/kueue STEVEDORE_KUEUE_CRDS=$(BIN)/kueue-crds \
	  STEVEDORE_KARPENTER_BIN=$(BIN)/karpenter-kwok STEVEDORE_KARPENTER_CRDS=$(BIN)/karpenter-kwok-crds \
	  CGO_ENABLED=0 $(GO) test -json -count=1 -timeout 60m $(TEST_FLAGS) ./test/... 2>&1 | $(SUMMARY)

## test-versions: the version matrix in full: every check on every supported Kubernetes minor (make test runs the
## smoke checks), the gangs where the Workload API is served, and a control-plane upgrade
test-versions: kube-binaries
	set -o pipefail; STEVEDORE_KUBE_BINARIES=$(BIN)/kube STEVEDORE_VERSION_MATRIX=full \
	  CGO_ENABLED=0 $(GO) test -json -count=1 -timeout 60m $(TEST_FLAGS) ./test/versions/ 2>&1 | $(SUMMARY)

## demo: run the sandbox and play the seeds' inflate scenario
demo: build
	$(BIN)/scheduler sandbox --scenario inflate --log-file /tmp/stevedore-demo.log

## bench: every benchmark (the solver's on Karpenter's benchmark input, pkg/solver/testdata/karpenter-bench), written
## to docs/benchmarks-raw.md, with the figures redrawn
bench:
	hack/bench.sh

## tools: build the code generators pinned in hack/tools/go.mod
tools:
	cd hack/tools && $(GO) build -o $(BIN)/ sigs.k8s.io/controller-tools/cmd/controller-gen \
	  k8s.io/code-generator/cmd/client-gen k8s.io/code-generator/cmd/lister-gen k8s.io/code-generator/cmd/informer-gen

## generate: deepcopy, CRDs and typed clients from pkg/apis
generate: tools
	hack/generate.sh $(BIN)

## verify-generated: fail if generated files are not what `make generate` writes
verify-generated: generate
	@git diff --exit-code -- pkg/apis pkg/generated manifests/crds charts/stevedore/crds charts/stevedore-crd/templates || \
	  (echo "generated files are stale: run make generate and commit" >&2; exit 1)
	@test -z "$$(git status --porcelain -- pkg/generated manifests/crds charts/stevedore/crds charts/stevedore-crd/templates)" || \
	  (echo "make generate created files that are not committed:" >&2; git status --porcelain -- pkg/generated manifests/crds charts/stevedore/crds charts/stevedore-crd/templates >&2; exit 1)

## lint: golangci-lint with .golangci.yml (gofmt and import grouping, go vet, staticcheck, errcheck, errorlint,
## unused, unparam, revive, complexity bounds)
lint: $(BIN)/golangci-lint
	$(BIN)/golangci-lint run ./...
	$(BIN)/golangci-lint run --build-tags nosandbox ./cmd/scheduler/

## catalog: regenerate the embedded instance catalog and list of regions (pkg/cloud/catalog) from hack/catalog/data
## and the AWS SDK's partition metadata
catalog:
	$(GO) mod download github.com/aws/aws-sdk-go-v2
	$(GO) run ./hack/catalog -partitions "$$($(GO) list -m -f '{{.Dir}}' github.com/aws/aws-sdk-go-v2)/internal/endpoints/awsrulesfn/partitions.json"

## verify-catalog: fail if the embedded catalog is not what make catalog writes
verify-catalog: catalog
	@git diff --exit-code -- pkg/cloud/catalog/default.json pkg/cloud/catalog/regions.json || \
	  (echo "the embedded catalog is stale: run make catalog and commit" >&2; exit 1)

## verify: lint, dead code, generated files, the embedded catalog and the benchmark figures
verify: lint verify-deadcode verify-generated verify-catalog verify-figures

## verify-deadcode: fail if a function is reached neither from the binary nor from a test (golang.org/x/tools deadcode)
verify-deadcode: $(BIN)/deadcode
	@out="$$($(BIN)/deadcode -test ./...)"; if [ -n "$$out" ]; then echo "$$out"; echo "unreachable functions: remove them" >&2; exit 1; fi

## figures: the SVG figures of docs/benchmarks.md, drawn from docs/benchmarks-raw.md (hack/benchplot, gonum/plot)
figures:
	cd hack/benchplot && $(GO) run . --raw ../../docs/benchmarks-raw.md --karpenter ../../docs/figures/karpenter.json \
	  --out ../../docs/figures

## verify-figures: fail if the figures are not what `make figures` draws from the committed counters
verify-figures: figures
	@git diff --exit-code -- docs/figures || (echo "the figures are stale: run make figures and commit" >&2; exit 1)

# The Kubernetes minors the version matrix runs Stevedore against besides v1.37 (the one it is built on, which every
# test runs in-process): kube-apiserver and kube-controller-manager of each, pinned in hack/kube/<minor>/go.mod.
KUBE_MINORS := 1.34 1.35 1.36

## kube-binaries: kube-apiserver and kube-controller-manager of every minor of KUBE_MINORS, into bin/kube/<minor>/
kube-binaries: $(foreach m,$(KUBE_MINORS),$(BIN)/kube/$(m)/kube-apiserver)

$(BIN)/kube/%/kube-apiserver: hack/kube/%/go.mod hack/kube/%/go.sum
	cd hack/kube/$* && v=$$($(GO) list -m -f '{{.Version}}' k8s.io/kubernetes) && \
	  CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$$v \
	    -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(word 2,$(subst ., ,$*))" \
	    -o $(BIN)/kube/$*/ k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager

## image: the OCI image (bin/stevedore-image.tar, an OCI image layout archive) for IMAGE_ARCHS, built without a
## container engine: static binaries cross-compiled per architecture, assembled by hack/image (go-containerregistry);
## built with -tags nosandbox: the image's scheduler has no `sandbox` command (no etcd, kube-apiserver or kwok in it)
IMAGE_ARCHS ?= amd64 arm64
image:
	set -e; for arch in $(IMAGE_ARCHS); do \
	  $(MAKE) --no-print-directory image-binary IMAGE_ARCH=$$arch IMAGE_BINARY=$(BIN)/linux-$$arch/scheduler; \
	done
	cd hack/image && $(GO) run . --version $(VERSION) --out $(BIN)/stevedore-image.tar \
	  $(foreach arch,$(IMAGE_ARCHS),--binary $(arch)=$(BIN)/linux-$(arch)/scheduler)

## image-binary: IMAGE_ARCH=<arch> IMAGE_BINARY=<path>: the image's scheduler for one architecture, as `make image`
## and the Dockerfile build it (static, -tags nosandbox, stripped)
IMAGE_ARCH ?= amd64
IMAGE_BINARY ?= $(BIN)/linux-$(IMAGE_ARCH)/scheduler
image-binary:
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath -tags nosandbox -ldflags "$(LDFLAGS) -s -w" \
	  -o $(IMAGE_BINARY) ./cmd/scheduler

## release: VERSION=vX.Y.Z: the image archive, the chart, the CRDs, the kustomize base and the Terraform example,
## all naming that version, with release notes from CHANGELOG.md, SBOMs and checksums signed with COSIGN_KEY, in
## dist/<version> (hack/release.sh)
release: $(BIN)/helm $(BIN)/cosign $(BIN)/cyclonedx-gomod
	BIN=$(BIN) VERSION=$(VERSION) hack/release.sh

## publish: REGISTRY=<registry>/<path> VERSION=vX.Y.Z: the release, pushed: the image index (amd64, arm64) as
## <REGISTRY>/scheduler:<version>, the charts as oci://<REGISTRY>/stevedore and oci://<REGISTRY>/stevedore-crd
## (hack/publish.sh; log in first with `helm registry login`), each signed with COSIGN_KEY and the image with its
## SBOMs attested
publish: $(BIN)/helm $(BIN)/cosign $(BIN)/cyclonedx-gomod
	BIN=$(BIN) VERSION=$(VERSION) REGISTRY=$(REGISTRY) hack/publish.sh

## registry: an in-memory OCI registry (go-containerregistry's) for the tests that publish a release
$(BIN)/registry: hack/image/go.mod hack/image/registry/main.go
	cd hack/image && $(GO) build -o $(BIN)/registry ./registry

clean:
	rm -rf $(BIN) dist
