#!/usr/bin/env bash
# All static checks CI runs: generated code is current, gofmt, go vet,
# staticcheck over every product module, actionlint over the workflows.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$NODEHEALTH_ROOT"

failed=0
# Each step ends with the CPU seconds it used: those of the processes it ran
# (nodehealth::cpu_so_far), since it began.
step_name="" step_cpu=0
step() {
  local cpu
  nodehealth::cpu_so_far cpu
  if [[ -n "$step_name" ]]; then
    echo "--- $step_name used $((cpu - step_cpu)) s CPU"
  fi
  step_name=$* step_cpu=$cpu
  if [[ -n "$step_name" ]]; then
    echo "--- $*"
  fi
}

step "gofmt"
unformatted=$(git ls-files -z --cached --others --exclude-standard '*.go' | xargs -0 -r gofmt -l)
if [[ -n "$unformatted" ]]; then
  echo "gofmt would change these files (run 'gofmt -w' on them):" >&2
  echo "$unformatted" >&2
  failed=1
fi

# The repository stands on its own: its docs say the design in their own
# words, and nothing refers to the design notes it was planned from.
step "self-contained docs"
# (A section sign is a design-note section unless an RFC's.)
if refs=$(git grep --untracked -n -I -E '\.\./shared|\bDESIGN\b|§' -- . ':!hack/verify.sh' | grep -v 'RFC [0-9]'); then
  echo "these lines refer to documents outside the repository; say it in docs/ instead:" >&2
  echo "$refs" >&2
  failed=1
fi

# The GitHub Actions workflows: syntax, expressions, the inputs of the
# actions they use, permissions names. -shellcheck= turns off checking the
# run: scripts with shellcheck, which actionlint runs only when it finds one
# on PATH: the result would depend on the machine.
step "actionlint (.github/workflows)"
nodehealth::tools::install github.com/rhysd/actionlint/cmd/actionlint
"$NODEHEALTH_TOOLS_BIN/actionlint" -shellcheck= .github/workflows/*.yaml || failed=1

step "go mod tidy"
for m in "${NODEHEALTH_MODULES[@]}" hack/tools hack/tools/helm deploy/charts/test test/controlplane/kubernetes test/controlplane/etcd test/controlplane/alertmanager "${NODEHEALTH_HACK_MODULES[@]}"; do
  if ! (cd "$m" && GOWORK=off GOFLAGS=-mod=mod go mod tidy -diff >/dev/null 2>&1); then
    echo "go.mod/go.sum of $m are not tidy (run 'cd $m && GOWORK=off go mod tidy'):" >&2
    (cd "$m" && GOWORK=off GOFLAGS=-mod=mod go mod tidy -diff 2>&1 | head -20) >&2 || true
    failed=1
  fi
done

# test/monitoring pins Prometheus (promtool, the PromQL checks): -e, because a
# service discovery dependency that remove_all_sd builds out was long missing
# from the module proxy. Since the proxy serves it (seen 2026-11-23), tidy
# records it, and a go.mod tidied without it fails here.
if ! (cd test/monitoring && GOWORK=off GOFLAGS=-mod=mod go mod tidy -e -diff >/dev/null 2>&1); then
  echo "go.mod/go.sum of test/monitoring are not tidy (run 'cd test/monitoring && GOWORK=off go mod tidy -e')" >&2
  failed=1
fi

# Every package of every product module, through go.work.
pkgs=()
for m in "${NODEHEALTH_MODULES[@]}"; do
  mod=$(cd "$m" && GOWORK=off go list -m)
  pkgs+=("$mod/...")
done

# The control plane modules of older releases (make test-compat) are generated
# from each release's go.mod; only that go.mod is downloaded here.
step "compat control plane modules"
for m in test/controlplane/kubernetes-v1.*/; do
  [[ -f "$m/go.mod" ]] || continue
  v=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" { print $3 }' "$m/go.mod")
  hack/update-controlplane-module.sh --verify "$v" || failed=1
done

