//go:build tools

// Package alertmanager pins the Alertmanager the alerts gate's integration
// tests run: hack/build-alertmanager.sh builds its command from this module,
// so its dependency graph (Prometheus' common libraries, memberlist, the UI)
// never enters the product's go.mod.
package alertmanager

import _ "github.com/prometheus/alertmanager/cmd/alertmanager"
