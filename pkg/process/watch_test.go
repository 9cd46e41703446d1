package process

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"
)

// configMapDir lays out a folder the way the kubelet projects a ConfigMap:
// config.yaml -> ..data/config.yaml, ..data -> ..<timestamp>/. An update
// writes a new timestamped folder and swaps the ..data symlink atomically.
type configMapDir struct {
	t   *testing.T
	dir string
	n   int
}

func newConfigMapDir(t *testing.T, content string) *configMapDir {
	d := &configMapDir{t: t, dir: t.TempDir()}
	d.update(content)
	if err := os.Symlink(filepath.Join("..data", "config.yaml"), filepath.Join(d.dir, "config.yaml")); err != nil {
		t.Fatal(err)
	}
	return d
}

func (d *configMapDir) path() string { return filepath.Join(d.dir, "config.yaml") }

func (d *configMapDir) update(content string) {
	d.n++
	version := filepath.Join(d.dir, "..v"+string(rune('0'+d.n)))
	if err := os.Mkdir(version, 0o755); err != nil {
		d.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(version, "config.yaml"), []byte(content), 0o644); err != nil {
		d.t.Fatal(err)
	}
	tmp := filepath.Join(d.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(version), tmp); err != nil {
		d.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(d.dir, "..data")); err != nil {
		d.t.Fatal(err)
	}
}

func TestFileWatcherPoll(t *testing.T) {
	d := newConfigMapDir(t, "v1")
	var checked []string
	changes := 0
	metrics := NewWatchMetrics(prometheus.NewRegistry())
	w := NewFileWatcher(d.path(), []byte("v1"), metrics, func(data []byte) (bool, error) {
		checked = append(checked, string(data))
		switch string(data) {
		case "invalid":
			return false, errors.New("invalid")
		case "v1-comment":
			return false, nil
		}
		return true, nil
	}, func() { changes++ })
	ctx := context.Background()

	if w.Poll(ctx) || len(checked) != 0 {
		t.Fatalf("unchanged file was checked: %v", checked)
	}

	d.update("invalid")
	if w.Poll(ctx) {
		t.Fatal("invalid file triggered a restart")
	}
	if got := testutil.ToFloat64(metrics.ReloadFailures); got != 1 {
		t.Errorf("reload failures = %v, want 1", got)
	}
	if got := testutil.ToFloat64(metrics.LastReloadSuccessful); got != 0 {
		t.Errorf("last reload successful = %v, want 0", got)
	}
	// The same invalid content is reported once, not every interval.
	w.Poll(ctx)
	if got := testutil.ToFloat64(metrics.ReloadFailures); got != 1 {
		t.Errorf("reload failures = %v after polling the same content again, want 1", got)
	}

	d.update("v1-comment")
	if w.Poll(ctx) || changes != 0 {
		t.Fatal("a change that does not change the configuration triggered a restart")
	}
	if got := testutil.ToFloat64(metrics.LastReloadSuccessful); got != 1 {
		t.Errorf("last reload successful = %v, want 1", got)
	}

	d.update("v2")
	if !w.Poll(ctx) || changes != 1 {
		t.Fatalf("valid change: restart not triggered (changes=%d)", changes)
	}
	if want := []string{"invalid", "v1-comment", "v2"}; len(checked) != len(want) {
		t.Errorf("checked %v, want %v", checked, want)
	}
}

func TestFileWatcherMissingFile(t *testing.T) {
	d := newConfigMapDir(t, "v1")
	metrics := NewWatchMetrics(nil)
	w := NewFileWatcher(d.path(), []byte("v1"), metrics, func([]byte) (bool, error) { return true, nil }, func() { t.Error("restart") })
	if err := os.Remove(filepath.Join(d.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	w.Poll(context.Background())
	w.Poll(context.Background())
	if got := testutil.ToFloat64(metrics.ReloadFailures); got != 1 {
		t.Errorf("reload failures = %v, want 1", got)
	}
}

func TestFileWatcherRunUsesClock(t *testing.T) {
	d := newConfigMapDir(t, "v1")
	clock := clocktesting.NewFakeClock(time.Now())
	changed := make(chan struct{})
	w := NewFileWatcher(d.path(), []byte("v1"), NewWatchMetrics(nil), func([]byte) (bool, error) { return true, nil }, func() { close(changed) })
	w.Clock = clock
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		w.Run(ctx)
		close(done)
	}()
	d.update("v2")
	// Wait until Run created its ticker, then let one interval pass.
	for !clock.HasWaiters() {
		runtime.Gosched()
	}
	clock.Step(DefaultWatchInterval)
	<-changed
	<-done
}
