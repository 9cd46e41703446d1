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
  hack/sign
)

# nodehealth::cpu NAME COMMAND... runs COMMAND, then says on stderr how many
# CPU seconds it and every process it waited for used, led by NAME; the
# status is COMMAND's. On 2 busy cores the wall times of steps run side by
# side say little about what each costs; these figures add up (.ci/run's and
# make test's step breakdown, README "Wall times").
nodehealth::cpu() {
  local TIMEFORMAT="=== $1 used %0U s user + %0S s system CPU"
  shift
  time "$@"
}

# nodehealth::cpu_so_far VAR sets VAR to the whole CPU seconds (user +
# system) of every process this shell has waited for so far, for a script
# whose steps are lines of its own rather than one command each
# (hack/verify.sh). Call it directly, not in $(...): a subshell has waited
# for no one yet.
nodehealth::cpu_so_far() {
  local file
  file=$(mktemp)
  times >"$file"
  printf -v "$1" '%s' "$(awk 'NR == 2 { for (i = 1; i <= NF; i++) { split($i, t, /[ms]/); s += t[1] * 60 + t[2] } } END { printf "%d", s }' "$file")"
  rm -f "$file"
}

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
  (cd "$NODEHEALTH_ROOT/hack/tools" && GOWORK=off GOFLAGS="${GOFLAGS:-} -mod=mod" GOBIN="$NODEHEALTH_TOOLS_BIN" go install "$@")
}

# Built binaries of pinned upstream releases (the control plane, kubelet and
# kube-proxy) are kept beside the Go build cache, keyed by everything that
# goes into them, so a fresh clone on a machine that built them before copies
# them instead of linking them again (over a minute for the control plane's
# four large links, even when every package is in the build cache).
# NODEHEALTH_CACHE_DIR moves it; deleting it is always safe.
NODEHEALTH_CACHE_DIR="${NODEHEALTH_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/nodehealth}"

# nodehealth::bincache::key KIND INPUT... prints the cache key of a set of
# binaries: KIND, the Go toolchain, platform and build settings, and the content of INPUTs
# (files) and of the extra words in NODEHEALTH_BINCACHE_EXTRA.
nodehealth::bincache::key() {
  local kind=$1
  shift
  local sum
  sum=$( { go env GOVERSION GOOS GOARCH GOFLAGS CGO_ENABLED; echo "${NODEHEALTH_BINCACHE_EXTRA:-}"; cat "$@"; } | sha256sum | cut -c1-32)
  echo "$kind-$sum"
}

# nodehealth::bincache::restore KEY DIR NAME... copies the binaries NAME of
# KEY into DIR; it fails (copying nothing) unless the cache holds them all.
nodehealth::bincache::restore() {
  local key=$1 dir=$2
  shift 2
  local entry="$NODEHEALTH_CACHE_DIR/bin/$key" n
  [[ -f "$entry/.complete" ]] || return 1
  for n in "$@"; do [[ -x "$entry/$n" ]] || return 1; done
  mkdir -p "$dir"
  for n in "$@"; do cp "$entry/$n" "$dir/$n.tmp" && mv -f "$dir/$n.tmp" "$dir/$n" || return 1; done
  touch "$entry/.complete" # the newest used entries are kept
}

# nodehealth::bincache::save KEY DIR NAME... stores the binaries NAME of DIR
# under KEY, and keeps only the three most recently used entries of KEY's kind
# (KEY up to its last dash), so the cache does not grow with every pin.
# Best effort: a failure leaves the build as it is.
nodehealth::bincache::save() {
  local key=$1 dir=$2
  shift 2
  local root="$NODEHEALTH_CACHE_DIR/bin" n
  local tmp="$root/.tmp-$key-$$"
  mkdir -p "$tmp" || return 0
  for n in "$@"; do cp "$dir/$n" "$tmp/$n" || { rm -rf "$tmp"; return 0; }; done
  touch "$tmp/.complete"
  rm -rf "${root:?}/$key" && mv "$tmp" "$root/$key" || { rm -rf "$tmp"; return 0; }
  local old
  old=$(cd "$root" && ls -d -t "${key%-*}"-*/.complete 2>/dev/null | tail -n +4 | xargs -r -n1 dirname)
  for n in $old; do rm -rf "${root:?}/$n"; done
  return 0
}
