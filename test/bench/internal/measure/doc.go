// Package measure is what the benchmark programs of test/bench (scale,
// replay, rollout) measure with: a process's CPU time and memory from /proc,
// the machine's load, a component's /metrics, percentiles of latencies, and a
// bounded pool of workers to create load with.
package measure
