package updater

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func testutilCounter(c prometheus.Collector) float64 { return testutil.ToFloat64(c) }
