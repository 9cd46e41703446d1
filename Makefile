# nodehealth: a small Makefile in front of hack/ scripts.
#
#   make sandbox   start a local control plane with simulated nodes and nodehealth
#   make test      unit + integration + e2e tests (builds the control plane first)
#   make verify    generated code, gofmt, go mod tidy, go vet, staticcheck, actionlint
#
# Everything is built from Go modules into _output/ (git-ignored).

SHELL := /usr/bin/env bash -o pipefail
GO ?= go
BIN_DIR := $(CURDIR)/_output/bin
# Flags of every go test of make test. make verify runs go vet over every
# package, tests included, so go test's own vet pass (a subset of the same
# checks) would only repeat it on every test package.
TEST_FLAGS ?= -count=1 -vet=off
export NODEHEALTH_BIN_DIR := $(BIN_DIR)
# Every build but the race detector's is static and path-trimmed, as the
# release builds and the images are (release-build, hack/images). Go's build
# cache keys a compile by these settings, so one compile of each package then
# serves make verify's go vet, the tests, make build, the control plane and
# the images: with different settings, the images compiled the product a
# second time (over two minutes of an empty cache). The race detector needs
# cgo: test-unit turns it back on for RACE_PKGS.
#
# Nor does any of them compile DWARF, the debugger's tables: stack traces,
# the race detector's reports and pprof read the runtime's own tables, and
# the release builds and images strip DWARF when they link (-s -w) anyway.
# Writing it took a tenth to a sixth of each compile and link (2026-12-01,
# empty build caches: pkg/nodehealth's dependencies 413 against 375 CPU
# seconds, kubectl-nodehealth's 293 against 243). DEBUG=1 keeps it, for a
# debugger (dlv) on make's binaries and tests.
export CGO_ENABLED := 0
NO_DWARF := $(if $(filter 1,$(DEBUG)),,-gcflags=all=-dwarf=false)
export GOFLAGS := $(strip $(filter-out -trimpath -gcflags=all=-dwarf=false,$(GOFLAGS)) -trimpath $(NO_DWARF))

# Product packages: the main module and the staging modules of go.work.
STAGING_PKGS := nodehealth.io/api/... nodehealth.io/client-go/... nodehealth.io/heartbeat/...
UNIT_PKGS := ./cmd/... ./pkg/... $(STAGING_PKGS)
# The packages whose unit tests run goroutines against each other (the
# controllers, their workqueues and informers, leader election, the
# heartbeat): make test-unit runs them with the race detector. The others
# (flags and configuration, API types, the kubectl plugin) run without it, so
# their dependencies (kustomize, grpc, ...) are not compiled a second time
# with race instrumentation.
RACE_PKGS := ./pkg/nodehealth/... ./pkg/updater/... ./pkg/leaderelection/... ./pkg/coalesce/... \
	./pkg/drain ./pkg/drain/clientset ./pkg/process/... nodehealth.io/heartbeat/...
INTEGRATION_PKGS := ./test/... nodehealth.io/nodehealth/test/bench/results/...
# How long each go test -fuzz target runs in make test.
FUZZTIME ?= 10s
# gotestsum (pinned in hack/tools) runs go test and closes with a count of the
# tests run, so a run that executed nothing is visible.
GOTESTSUM := $(CURDIR)/_output/tools/bin/gotestsum
GOTESTSUM_FORMAT ?= pkgname

.PHONY: all
all: build

