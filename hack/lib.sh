# Shared helpers for hack/ scripts. Source it; do not run it.

NODEHEALTH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Development tools (generators, linters) are built from the pinned hack/tools
# module into this folder, never onto the user's PATH.
NODEHEALTH_TOOLS_BIN="${NODEHEALTH_TOOLS_BIN:-$NODEHEALTH_ROOT/_output/tools/bin}"

# Go modules of the product: the main module and the staging modules (go.work),
# and test/bench/results, the benchmarks' results types that hack/plots reads.
NODEHEALTH_MODULES=(
  .
  staging/src/nodehealth.io/api
  staging/src/nodehealth.io/client-go
  staging/src/nodehealth.io/heartbeat
  test/bench/results
)

# Go modules of build tooling kept out of go.work, so that their dependencies
# never change the product's versions (run with GOWORK=off).
NODEHEALTH_HACK_MODULES=(
  hack/images
  hack/plots
  hack/sbom
)

# nodehealth::tools::dir MODULE prints where the pinned version of MODULE lives
# in the module cache.
nodehealth::tools::dir() {
  # go list -m prints an empty Dir for a module not yet in the module cache
  # (a cold machine), so download it first.
  (cd "$NODEHEALTH_ROOT/hack/tools" && GOWORK=off GOFLAGS=-mod=mod go mod download "$1" &&
    GOWORK=off GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' "$1")
}

# nodehealth::tools::install PKG... builds tool commands of the hack/tools module.
nodehealth::tools::install() {
  mkdir -p "$NODEHEALTH_TOOLS_BIN"
  (cd "$NODEHEALTH_ROOT/hack/tools" && GOWORK=off GOFLAGS=-mod=mod GOBIN="$NODEHEALTH_TOOLS_BIN" go install "$@")
}
