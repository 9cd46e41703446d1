package main

import (
	"context"
	"sort"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	updatesv1alpha1 "nodehealth.io/api/updates/v1alpha1"
	"nodehealth.io/client-go/clientset/versioned"
	"nodehealth.io/nodehealth/test/bench/results"
)

// timeline watches every shadow for the whole run and records, at the moment
// the watch delivers them, each node's start (spec leaves Idle), the
// operator's health-gate decision (spec back to Idle after MonitoringUpdate),
// the node's healthy end (status back to Idle on the new version: the shadow
// no longer counts toward the limit), and the most nodes ever counted as
// updating (docs/updater.md's definition, written out here independently).
type timeline struct {
	mu          sync.Mutex
	last        map[string]*updatesv1alpha1.BottlerocketShadow
	starts      []time.Time
	gatePassed  []time.Time
	healthyEnds []time.Time
	startsPer   map[string]int
	done        map[string]bool
	updating    map[string]bool
	maxUpdating int

	// limit is maxConcurrentUpdates scaled; pending are the slots freed while
	// the rollout was at its limit, oldest first, that no start has taken yet.
	limit   int
	pending []freed
	// reaction pairs each start that took a pending slot with the healthy end
	// that freed it; gateReaction with the operator's gate decision on it.
	reaction, gateReaction []time.Duration
	gateAt                 map[string]time.Time
}

type freed struct {
	at   time.Time
	node string
}

func watchShadows(ctx context.Context, client versioned.Interface, limit int) (*timeline, error) {
	t := &timeline{last: map[string]*updatesv1alpha1.BottlerocketShadow{}, startsPer: map[string]int{},
		done: map[string]bool{}, updating: map[string]bool{}, limit: limit, gateAt: map[string]time.Time{}}
	c := client.UpdatesV1alpha1().BottlerocketShadows()
	list, err := c.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		t.observe(&list.Items[i], time.Now())
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return c.Watch(ctx, o) },
	})
	if err != nil {
		return nil, err
	}
	go func() {
		<-ctx.Done()
		w.Stop()
	}()
	go func() {
		for ev := range w.ResultChan() {
			if s, ok := ev.Object.(*updatesv1alpha1.BottlerocketShadow); ok && ev.Type != watch.Deleted {
				t.observe(s, time.Now())
			}
		}
	}()
	return t, nil
}

func (t *timeline) observe(s *updatesv1alpha1.BottlerocketShadow, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	prev := t.last[s.Name]
	t.last[s.Name] = s
	if prev != nil {
		if prev.Spec.State == updatesv1alpha1.StateIdle && s.Spec.State == updatesv1alpha1.StateStagedAndPerformedUpdate {
			t.starts = append(t.starts, at)
			t.startsPer[s.Name]++
		}
		if prev.Spec.State == updatesv1alpha1.StateMonitoringUpdate && s.Spec.State == updatesv1alpha1.StateIdle {
			t.gatePassed = append(t.gatePassed, at)
			t.gateAt[s.Name] = at
		}
		if prev.Status.CurrentState == updatesv1alpha1.StateMonitoringUpdate && s.Status.CurrentState == updatesv1alpha1.StateIdle &&
			s.Status.CurrentVersion == newVersion {
			t.healthyEnds = append(t.healthyEnds, at)
		}
	}
	t.done[s.Name] = s.Spec.State == updatesv1alpha1.StateIdle && s.Status.CurrentState == updatesv1alpha1.StateIdle &&
		s.Status.CurrentVersion == newVersion
	before := t.number()
	t.updating[s.Name] = counts(s)
	n := t.number()
	t.maxUpdating = max(t.maxUpdating, n)
	switch {
	case n < before && before+len(t.pending) >= t.limit:
		// A slot freed while every slot was taken (or already owed to a
		// start): the operator should fill it now.
		t.pending = append(t.pending, freed{at: at, node: s.Name})
	case n > before && len(t.pending) > 0:
		f := t.pending[0]
		t.pending = t.pending[1:]
		t.reaction = append(t.reaction, at.Sub(f.at))
		if g, ok := t.gateAt[f.node]; ok {
			t.gateReaction = append(t.gateReaction, at.Sub(g))
		}
	}
}

func (t *timeline) number() int {
	n := 0
	for _, u := range t.updating {
		if u {
			n++
		}
	}
	return n
}

// counts is docs/updater.md's "counts toward maxConcurrentUpdates".
func counts(s *updatesv1alpha1.BottlerocketShadow) bool {
	if s.Spec.State != updatesv1alpha1.StateIdle {
		return true
	}
	switch s.Status.CurrentState {
	case updatesv1alpha1.StateStagedAndPerformedUpdate, updatesv1alpha1.StateRebootedIntoUpdate, updatesv1alpha1.StateMonitoringUpdate,
		updatesv1alpha1.StateErrorReset:
	default:
		return false
	}
	failed, err := time.Parse(time.RFC3339, s.Annotations[updatesv1alpha1.FailedAnnotation])
	return err != nil || s.Spec.StateTransitionTimestamp == nil || failed.Before(s.Spec.StateTransitionTimestamp.Time)
}

// progress is how many shadows exist, how many reported their first status,
// and how many finished the update.
func (t *timeline) progress() (shadows, reporting, done int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for name, s := range t.last {
		if s.Status.CurrentState != "" {
			reporting++
		}
		if t.done[name] {
			done++
		}
	}
	return len(t.last), reporting, done
}

// snapshot is how many nodes finished the update and how many count toward
// maxConcurrentUpdates right now.
func (t *timeline) snapshot() (updated, inProgress int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for name := range t.last {
		if t.done[name] {
			updated++
		}
	}
	return updated, t.number()
}

// sampleProgress samples the timeline every interval from start until the
// returned function is called, which takes a last sample and returns them all.
func sampleProgress(ctx context.Context, t *timeline, nodes int, start time.Time, every time.Duration) func() []results.Sample {
	var (
		mu      sync.Mutex
		samples []results.Sample
	)
	sample := func() {
		updated, inProgress := t.snapshot()
		// Round to milliseconds: the plots need no more, and the file
		// stays readable.
		secs := float64(time.Since(start).Milliseconds()) / 1000
		mu.Lock()
		samples = append(samples, results.Sample{Seconds: secs,
			Values: []float64{float64(updated), float64(inProgress), float64(max(0, nodes-updated-inProgress))}})
		mu.Unlock()
	}
	sample()
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				sample()
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() []results.Sample {
		close(done)
		<-stopped
		sample()
		mu.Lock()
		defer mu.Unlock()
		return samples
	}
}

func sorted(ts []time.Time) []time.Time {
	out := append([]time.Time(nil), ts...)
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}
