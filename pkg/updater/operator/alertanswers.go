package operator

import (
	"context"
	"sync"
	"time"
)

// alertAnswers shares the answers of the alert sources among everything
// that reads a policy's alert gates: the start pass and the soak of each of
// the policy's nodes. Asked on their own, N nodes in their soak made N
// identical queries every Options.GateRecheck, each holding a node worker
// for the source's timeout when the source black-holes them. An answer (an
// error too: failing closed stays failing closed) is kept for that long from
// when its query began, and callers that ask while a query runs wait for
// it rather than making their own. Keyed by alertsKey, so two policies
// with the same gates share it too, and an edited matcher is asked anew.
//
// The zero value is ready to use.
type alertAnswers struct {
	mu    sync.Mutex
	byKey map[string]*alertAnswer
}

// alertAnswer is one query of a set of alert gates.
type alertAnswer struct {
	// at is when the query began: what it answered is at least that
	// recent.
	at time.Time
	// keep is how long from at the answer is shared.
	keep time.Duration
	// done is closed once firing and errs are set.
	done   chan struct{}
	firing []firingAlert
	errs   []string
}

// fresh reports whether the answer may still be used at now by a caller
// that needs one asked at notBefore or later.
func (a *alertAnswer) fresh(now, notBefore time.Time) bool {
	return now.Sub(a.at) < a.keep && !a.at.Before(notBefore)
}

// recheckAt is when the answer expires: a caller held by it looks again
// then, so that every caller of one key asks at the same moments and one
// query serves them all.
func (a *alertAnswer) recheckAt() time.Time { return a.at.Add(a.keep) }

// get returns the answer for key, from a query that began less than keep
// before now and not before notBefore (zero: any), or else from query, run
// once however many callers ask meanwhile and kept for keep. A caller whose ctx ends while it waits gets its
// ctx's error as the answer; a query whose own ctx ended is not kept, as
// it says nothing about the source.
func (a *alertAnswers) get(ctx context.Context, key string, now, notBefore time.Time, keep time.Duration, query func(context.Context) ([]firingAlert, []string)) *alertAnswer {
	a.mu.Lock()
	if ans := a.byKey[key]; ans != nil && ans.fresh(now, notBefore) {
		a.mu.Unlock()
		select {
		case <-ans.done:
			return ans
		case <-ctx.Done():
			return &alertAnswer{at: now, keep: keep, errs: []string{"waiting for the alert sources' answer: " + ctx.Err().Error()}}
		}
	}
	if a.byKey == nil {
		a.byKey = map[string]*alertAnswer{}
	}
	// Answers of gates nobody asks about any more are dropped here.
	for k, old := range a.byKey {
		if !old.fresh(now, time.Time{}) && answered(old) {
			delete(a.byKey, k)
		}
	}
	ans := &alertAnswer{at: now, keep: keep, done: make(chan struct{})}
	a.byKey[key] = ans
	a.mu.Unlock()

	ans.firing, ans.errs = query(ctx)
	close(ans.done)
	if ctx.Err() != nil {
		a.mu.Lock()
		if a.byKey[key] == ans {
			delete(a.byKey, key)
		}
		a.mu.Unlock()
	}
	return ans
}

// answered reports whether the answer's query returned.
func answered(a *alertAnswer) bool {
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}
