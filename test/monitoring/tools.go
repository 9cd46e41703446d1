//go:build tools

// Package tools records the promtool command this module builds
// (make promtool).
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
