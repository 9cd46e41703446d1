# nodehealth: a small Makefile in front of hack/ scripts.
#
#   make sandbox   start a local control plane with simulated nodes and nodehealth
#   make test      unit + integration + e2e tests (builds the control plane first)
#   make verify    generated code, gofmt, go mod tidy, go vet, staticcheck
#
# Everything is built from Go modules into _output/ (git-ignored).

SHELL := /usr/bin/env bash -o pipefail
GO ?= go
BIN_DIR := $(CURDIR)/_output/bin
export NODEHEALTH_BIN_DIR := $(BIN_DIR)

# Product packages: the main module and the staging modules of go.work.
STAGING_PKGS := nodehealth.io/api/... nodehealth.io/client-go/... nodehealth.io/heartbeat/...
UNIT_PKGS := ./cmd/... ./pkg/... $(STAGING_PKGS)
INTEGRATION_PKGS := ./test/...
# How long each go test -fuzz target runs in make test.
FUZZTIME ?= 10s
# gotestsum (pinned in hack/tools) runs go test and closes with a count of the
# tests run, so a run that executed nothing is visible.
GOTESTSUM := $(CURDIR)/_output/tools/bin/gotestsum
GOTESTSUM_FORMAT ?= pkgname

.PHONY: all
all: build

.PHONY: build
build: ## Build every binary of cmd/ into _output/bin.
	$(GO) build -o $(BIN_DIR)/ ./cmd/...

# Per-node binaries run on every node (a sidecar per extension, a DaemonSet),
# so their memory is paid thousands of times: their release builds are
# static, stripped and path-trimmed, and leave grpc's request tracing out
# (docs/benchmarks.md, "Per-node footprint").
NODE_BINARIES ?= extension-heartbeat update-agent
RELEASE_DIR := $(CURDIR)/_output/release
RELEASE_TAGS := grpcnotrace
RELEASE_LDFLAGS := -s -w

.PHONY: release-build
release-build: ## Release builds of the per-node binaries (NODE_BINARIES) into _output/release: static, -trimpath, -s -w.
	@mkdir -p $(RELEASE_DIR)
	for b in $(NODE_BINARIES); do \
		CGO_ENABLED=0 $(GO) build -trimpath -tags=$(RELEASE_TAGS) -ldflags="$(RELEASE_LDFLAGS)" -o $(RELEASE_DIR)/$$b ./cmd/$$b || exit 1; \
	done

.PHONY: controlplane
controlplane: ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok (once).
	hack/build-controlplane.sh

.PHONY: generate
generate: ## Regenerate deepcopy/defaulter/conversion code, clients, CRDs and config docs.
	hack/update-codegen.sh

.PHONY: verify
verify: ## Fail on stale generated code, gofmt, untidy go.mod, go vet or staticcheck findings.
	hack/verify.sh

.PHONY: test
test: controlplane test-unit test-fuzz test-integration ## Everything: unit, fuzz (briefly), integration and e2e.

.PHONY: tools
tools: $(GOTESTSUM)

$(GOTESTSUM): hack/tools/go.mod hack/tools/go.sum
	source hack/lib.sh && nodehealth::tools::install gotest.tools/gotestsum

.PHONY: test-unit
test-unit: tools ## Unit tests (no control plane), with the race detector.
	$(GOTESTSUM) --format $(GOTESTSUM_FORMAT) -- -race -count=1 $(UNIT_PKGS)

.PHONY: test-fuzz
test-fuzz: ## Run every go test -fuzz target for FUZZTIME (seed corpora run in test-unit).
	FUZZTIME=$(FUZZTIME) hack/fuzz.sh

.PHONY: test-integration
test-integration: controlplane tools ## Integration and e2e tests against the real local control plane.
	$(GOTESTSUM) --format $(GOTESTSUM_FORMAT) -- -count=1 -timeout=45m $(INTEGRATION_PKGS)

.PHONY: sandbox
sandbox: controlplane build ## Start the sandbox; Ctrl-C stops everything.
	$(GO) run ./test/sandbox

.PHONY: bench
bench: ## Go benchmarks of the product packages (figures go to docs/benchmarks.md).
	$(GO) test -run='^$$' -bench=. -benchmem $(UNIT_PKGS)

.PHONY: clean
clean: ## Remove everything built (control plane, tools, binaries) and the sandbox state.
	rm -rf _output _sandbox

.PHONY: help
help: ## List the targets.
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

# Benchmarks of the node-health controller (test/bench; results in docs/benchmarks.md).
# Not part of make test. BENCH_NODES is the comma-separated node counts of bench-scale.
BENCH_NODES ?= 100,500,1000
# How long bench-footprint measures after the processes settled.
BENCH_DURATION ?= 10m

.PHONY: bench-controller
bench-controller: ## Go benchmark of the controller's per-event cost on one core (fake clientset, no API server).
	$(GO) test ./test/bench -run='^$$' -bench=. -benchmem -cpu=1

.PHONY: bench-footprint
bench-footprint: controlplane ## Per-node footprint: extension-heartbeat (each probe) beside two reference renewers, release builds (BENCH_DURATION=10m).
	$(GO) run ./test/bench/footprint --duration=$(BENCH_DURATION)

# bench-rollout runs 100,500 unless BENCH_NODES is given; BENCH_ROLLOUT_FLAGS
# passes more flags (e.g. --operator-qps=200; `go run ./test/bench/rollout -h`).
comma := ,
BENCH_ROLLOUT_FLAGS ?=

.PHONY: bench-rollout
bench-rollout: controlplane ## Update-operator rollout over kwok nodes, agents played in-process (BENCH_NODES=100,500; minutes).
	$(GO) run ./test/bench/rollout --nodes=$(if $(filter file,$(origin BENCH_NODES)),100$(comma)500,$(BENCH_NODES)) $(BENCH_ROLLOUT_FLAGS)

.PHONY: bench-scale
bench-scale: controlplane build ## Scale benchmark on the real control plane with kwok nodes (BENCH_NODES=100,500,1000; minutes).
	$(GO) run ./test/bench/scale --nodes=$(BENCH_NODES)

# The oldest supported Kubernetes release (README "Supported clusters"): its
# control plane is built from test/controlplane/kubernetes-v1.30 (generated by
# hack/update-controlplane-module.sh) into _output/compat/<version>/bin, and
# test-compat runs the admission-policy, heartbeat and controller integration
# packages against it. Not part of make test: a cold build of a second control
# plane does not fit the CI budget (docs/development.md, "Compatibility tests").
COMPAT_KUBE_VERSION ?= v1.30.14
COMPAT_BIN_DIR := $(CURDIR)/_output/compat/$(COMPAT_KUBE_VERSION)/bin
COMPAT_PKGS ?= ./test/integration/deploy ./test/integration/extensions ./test/integration/heartbeat ./test/integration/nodehealth

.PHONY: controlplane-compat
controlplane-compat: ## Build the control plane of COMPAT_KUBE_VERSION (v1.30.14) into _output/compat/<version>/bin (once).
	KUBE_VERSION=$(COMPAT_KUBE_VERSION) OUTPUT_BIN=$(COMPAT_BIN_DIR) hack/build-controlplane.sh

.PHONY: test-compat
test-compat: controlplane-compat tools ## Admission-policy, heartbeat and controller integration tests against COMPAT_KUBE_VERSION (not in make test).
	NODEHEALTH_BIN_DIR=$(COMPAT_BIN_DIR) $(GOTESTSUM) --format $(GOTESTSUM_FORMAT) -- -count=1 -timeout=30m $(COMPAT_PKGS)
