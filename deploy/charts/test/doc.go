// Package test checks the Helm chart deploy/charts/nodehealth with the Helm
// v4 SDK: golden renders of the default and the full values, the values
// schema's rejection of typos, and that the chart grants exactly the RBAC of
// the kustomize bases in deploy/.
//
// It is its own module, run with GOWORK=off and kept out of go.work, so that
// Helm's k8s.io/* versions never reach the product's modules (minimal
// version selection across a workspace would raise them). The product's
// integration test test/integration/chart applies the golden render
// testdata/full.yaml to the real control plane.
package test
