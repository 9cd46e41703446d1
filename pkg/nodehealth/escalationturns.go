package nodehealth

import (
	"math"
	"sync"
	"time"
)

// escalationTurns is the cluster-wide eviction rate limit
// (eviction.nodesPerSecond, burst 1): a token bucket on the controller's
// clock that hands out turns. A node whose escalation comes due takes the
// next turn and waits for it in the eviction queue rather than in the
// eviction worker, so the drains of escalated nodes go on meanwhile, and the
// wait runs on the injected clock (client-go's token bucket waits by the
// wall clock whatever clock it is given).
type escalationTurns struct {
	mu    sync.Mutex
	every time.Duration
	// next is the earliest instant the next turn can have.
	next time.Time
}

func newEscalationTurns(nodesPerSecond float64) *escalationTurns {
	return &escalationTurns{every: time.Duration(math.Round(float64(time.Second) / nodesPerSecond))}
}

// take hands out the next turn: now, if the bucket has its token, else the
// instant it has one again. Turns are spaced by at least 1/rate.
func (t *escalationTurns) take(now time.Time) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	turn := now
	if t.next.After(now) {
		turn = t.next
	}
	t.next = turn.Add(t.every)
	return turn
}
