#!/usr/bin/env bash
# Regenerates what the Helm chart deploy/charts/nodehealth takes from the rest
# of the repository, so that nothing in it is a second hand-kept copy:
#   * files/: the kustomize bases' RBAC, admission policies, APF objects, namespaces, CRDs
#     and example heartbeat configurations, verbatim (the chart's templates
#     read them with .Files, so chart and kustomize grant the same rules);
#     the dashboards and PrometheusRules of deploy/monitoring/ when present;
#   * values.schema.json: the chart's own values (hack/chart-schema/
#     values.schema.base.json) plus the configuration Kinds derived from the
#     Go types (hack/chart-schema).
# make generate runs this; make verify fails when the result is stale.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

chart=deploy/charts/nodehealth
files=$chart/files
rm -rf "$files"
copy() { # copy SRC... into files/, keeping the path below deploy/
  for src in "$@"; do
    mkdir -p "$files/$(dirname "${src#deploy/}")"
    cp "$src" "$files/${src#deploy/}"
  done
}
copy deploy/controller/namespaces.yaml deploy/controller/rbac.yaml \
  deploy/extensions/rbac.yaml deploy/extensions/policy.yaml \
  deploy/admission/mutating-taint-on-create/policy.yaml \
  deploy/update-operator/rbac.yaml deploy/update-operator/hooks.yaml deploy/update-operator/policy.yaml \
  deploy/update-agent/namespace.yaml deploy/update-agent/rbac.yaml deploy/update-agent/policy.yaml \
  deploy/uninstall/rbac.yaml \
  deploy/apf/flowcontrol.yaml
for crd in deploy/crds/*.yaml; do
  [[ $(basename "$crd") == kustomization.yaml ]] || copy "$crd"
done
for ex in deploy/examples/*/heartbeat.yaml; do
  copy "$ex"
done
# deploy/monitoring/: the chart renders the PrometheusRule and the Grafana
# dashboards; the plain rules file, the rule tests and the kustomization are
# for the other ways in (docs/monitoring.md) and stay out of the chart.
mkdir -p "$files/monitoring"
if [[ -d deploy/monitoring ]]; then
  find deploy/monitoring -maxdepth 2 -type f \( -path '*/dashboards/*.json' -o -name 'prometheusrule.yaml' \) | sort | while read -r f; do
    copy "$f"
  done
fi
touch "$files/monitoring/.keep"

go run ./hack/chart-schema hack/chart-schema/values.schema.base.json "$chart/values.schema.json"
