package process

import (
	"bytes"
	"context"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DefaultWatchInterval is how often the configuration file is read again.
// The kubelet itself takes up to a minute (its sync period plus the ConfigMap
// cache TTL) to project a ConfigMap change into a pod, so polling every 10 s
// adds little delay, costs one small read, and needs no inotify, which
// misses the atomic "..data" symlink swap a ConfigMap volume performs unless
// the watch is re-established on the folder.
const DefaultWatchInterval = 10 * time.Second

// WatchMetrics are the metrics of the configuration file watcher.
type WatchMetrics struct {
	// ReloadFailures counts new file contents that were rejected.
	ReloadFailures prometheus.Counter
	// LastReloadSuccessful is 1 while the file on disk is valid (or
	// unchanged), 0 while a rejected version is on disk.
	LastReloadSuccessful prometheus.Gauge
}

// NewWatchMetrics creates the watcher's metrics and registers them.
func NewWatchMetrics(reg prometheus.Registerer) *WatchMetrics {
	m := &WatchMetrics{
		ReloadFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nodehealth_config_reload_failures_total",
			Help: "Number of times a changed configuration file was rejected (invalid); the running configuration stays in effect.",
		}),
		LastReloadSuccessful: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodehealth_config_last_reload_successful",
			Help: "1 if the configuration file on disk is valid, 0 if it holds a rejected change.",
		}),
	}
	m.LastReloadSuccessful.Set(1)
	if reg != nil {
		reg.MustRegister(m.ReloadFailures, m.LastReloadSuccessful)
	}
	return m
}

// FileWatcher notices changes of a configuration file by reading it
// periodically and comparing the bytes. Reading through the path follows the
// symlinks of a ConfigMap volume, so the atomic swap of "..data" is seen as
// one change from the old content to the new one.
type FileWatcher struct {
	Path     string
	Interval time.Duration
	Clock    clock.WithTicker
	Metrics  *WatchMetrics

	// Check decodes and validates new content. changed=false means the
	// content differs but the effective configuration does not (a comment
	// was edited): nothing to do.
	Check func(data []byte) (changed bool, err error)
	// OnChange is called once, when a valid changed configuration appears.
	OnChange func()

	// last is the content last looked at, valid or not, so that a rejected
	// version is reported once rather than every interval.
	last []byte
}

// NewFileWatcher returns a watcher for path whose current, running content is
// data.
func NewFileWatcher(path string, data []byte, metrics *WatchMetrics, check func([]byte) (bool, error), onChange func()) *FileWatcher {
	return &FileWatcher{
		Path:     path,
		Interval: DefaultWatchInterval,
		Clock:    clock.RealClock{},
		Metrics:  metrics,
		Check:    check,
		OnChange: onChange,
		last:     data,
	}
}

// Run polls until ctx is done or a valid change was reported.
func (w *FileWatcher) Run(ctx context.Context) {
	ticker := w.Clock.NewTicker(w.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
			if w.Poll(ctx) {
				return
			}
		}
	}
}

// Poll reads the file once and acts on a change. It reports whether a valid
// change was found (and OnChange called).
func (w *FileWatcher) Poll(ctx context.Context) bool {
	logger := klog.FromContext(ctx)
	data, err := os.ReadFile(w.Path)
	if err != nil {
		// A missing file is a change too (a ConfigMap key was removed); it
		// is reported once, and the running configuration stays.
		data = nil
		if w.last == nil {
			return false
		}
		w.last = nil
		w.reject(logger, err)
		return false
	}
	if w.last != nil && bytes.Equal(data, w.last) {
		return false
	}
	w.last = data
	changed, err := w.Check(data)
	if err != nil {
		w.reject(logger, err)
		return false
	}
	w.Metrics.LastReloadSuccessful.Set(1)
	if !changed {
		logger.Info("Configuration file changed without changing the effective configuration; nothing to do", "path", w.Path)
		return false
	}
	logger.Info("Configuration file changed; restarting to apply it", "path", w.Path)
	w.OnChange()
	return true
}

func (w *FileWatcher) reject(logger klog.Logger, err error) {
	w.Metrics.ReloadFailures.Inc()
	w.Metrics.LastReloadSuccessful.Set(0)
	logger.Error(err, "Ignoring invalid change of the configuration file; the running configuration stays in effect", "path", w.Path)
}
