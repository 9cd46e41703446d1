#!/usr/bin/env bash
# Regenerates the configuration reference docs/config/<Kind>.md from the Go
# doc comments and the defaulting of nodehealth.io/api/config/v1alpha1
# (hack/config-docs). docs/config/README.md is written by hand and kept.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
go run ./hack/config-docs docs/config