# Every build of cmd/ is stamped with its version (pkg/version; printed by
# --version). VERSION defaults to the nearest v* tag, else v0.0.0-<commit>;
# SOURCE_DATE_EPOCH (the commit's time by default) is the build date, so two
# builds of one commit are identical.
VERSION ?= $(shell git describe --tags --match 'v*' --dirty 2>/dev/null || echo v0.0.0-$$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown))
GIT_COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
VERSION_PKG := nodehealth.io/nodehealth/pkg/version
VERSION_LDFLAGS = -X $(VERSION_PKG).gitVersion=$(VERSION) -X $(VERSION_PKG).gitCommit=$(GIT_COMMIT) \
	-X $(VERSION_PKG).buildDate=$(shell date -u -d @$(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ)

.PHONY: build
build: ## Build every binary of cmd/ into _output/bin (version-stamped).
	$(GO) build -ldflags="$(VERSION_LDFLAGS)" -o $(BIN_DIR)/ ./cmd/...

# Per-node binaries run on every node (a sidecar per extension, a DaemonSet),
# so their memory is paid thousands of times: their release builds are
# static, stripped and path-trimmed, and leave grpc's request tracing out
# (docs/benchmarks.md, "Per-node footprint"). extension-heartbeat is built
# without the grpc probe and profiling (nogrpcprobe, noprofiling) and, beside
# it, in full as extension-heartbeat-grpc, which it executes when a grpc probe
# or profiling is configured.
NODE_BINARIES ?= extension-heartbeat update-agent
RELEASE_DIR := $(CURDIR)/_output/release
RELEASE_TAGS := grpcnotrace
# What the lean extension-heartbeat leaves out and how it is compiled, written
# once in hack/heartbeat-lean.conf (hack/images builds its image from the same
# file: the lean build as entrypoint, the full one beside it).
HEARTBEAT_LEAN_CONF := hack/heartbeat-lean.conf
HEARTBEAT_LEAN_TAGS := $(shell sed -n 's/^tags=//p' $(HEARTBEAT_LEAN_CONF))
RELEASE_HEARTBEAT_GCFLAGS := $(addprefix -gcflags=,$(shell sed -n 's/^gcflags=//p' $(HEARTBEAT_LEAN_CONF)))
RELEASE_LDFLAGS := -s -w

.PHONY: release-build
release-build: ## Release builds of the per-node binaries (NODE_BINARIES) into _output/release: static, -trimpath, -s -w.
	@mkdir -p $(RELEASE_DIR)
	for b in $(NODE_BINARIES); do \
		tags=$(RELEASE_TAGS); gcflags=; [ $$b != extension-heartbeat ] || { tags=$(RELEASE_TAGS),$(HEARTBEAT_LEAN_TAGS); gcflags="$(RELEASE_HEARTBEAT_GCFLAGS)"; }; \
		CGO_ENABLED=0 $(GO) build -trimpath -tags=$$tags $$gcflags -ldflags="$(RELEASE_LDFLAGS) $(VERSION_LDFLAGS)" -o $(RELEASE_DIR)/$$b ./cmd/$$b || exit 1; \
	done
	CGO_ENABLED=0 $(GO) build -trimpath -tags=$(RELEASE_TAGS) -ldflags="$(RELEASE_LDFLAGS) $(VERSION_LDFLAGS)" -o $(RELEASE_DIR)/extension-heartbeat-grpc ./cmd/extension-heartbeat

# Container images, built without a container runtime by hack/images (its own
# module, so go-containerregistry never reaches the product's modules): one
# OCI layout per binary with a linux/amd64 + linux/arm64 index, and a
# linux/amd64 tarball, in _output/images, named
# $(REGISTRY)/nodehealth/<binary>:$(TAG): the project's images are
# ghcr.io/nodehealth/<binary>:vX.Y.Z. See docs/images.md.
REGISTRY ?= ghcr.io
TAG ?= $(VERSION)
IMAGE_BINARIES ?= nodehealth-controller,extension-heartbeat,update-operator,update-agent
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
IMAGE_TARBALLS ?= linux/amd64
IMAGE_SOURCE ?= https://github.com/nodehealth/nodehealth
IMAGES_DIR := $(CURDIR)/_output/images

.PHONY: images
images: ## Container images of the deployable binaries into _output/images, no Docker needed (REGISTRY, TAG, VERSION; docs/images.md).
	cd hack/images && GOWORK=off $(GO) run . --repo-root=$(CURDIR) --out=$(IMAGES_DIR) \
		--binaries=$(IMAGE_BINARIES) --platforms=$(IMAGE_PLATFORMS) --tarballs=$(IMAGE_TARBALLS) \
		--registry=$(REGISTRY) --tag=$(TAG) --version=$(VERSION) --revision=$(GIT_COMMIT) \
		--source=$(IMAGE_SOURCE) --source-date-epoch=$(SOURCE_DATE_EPOCH) \
		--tags=$(RELEASE_TAGS) --ldflags="$(RELEASE_LDFLAGS)"

CRANE := $(CURDIR)/_output/tools/bin/crane

.PHONY: crane
crane: $(CRANE) ## Build crane (push, copy, inspect images) from hack/images's pinned go-containerregistry.

$(CRANE): hack/images/go.mod hack/images/go.sum
	cd hack/images && GOWORK=off GOBIN=$(dir $(CRANE)) $(GO) install github.com/google/go-containerregistry/cmd/crane

.PHONY: test-images
test-images: ## Image tests on linux/amd64: reproducible digests, the image config, the entrypoint runs --version.
	cd hack/images && GOWORK=off $(GO) test $(TEST_FLAGS) -timeout=30m . -args -cross=false
	cd hack/images && GOWORK=off $(GO) test $(TEST_FLAGS) ./cmd/...

.PHONY: test-images-cross
test-images-cross: ## The image tests with linux/arm64 beside linux/amd64 (a cold build cache compiles everything again for arm64; make release runs it).
	cd hack/images && GOWORK=off $(GO) test $(TEST_FLAGS) -timeout=30m ./...

.PHONY: plots
plots: ## Draw the PNG plots of docs/benchmarks.md from docs/benchmarks/data/*.json (make verify checks they are current).
	cd hack/plots && GOWORK=off $(GO) run .

.PHONY: test-plots
test-plots: ## Plot generator tests (hand-made fixture).
	cd hack/plots && GOWORK=off $(GO) test $(TEST_FLAGS) ./...

.PHONY: controlplane
controlplane: ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok and the tests' Alertmanager (once).
	hack/build-controlplane.sh
	hack/build-alertmanager.sh

.PHONY: generate
generate: ## Regenerate deepcopy/defaulter/conversion code, clients, CRDs and config docs.
	hack/update-codegen.sh

.PHONY: verify
verify: ## Fail on stale generated code, gofmt, untidy go.mod, go vet, staticcheck or actionlint findings.
	hack/verify.sh

# make test runs two lanes side by side (hack/test-lanes.sh): the integration
# lane (make test-integration, which builds the control plane first) and the
# unit lane (TEST_UNIT_LANE, one target after another, under nice). The
# integration tests mostly wait; the unit lane takes the cores they leave
# idle. The tools both lanes run are built first, once.
TEST_UNIT_LANE := test-unit simulate-fresh test-fuzz-wire test-chart test-monitoring test-images test-plots test-release

.PHONY: test
test: tools helm ## Everything: unit, fresh simulation seeds, fuzz of the wire formats (briefly), chart, alert rules and dashboards, images and release (host platform), plots; beside them integration (E2E=1: and the real-node e2e tests, as root).
	MAKE="$(MAKE)" hack/test-lanes.sh $(TEST_UNIT_LANE)

.PHONY: tools
tools: $(GOTESTSUM)

$(GOTESTSUM): hack/tools/go.mod hack/tools/go.sum
	source hack/lib.sh && nodehealth::tools::install gotest.tools/gotestsum

.PHONY: test-unit
test-unit: tools ## Unit tests (no control plane); RACE_PKGS with the race detector.
	# pkg/nodehealth's simulations run many seeds at once, past go test's
	# default 10 min with the race detector on a loaded machine. A hang still
	# ends, well inside CI's budget.
	CGO_ENABLED=1 $(GOTESTSUM) --format $(GOTESTSUM_FORMAT) -- -race $(TEST_FLAGS) -timeout=25m $(RACE_PKGS)
	# Under the race detector the controller's simulation runs only its smoke
	# seeds, the updater's its fresh regressions (sim.RaceDetector): every
	# seed runs here, without it.
	$(GOTESTSUM) --format $(GOTESTSUM_FORMAT) -- $(TEST_FLAGS) -run '^($(SIM_TEST_controller)|$(SIM_TEST_updater))$$' $(SIM_PKG_controller) $(SIM_PKG_updater)
	$(GOTESTSUM) --format $(GOTESTSUM_FORMAT) -- $(TEST_FLAGS) $$($(GO) list $(UNIT_PKGS) | grep -v -x -F -f <($(GO) list $(RACE_PKGS)))
	# The lean release build's variants of what its build tags replace.
	$(GOTESTSUM) --format $(GOTESTSUM_FORMAT) -- $(TEST_FLAGS) -tags=$(HEARTBEAT_LEAN_TAGS) ./pkg/probe/... ./pkg/process/...

.PHONY: test-fuzz
test-fuzz: ## Run every go test -fuzz target for FUZZTIME (seed corpora run in test-unit).
	FUZZTIME=$(FUZZTIME) hack/fuzz.sh

# make test fuzzes the wire formats' decoders only: a fuzzing build
# instruments every dependency, and the controller's targets (client-go and
# all) cost minutes of compiling on a cold cache for seconds of fuzzing. Their
# seed corpora run in test-unit; make test-fuzz runs them too.
FUZZ_WIRE_DIRS := staging/src/nodehealth.io/api/node/v1alpha1

.PHONY: test-fuzz-wire
test-fuzz-wire: ## Run the go test -fuzz targets of the wire formats (FUZZ_WIRE_DIRS) for FUZZTIME.
	FUZZTIME=$(FUZZTIME) FUZZ_DIRS="$(FUZZ_WIRE_DIRS)" hack/fuzz.sh

# End-to-end tests on one real node (containerd + a kubelet built from the
# control plane's module) beside the kwok nodes, installed with the chart and
# the images (docs/development.md, "Real-node e2e tests"). Needs root;
# hack/realnode-prereqs.sh installs the Debian packages when missing and
# builds kubelet, kube-proxy and the e2e images. Their tests skip unless
# NODEHEALTH_E2E=1: make test-e2e runs them alone, and E2E=1 (make test E2E=1,
# as CI does) runs them in make test-integration, beside the integration
# packages, since both mostly wait. -p=1: one real node at a time.
E2E_PKGS ?= ./test/e2e/ ./test/framework/realnode/
E2E ?= 0

.PHONY: test-integration
# The suites run the commands make build just built (NODEHEALTH_COMMANDS_DIR)
# instead of each linking its own: nineteen links of the same binaries.
test-integration: controlplane build tools helm $(if $(filter 1,$(E2E)),e2e-prereqs) ## Integration tests against the real local control plane (hack/test-integration.sh); E2E=1: the real-node e2e tests beside them (root).
	NODEHEALTH_COMMANDS_DIR=$(BIN_DIR) TEST_FLAGS="$(TEST_FLAGS)" NODEHEALTH_E2E=$(E2E) E2E_PKGS="$(E2E_PKGS)" GOTESTSUM=$(GOTESTSUM) GOTESTSUM_FORMAT=$(GOTESTSUM_FORMAT) OUTPUT_DIR=$(CURDIR)/_output hack/test-integration.sh $(INTEGRATION_PKGS)

.PHONY: e2e-prereqs
e2e-prereqs: controlplane build ## What a real node needs: Debian packages (root), kubelet and kube-proxy, the e2e images.
	hack/realnode-prereqs.sh

.PHONY: test-e2e
test-e2e: e2e-prereqs tools helm ## Real-node e2e tests alone: chart + images on a real kubelet (root; installs containerd, runc, CNI plugins when missing).
	NODEHEALTH_E2E=1 $(GOTESTSUM) --format $(GOTESTSUM_FORMAT) -- $(TEST_FLAGS) -p=1 -timeout=30m $(E2E_PKGS)

# promtool, built once from the Prometheus Go module pinned in test/monitoring
# (its own module, outside go.work; remove_all_sd leaves the service discovery
# SDKs out), unit-tests the alerting rules of deploy/monitoring.
PROMTOOL ?= $(CURDIR)/_output/tools/bin/promtool

.PHONY: promtool
promtool: $(PROMTOOL)

$(PROMTOOL): test/monitoring/go.mod test/monitoring/go.sum
	cd test/monitoring && GOWORK=off $(GO) build -tags remove_all_sd -o $(PROMTOOL) github.com/prometheus/prometheus/cmd/promtool

.PHONY: test-monitoring
test-monitoring: $(PROMTOOL) ## Alert rule tests (promtool) and the dashboards' and rules' PromQL checked against the registered metrics.
	$(PROMTOOL) check rules deploy/monitoring/nodehealth.rules.yaml
	$(PROMTOOL) test rules deploy/monitoring/tests/*.yaml
	cd test/monitoring && GOWORK=off $(GO) test $(TEST_FLAGS) ./...

# The deterministic simulations beside their reference models
# (docs/reliability.md): SIM=controller (the default) is the node-health
# controller's (pkg/nodehealth/simulation_test.go), SIM=updater the update
# operator's and agents' (pkg/updater/operator/simulation_test.go). make test runs
# their regression seeds and a few fixed ones; this runs SEEDS random seeds,
# SIM_PARALLEL at a time (a run mostly waits for goroutines).
SEEDS ?= 100
SIM_PARALLEL ?= 8
SIM ?= controller
SIM_PKG_controller := ./pkg/nodehealth/
SIM_TEST_controller := TestSimulation
SIM_PKG_updater := ./pkg/updater/operator/
SIM_TEST_updater := TestUpdaterSimulation

.PHONY: simulate
simulate: ## Run a simulation (SIM=controller or updater) on SEEDS random seeds, with SIM_FLAGS (e.g. -sim.workers=1); a failing seed prints its replay command.
	$(GO) test $(SIM_PKG_$(SIM)) -count=1 -run '^$(SIM_TEST_$(SIM))$$' -sim.seeds=$(SEEDS) -parallel $(SIM_PARALLEL) -timeout 3h $(SIM_FLAGS)

# Fresh seeds in every make test: drawn from the commit, so a retry of the
# same commit runs the same seeds and the next commit new ones; about a
# minute together on 2 quiet cores, 8 at a time (docs/reliability.md).
SIM_FRESH_SEEDS_controller ?= 40
SIM_FRESH_SEEDS_updater ?= 40
SIM_FRESH_FROM ?= $(shell git rev-parse HEAD 2>/dev/null || echo unversioned)

.PHONY: simulate-fresh
simulate-fresh: ## Fresh seeds of both simulations drawn from the commit (SIM_FRESH_FROM); a failing one prints its replay command.
	@for sim in controller updater; do \
	  echo "=== $$sim simulation: fresh seeds from $(SIM_FRESH_FROM)"; \
	  case $$sim in controller) pkg=$(SIM_PKG_controller) test=$(SIM_TEST_controller) n=$(SIM_FRESH_SEEDS_controller);; \
	    updater) pkg=$(SIM_PKG_updater) test=$(SIM_TEST_updater) n=$(SIM_FRESH_SEEDS_updater);; esac; \
	  $(GO) test $$pkg -count=1 -run "^$$test\$$" -sim.seeds=$$n -sim.fresh=$(SIM_FRESH_FROM) -parallel $(SIM_PARALLEL) -timeout 30m || exit 1; \
	done

.PHONY: simulate-mutants
simulate-mutants: ## Revert each fix in turn (hack/simulate/mutants; SIM=updater: mutants/updater) and count the seeds the simulation needs to find it.
	SIM=$(SIM) hack/simulate/seeds-to-find.sh $(SEEDS)

# REAL_NODES=1 adds one real node (containerd + kubelet; root), after
# hack/realnode-prereqs.sh installed and built what it needs.
REAL_NODES ?= 0

.PHONY: sandbox
sandbox: controlplane build ## Start the sandbox; Ctrl-C stops everything (REAL_NODES=1: plus one real node, root).
	$(if $(filter-out 0,$(REAL_NODES)),hack/realnode-prereqs.sh)
	$(GO) run ./test/sandbox --real-nodes=$(REAL_NODES)

.PHONY: bench
bench: ## Go benchmarks of the product packages (figures go to docs/benchmarks.md).
	$(GO) test -run='^$$' -bench=. -benchmem $(UNIT_PKGS)

# Releases (docs/releasing.md): the plugin archives, the krew manifest, the
# packaged chart, the image layouts (IMAGE_PLATFORMS, REGISTRY; empty
# IMAGE_PLATFORMS for none), an SPDX SBOM per plugin binary and per image and
# platform, the release notes from CHANGELOG.md and SHA256SUMS into
# _output/release/$(VERSION).
PLUGIN_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64

.PHONY: release
release: helm test-images-cross ## Release artifacts of VERSION=vX.Y.Z into _output/release/<version>, after the image tests of both platforms (docs/releasing.md).
	VERSION=$(VERSION) PLUGIN_PLATFORMS="$(PLUGIN_PLATFORMS)" HELM=$(HELM) \
		IMAGE_PLATFORMS="$(IMAGE_PLATFORMS)" IMAGE_BINARIES="$(IMAGE_BINARIES)" REGISTRY="$(REGISTRY)" IMAGE_SOURCE="$(IMAGE_SOURCE)" \
		hack/release.sh

.PHONY: test-release
test-release: helm ## Run the release for the host platform into a temporary folder and check it (checksums, --version, notes, chart, SBOMs, image layouts, images pushed to a loopback registry, signed and verified).
	cd hack/sbom && GOWORK=off $(GO) test $(TEST_FLAGS) ./...
	cd hack/sign && GOWORK=off $(GO) test $(TEST_FLAGS) ./...
	HELM=$(HELM) hack/test-release.sh

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
bench-footprint: controlplane ## Per-node footprint: extension-heartbeat (each probe) and the update agent beside two reference renewers, release builds (BENCH_DURATION=10m).
	$(GO) run ./test/bench/footprint --duration=$(BENCH_DURATION) --results=docs/benchmarks/data/footprint.json

# bench-rollout runs 100,500 unless BENCH_NODES is given; BENCH_ROLLOUT_FLAGS
# passes more flags (e.g. --operator-qps=200; `go run ./test/bench/rollout -h`).
comma := ,
BENCH_ROLLOUT_FLAGS ?=
# Where bench-rollout writes its figures and progress series (make plots).
BENCH_ROLLOUT_RESULTS ?= docs/benchmarks/data/rollout.json

.PHONY: bench-rollout
bench-rollout: controlplane ## Update-operator rollout over kwok nodes, agents played in-process (BENCH_NODES=100,500; minutes).
	$(GO) run ./test/bench/rollout --nodes=$(if $(filter file,$(origin BENCH_NODES)),100$(comma)500,$(BENCH_NODES)) --results=$(BENCH_ROLLOUT_RESULTS) $(BENCH_ROLLOUT_FLAGS)

.PHONY: bench-scale
bench-scale: controlplane build ## Scale benchmark on the real control plane with kwok nodes (BENCH_NODES=100,500,1000; minutes).
	$(GO) run ./test/bench/scale --nodes=$(BENCH_NODES)

# The Helm chart (deploy/charts/nodehealth). Its tests and the Helm CLI are
# separate modules built with GOWORK=off, so Helm's k8s.io/* versions never
# reach the product's modules. test/integration/chart (in test-integration)
# applies the chart's golden render to the real control plane, and
# test/integration/docs runs docs/install.md, which needs the helm binary.
HELM := $(CURDIR)/_output/tools/bin/helm

.PHONY: helm
helm: $(HELM) ## Build the Helm v4 CLI (pinned in hack/tools/helm) into _output/tools/bin.

$(HELM): hack/tools/helm/go.mod hack/tools/helm/go.sum
	cd hack/tools/helm && GOWORK=off $(GO) build -o $(HELM) helm.sh/helm/v4/cmd/helm

.PHONY: test-chart
test-chart: ## Chart tests with the Helm SDK: golden renders, values schema, RBAC identical to deploy/.
	cd deploy/charts/test && GOWORK=off $(GO) test -vet=off -count=1 ./...

.PHONY: update-chart-golden
update-chart-golden: ## Rewrite the chart's golden renders (deploy/charts/test/testdata) after an intended change.
	cd deploy/charts/test && GOWORK=off $(GO) test -vet=off -count=1 -run TestTheChartRendersWhatItsGoldenFilesSay . -update

# The controller's environment in bench-replay and bench-soak: what
# deploy/controller sets for its 256Mi memory limit (Go's defaults: set it empty).
BENCH_CONTROLLER_ENV ?= GOGC=50,GOMEMLIMIT=268435456

.PHONY: bench-replay
bench-replay: build ## Controller CPU/RSS at 5,000 nodes x 10 extensions (5,000 Lease events/s) fed by a replay API server, no etcd (~5 min).
	$(GO) run ./test/bench/replay --controller-env '$(BENCH_CONTROLLER_ENV)'

# bench-soak holds 1,000 nodes x 5 extensions for SOAK_DURATION with 1% of the
# extensions flapping (docs/benchmarks.md, "Soak").
SOAK_DURATION ?= 30m

.PHONY: bench-soak
bench-soak: controlplane build ## Soak: 1,000 kwok nodes x 5 extensions, 1% flapping, for SOAK_DURATION=30m; RSS, goroutines, Node writes over time.
	$(GO) run ./test/bench/scale --nodes=1000 --soak=$(SOAK_DURATION) --controller-env='$(BENCH_CONTROLLER_ENV)'

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
