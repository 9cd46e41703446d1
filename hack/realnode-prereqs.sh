#!/usr/bin/env bash
# Installs and builds what a real node of the e2e tests needs
# (test/framework/realnode, docs/development.md "Real-node e2e tests"):
#
#   1. Debian packages: containerd, runc, the CNI plugins, iptables, conntrack
#      (apt-get; skipped when every command is already there; needs root);
#   2. kubelet and kube-proxy from the k8s.io/kubernetes module the control
#      plane is built from (test/controlplane/kubernetes), into _output/bin;
#   3. the images the e2e tests load into containerd, into _output/e2e-images:
#      the product's (localhost/nodehealth/<binary>:e2e: a local name, never
#      the project's ghcr.io/nodehealth; the e2e tests set the chart's
#      image.registry to localhost) and the tests' own pause and workload
#      images (nodehealth/e2e-<name>:e2e), linux/$(go env GOARCH) only, as
#      tarballs and OCI layouts;
#   4. e2e-registry (hack/images/cmd/e2e-registry) into _output/bin: the
#      loopback registry the e2e tests push the layouts into and install the
#      chart from by digest.
#
# Each step is a no-op when its result is up to date. Set FORCE=1 to rebuild.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

root=$NODEHEALTH_ROOT
bin="${OUTPUT_BIN:-$root/_output/bin}"
images="${E2E_IMAGES_DIR:-$root/_output/e2e-images}"
kube_module="$root/test/controlplane/kubernetes"

# 1. Packages.
need_pkgs=()
command -v containerd >/dev/null || need_pkgs+=(containerd)
command -v runc >/dev/null || need_pkgs+=(runc)
[[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local ]] || need_pkgs+=(containernetworking-plugins)
command -v iptables >/dev/null || need_pkgs+=(iptables)
command -v conntrack >/dev/null || need_pkgs+=(conntrack)
if ((${#need_pkgs[@]})); then
  if [[ $(id -u) != 0 ]]; then
    echo "real nodes need root: run as root, or apt-get install ${need_pkgs[*]}" >&2
    exit 1
  fi
  start=$(date +%s)
  echo "installing ${need_pkgs[*]} (apt-get)..."
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
  echo "packages installed in $(( $(date +%s) - start ))s"
fi

# 2. kubelet and kube-proxy, stamped like hack/build-controlplane.sh's binaries.
kube_version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" { print $3 }
                    $1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2 }' "$kube_module/go.mod")
minor=$(echo "$kube_version" | cut -d. -f2)
stamp_file="$bin/.realnode-stamp"
stamp=$(cat "$kube_module"/go.mod "$kube_module"/go.sum "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)
if [[ "${FORCE:-0}" == 1 || ! -x "$bin/kubelet" || ! -x "$bin/kube-proxy" || ! -f "$stamp_file" || "$(cat "$stamp_file")" != "$stamp" ]]; then
  mkdir -p "$bin"
  rm -f "$stamp_file"
  ldflags=""
  for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    ldflags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  start=$(date +%s)
  cache_key=$(NODEHEALTH_BINCACHE_EXTRA="$kube_version" nodehealth::bincache::key "realnode-$kube_version" \
    "$kube_module"/go.mod "$kube_module"/go.sum "${BASH_SOURCE[0]}")
  if [[ "${FORCE:-0}" != 1 ]] && nodehealth::bincache::restore "$cache_key" "$bin" kubelet kube-proxy; then
    echo "kubelet and kube-proxy copied from $NODEHEALTH_CACHE_DIR/bin/$cache_key into $bin"
  else
    echo "building kubelet and kube-proxy $kube_version..."
    (cd "$kube_module" && GOWORK=off GOFLAGS="${GOFLAGS:-} -mod=mod" go build -ldflags "$ldflags" -o "$bin/" \
      k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy)
    nodehealth::bincache::save "$cache_key" "$bin" kubelet kube-proxy
    echo "kubelet and kube-proxy built in $(( $(date +%s) - start ))s into $bin"
  fi
  echo "$stamp" > "$stamp_file"
else
  echo "kubelet and kube-proxy in $bin are up to date ($kube_version)"
fi

# 3. Images: always rebuilt (go build's cache makes an unchanged rebuild quick),
# so the tests never run stale product images.
arch=$(go env GOARCH)
start=$(date +%s)
epoch=$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)
build_images() {
  (cd "$root/hack/images" && GOWORK=off go run . --repo-root="$root" --out="$images" \
    --platforms="linux/$arch" --tarballs="linux/$arch" --tag=e2e --version=v0.0.0-e2e \
    --source-date-epoch="$epoch" "$@" >/dev/null)
}
build_images --registry=localhost --binaries=nodehealth-controller,extension-heartbeat,update-operator,update-agent
build_images --registry= --cmd-dir=./test/e2e/images --binaries=e2e-pause,e2e-workload
echo "e2e images built in $(( $(date +%s) - start ))s into $images"

# 4. The e2e tests' registry: built in hack/images' module, whose
# go-containerregistry stays out of the product's go.mod.
(cd "$root/hack/images" && GOWORK=off go build -o "$bin/e2e-registry" ./cmd/e2e-registry)
