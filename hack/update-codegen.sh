#!/usr/bin/env bash
# Regenerates every generated file of the repository in place:
#  - deepcopy, defaulter and conversion functions (k8s.io/code-generator) for
#    every package tagged +k8s:deepcopy-gen / +k8s:defaulter-gen / +k8s:conversion-gen
#    in the api staging module and in pkg/;
#  - typed clientset, listers, informers and apply configurations into the
#    client-go staging module, and CRD manifests (controller-gen) into
#    deploy/crds, for every API package with +genclient types;
#  - the configuration reference in docs/config (hack/update-config-docs.sh).
# The generator versions are pinned by hack/tools/go.mod.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$NODEHEALTH_ROOT"

boilerplate="$NODEHEALTH_ROOT/hack/boilerplate.go.txt"
api_dir=staging/src/nodehealth.io/api

# kube_codegen.sh installs its generators from its own folder into GOBIN; taking
# that folder from the hack/tools module keeps the version pinned there.
export GOBIN="$NODEHEALTH_TOOLS_BIN"
mkdir -p "$GOBIN"
CODEGEN_PKG=$(nodehealth::tools::dir k8s.io/code-generator)
# shellcheck source=/dev/null
source "$CODEGEN_PKG/kube_codegen.sh"

kube::codegen::gen_helpers --boilerplate "$boilerplate" "$api_dir"
kube::codegen::gen_helpers --boilerplate "$boilerplate" pkg

if grep -rqs --include='*.go' -E '^\s*//\s*\+genclient\s*$' "$api_dir"; then
  kube::codegen::gen_client \
    --with-watch \
    --with-applyconfig \
    --output-dir staging/src/nodehealth.io/client-go \
    --output-pkg nodehealth.io/client-go \
    --boilerplate "$boilerplate" \
    "$api_dir"

  nodehealth::tools::install sigs.k8s.io/controller-tools/cmd/controller-gen
  mkdir -p deploy/crds
  # kustomization.yaml is hand-written (it lists the CRDs for kustomize).
  find deploy/crds -name "*.yaml" ! -name kustomization.yaml -delete
  (cd "$api_dir" && "$GOBIN/controller-gen" crd:crdVersions=v1 paths=./... \
    output:crd:artifacts:config="$NODEHEALTH_ROOT/deploy/crds")
fi

if [[ -x hack/update-config-docs.sh ]]; then
  hack/update-config-docs.sh
fi

if [[ -x hack/update-monitoring.sh ]]; then
  hack/update-monitoring.sh
fi

# The chart copies deploy/ (monitoring included), so it runs last.
if [[ -x hack/update-chart.sh ]]; then
  hack/update-chart.sh
fi
