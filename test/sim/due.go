package sim

import (
	"slices"
	"sync"
	"time"
)

// DueItems are a work queue's delayed items (AddAfter, a rate-limited
// retry), each due at an instant of a fake clock, that the caller moves into
// the queue when it chooses: the workqueue's own delaying goroutine moves a
// due item at a moment of real time a test cannot see, so that what a test
// or a simulated second finds queued would depend on the machine's load.
// Safe for concurrent use; the zero value is ready.
type DueItems struct {
	mu  sync.Mutex
	due map[string]time.Time
}

// Add makes item due at at. An item already due sooner keeps its instant,
// as the workqueue keeps the earlier of two deadlines.
func (d *DueItems) Add(item string, at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.due == nil {
		d.due = map[string]time.Time{}
	}
	if cur, ok := d.due[item]; !ok || at.Before(cur) {
		d.due[item] = at
	}
}

// Take removes the items due by now and returns them in name order.
func (d *DueItems) Take(now time.Time) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var ready []string
	for item, at := range d.due {
		if !at.After(now) {
			ready = append(ready, item)
			delete(d.due, item)
		}
	}
	slices.Sort(ready)
	return ready
}

// At is when item is due, if it waits.
func (d *DueItems) At(item string) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	at, ok := d.due[item]
	return at, ok
}
