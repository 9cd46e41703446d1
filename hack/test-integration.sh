#!/usr/bin/env bash
# Runs the integration and e2e packages against the real local control plane
# (make test-integration). Each package starts its own control plane, and the
# tests mostly wait on it, so more of them run at once than there are cores:
#
#   - INTEGRATION_PARALLEL packages at a time (go test -p), the slowest
#     first;
#   - beside them, the faults package in FAULTS_SHARDS processes. Its tests
#     restart etcd and the API server, so within one process they run one at
#     a time, ten minutes in all; each shard starts its own control plane and
#     runs every FAULTS_SHARDS-th of its tests, in the order of its files, so
#     every test runs in exactly one shard, a new one included;
#   - with NODEHEALTH_E2E=1 (make test E2E=1, as root), the real-node e2e
#     packages (E2E_PKGS, one at a time: one real node) in a process of their
#     own beside the others, instead of skipping. They are the run's other
#     long pole, and they mostly wait on the kubelet.
#
#   hack/test-integration.sh PACKAGES...
#
# GOTESTSUM, GOTESTSUM_FORMAT, TEST_FLAGS (go test's flags) and OUTPUT_DIR
# (the gotestsum JSON files, for the list of the slowest tests printed at the
# end) come from the Makefile.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$NODEHEALTH_ROOT"

: "${GOTESTSUM:?}" "${OUTPUT_DIR:?}"
format=${GOTESTSUM_FORMAT:-pkgname}
parallel=${INTEGRATION_PARALLEL:-2}
shards=${FAULTS_SHARDS:-3}
faults=nodehealth.io/nodehealth/test/integration/faults
e2e=0
if [[ "${NODEHEALTH_E2E:-0}" == 1 ]]; then
  e2e=1
  mapfile -t e2e_pkgs < <(go list ${E2E_PKGS:?NODEHEALTH_E2E=1 needs E2E_PKGS})
fi

# The slowest packages first (seconds on 2 cores in a warm CI run,
# 2026-11-25): go test starts packages in the order given, and a long one
# started last would run alone at the end. The rest follow in name order.
slow_first=(limits rollout updater chart agent nodehealth) # 94 94 89 66 60 53
mapfile -t listed < <(go list "$@")
pkgs=()
for name in "${slow_first[@]}"; do
  p=nodehealth.io/nodehealth/test/integration/$name
  if printf '%s\n' "${listed[@]}" | grep -qxF "$p"; then
    pkgs+=("$p")
  fi
done
for p in "${listed[@]}"; do
  printf '%s\n' "${pkgs[@]}" | grep -qxF "$p" || pkgs+=("$p")
done
others=()
with_faults=0
for p in "${pkgs[@]}"; do
  if [[ "$p" == "$faults" ]]; then
    with_faults=1
  elif ((e2e)) && printf '%s\n' "${e2e_pkgs[@]}" | grep -qxF "$p"; then
    : # in the e2e process
  else
    others+=("$p")
  fi
done

mkdir -p "$OUTPUT_DIR"
rm -f "$OUTPUT_DIR"/test-integration-*.json
run() {
  local name=$1
  shift
  "$GOTESTSUM" --format "$format" --jsonfile "$OUTPUT_DIR/test-integration-$name.json" -- ${TEST_FLAGS:--count=1} -timeout=45m "$@"
}

pids=()
if ((with_faults)); then
  # From the sources, not go test -list, whose TestMain would start a
  # control plane; gofmt keeps every test's declaration on this one form.
  mapfile -t tests < <(sed -n 's/^func \(Test[A-Za-z0-9_]*\)(t \*testing\.T) {$/\1/p' test/integration/faults/*_test.go)
  if ((${#tests[@]} == 0)); then
    echo "no tests found in test/integration/faults" >&2
    exit 1
  fi
  for ((s = 0; s < shards; s++)); do
    shard=()
    for ((i = s; i < ${#tests[@]}; i += shards)); do shard+=("${tests[i]}"); done
    ((${#shard[@]})) || continue
    run "faults-$((s + 1))" -run "^($(IFS='|'; echo "${shard[*]}"))\$" "$faults" &
    pids+=($!)
  done
fi
if ((e2e)); then
  NODEHEALTH_E2E=1 run e2e -p=1 "${e2e_pkgs[@]}" &
  pids+=($!)
fi
if ((${#others[@]})); then
  NODEHEALTH_E2E=0 run packages -p "$parallel" "${others[@]}" &
  pids+=($!)
fi

failed=0
for pid in "${pids[@]}"; do
  wait "$pid" || failed=1
done

echo "--- the slowest integration tests (where the minutes go):"
cat "$OUTPUT_DIR"/test-integration-*.json > "$OUTPUT_DIR/test-integration.json"
"$GOTESTSUM" tool slowest --jsonfile "$OUTPUT_DIR/test-integration.json" --threshold 20s

if ((failed)); then
  echo "test-integration FAILED" >&2
  exit 1
fi
