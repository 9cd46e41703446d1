#!/usr/bin/env bash
# Regenerates the generated files of deploy/monitoring (make generate):
#   metrics.txt        every metric each binary registers (hack/metrics-list),
#                      which the dashboard and alert expressions are checked against;
#   prometheusrule.yaml the PrometheusRule wrapping the plain rules file
#                      nodehealth.rules.yaml, which is the one that is edited.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$NODEHEALTH_ROOT/deploy/monitoring"

go run "$NODEHEALTH_ROOT/hack/metrics-list" > metrics.txt.tmp
mv metrics.txt.tmp metrics.txt

{
  cat <<'HEADER'
# Generated from nodehealth.rules.yaml by hack/update-monitoring.sh (make
# generate); edit that file instead. For the Prometheus Operator: it selects
# PrometheusRules by label (ruleSelector), so add the labels your Prometheus
# selects on, e.g. with kustomize's labels or the Helm chart's values.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: nodehealth
  labels:
    app.kubernetes.io/name: nodehealth
    app.kubernetes.io/component: monitoring
spec:
HEADER
  # The rules file without its comment header, indented under spec.
  sed -n '/^groups:/,$p' nodehealth.rules.yaml | sed -e 's/^\(.\)/  \1/'
} > prometheusrule.yaml
