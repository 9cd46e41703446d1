//go:build tools

// Package helm pins the Helm CLI that docs/install.md's tests run
// (make helm builds it into _output/tools/bin/helm). Its own module, built
// with GOWORK=off and kept out of go.work and hack/tools: Helm's k8s.io/*
// versions must not reach the product's modules, nor move the code
// generators pinned in hack/tools.
package helm

import _ "helm.sh/helm/v4/cmd/helm"
