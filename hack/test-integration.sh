#!/usr/bin/env bash
# Runs the integration and e2e packages against the real local control plane
# (make test-integration). Each package starts its own control plane, and
# the tests mostly wait on it, so more packages run at once than there are
# cores: INTEGRATION_PARALLEL packages (go test -p), and beside them the
# faults package as two processes — its compound faults (compound_test.go)
# in one, the others in the second — because it alone takes ten minutes,
# one at a time, which would otherwise be the whole run's wall time. The two
# halves are complementary (-run and -skip of the same list), so a new
# faults test runs in exactly one of them.
#
#   hack/test-integration.sh PACKAGES...
#
# GOTESTSUM, GOTESTSUM_FORMAT and OUTPUT_DIR (the gotestsum JSON files, for
# the list of the slowest tests printed at the end) come from the Makefile.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$NODEHEALTH_ROOT"

: "${GOTESTSUM:?}" "${OUTPUT_DIR:?}"
format=${GOTESTSUM_FORMAT:-pkgname}
parallel=${INTEGRATION_PARALLEL:-2}
faults=nodehealth.io/nodehealth/test/integration/faults
compound=$(sed -n 's/^func \(Test[A-Za-z0-9_]*\)(t \*testing\.T) {$/\1/p' test/integration/faults/compound_test.go | paste -sd'|')
if [[ -z "$compound" ]]; then
  echo "no tests found in test/integration/faults/compound_test.go" >&2
  exit 1
fi

mapfile -t pkgs < <(go list "$@")
others=()
with_faults=0
for p in "${pkgs[@]}"; do
  if [[ "$p" == "$faults" ]]; then with_faults=1; else others+=("$p"); fi
done

mkdir -p "$OUTPUT_DIR"
rm -f "$OUTPUT_DIR"/test-integration-*.json
run() {
  local name=$1
  shift
  "$GOTESTSUM" --format "$format" --jsonfile "$OUTPUT_DIR/test-integration-$name.json" -- -count=1 -timeout=45m "$@"
}

pids=()
if ((with_faults)); then
  run faults-compound -run "^($compound)\$" "$faults" &
  pids+=($!)
  run faults -skip "^($compound)\$" "$faults" &
  pids+=($!)
fi
if ((${#others[@]})); then
  run packages -p "$parallel" "${others[@]}" &
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
