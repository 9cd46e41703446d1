#!/usr/bin/env bash
# Builds the local test control plane from Go modules into _output/bin:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and kwok.
#
# Nothing is downloaded but Go modules. The binaries are rebuilt only when a pin
# changes (the go.mod/go.sum of the tool modules, the kwok version or this script);
# otherwise this is a no-op. Set FORCE=1 to rebuild anyway.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin="${OUTPUT_BIN:-$root/_output/bin}"
cp_dir="$root/test/controlplane"

KUBE_VERSION=v1.37.1
KWOK_VERSION=v0.8.0

stamp_file="$bin/.controlplane-stamp"
stamp=$(cat "$cp_dir"/kubernetes/go.mod "$cp_dir"/kubernetes/go.sum \
             "$cp_dir"/etcd/go.mod "$cp_dir"/etcd/go.sum "$cp_dir"/etcd/main.go \
             "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)
stamp="$stamp kwok=$KWOK_VERSION"

want=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok)
have_all=1
for b in "${want[@]}"; do [[ -x "$bin/$b" ]] || have_all=0; done
if [[ "${FORCE:-0}" != 1 && $have_all == 1 && -f "$stamp_file" && "$(cat "$stamp_file")" == "$stamp" ]]; then
  echo "control plane binaries in $bin are up to date ($KUBE_VERSION, kwok $KWOK_VERSION)"
  exit 0
fi

mkdir -p "$bin"
rm -f "$stamp_file"
start=$(date +%s)

# The same version stamps the upstream release build sets (hack/lib/version.sh),
# so "kubectl version" and /version report v1.37.1.
minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
ldflags=""
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
  ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

export GOFLAGS="${GOFLAGS:-} -mod=mod -trimpath"
export GOWORK=off

echo "building etcd (go.etcd.io/etcd/server/v3 via etcdmain)..."
(cd "$cp_dir/etcd" && go build -o "$bin/etcd" .)

echo "building kube-apiserver, kube-controller-manager, kube-scheduler, kubectl $KUBE_VERSION (first build takes ~10-20 min on 2 cores)..."
(cd "$cp_dir/kubernetes" && go build -ldflags "$ldflags" -o "$bin/" \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler \
  k8s.io/kubernetes/cmd/kubectl)

echo "building kwok $KWOK_VERSION..."
GOBIN="$bin" go install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"

echo "$stamp" > "$stamp_file"
echo "control plane built in $(( $(date +%s) - start ))s into $bin"