# The control plane and the development tools share the compiles of the
# packages they build with the product only if they build them at the
# product's versions (hack/build-controlplane.sh).
modules_of() { sort -u | grep -v '^ *$' || true; }
deps_modules() { # DIR PKG...: the modules (path version) of PKGs' dependencies in DIR's module
  local dir=$1
  shift
  (cd "$dir" && GOWORK=off GOFLAGS=-mod=readonly go list -deps -f '{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}}{{end}}{{end}}' "$@" | modules_of)
}
product_mods=$(go list -deps -test -f '{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}}{{end}}{{end}}' "${pkgs[@]}" | modules_of)
check_shared_versions() { # DIR [GO LIST FLAGS] PKG...
  local dir=$1 theirs differ
  if ! theirs=$(deps_modules "$@"); then
    echo "$dir: go list failed: cannot compare its modules' versions with the product's" >&2
    failed=1
    return
  fi
  if differ=$(join <(echo "$product_mods") <(echo "$theirs") | awk '$2 != $3' | grep .); then
    echo "$dir builds these modules at other versions than the product (module, product's, $dir's), so their" >&2
    echo "compiles are not shared; require the product's versions there (cd $dir && GOWORK=off go get MODULE@VERSION)" >&2
    echo "or upgrade the product's:" >&2
    echo "$differ" >&2
    failed=1
  fi
}
step "control plane and tools modules at the product's versions"
check_shared_versions test/controlplane/kubernetes k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl sigs.k8s.io/kwok/cmd/kwok
check_shared_versions test/controlplane/etcd .
check_shared_versions hack/tools $(sed -n 's/^\t_ "\(.*\)"$/\1/p' hack/tools/tools.go)
# The chart's render tests compile Helm's libraries, which import client-go:
# one module apart from the product's versions (golang.org/x/net, say) and
# every k8s.io package above it compiles again, 146 core-seconds of a cold
# run (measured on 28242ea with go build -debug-actiongraph).
check_shared_versions deploy/charts/test -test ./...
check_shared_versions hack/tools/helm helm.sh/helm/v4/cmd/helm

step "go vet"
go vet "${pkgs[@]}" || failed=1

step "go vet (test/monitoring)"
(cd test/monitoring && GOWORK=off go vet ./...) || failed=1

step "staticcheck"
nodehealth::tools::install honnef.co/go/tools/cmd/staticcheck
"$NODEHEALTH_TOOLS_BIN/staticcheck" "${pkgs[@]}" || failed=1

# Modules of build tooling outside go.work (their dependencies must not reach
# the product's modules): vetted and checked on their own.
step "go vet, staticcheck (${NODEHEALTH_HACK_MODULES[*]})"
for m in "${NODEHEALTH_HACK_MODULES[@]}"; do
  (cd "$m" && GOWORK=off go vet ./... && GOWORK=off "$NODEHEALTH_TOOLS_BIN/staticcheck" ./...) || failed=1
done

step "plots of docs/benchmarks.md current"
(cd hack/plots && GOWORK=off go run . --check) || failed=1

step "generated code"
hack/verify-codegen.sh || failed=1

# The chart's tests are their own module (GOWORK=off, out of go.work); the
# golden renders must match the chart (make update-chart-golden). -vet=off:
# vetting the test computes analysis facts for all of Helm and its k8s.io
# dependencies, many cold minutes for one small test file.
step "chart golden renders"
(cd deploy/charts/test && GOWORK=off go test -vet=off -count=1 -run 'TestTheChartRendersWhatItsGoldenFilesSay' .) || failed=1

# Each mutant reverts one fix (make simulate-mutants); a change to the code
# around it must carry the patch along, or the proof that the simulations
# search silently stops being run.
step "simulation mutants apply"
for p in hack/simulate/mutants/*.patch hack/simulate/mutants/updater/*.patch; do
  git apply --check "$p" || { echo "$p no longer applies to the tree: regenerate it (docs/reliability.md)" >&2; failed=1; }
done

step ""
if [[ $failed != 0 ]]; then
  echo "verify FAILED" >&2
  exit 1
fi
echo "verify passed"
