package nodehealth

import (
	"fmt"
	"math"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
)

// EventEvictionDeferred says that a node's eviction came due and waits for
// its turn of the cluster-wide eviction rate, and when the turn comes: once
// per wait, when the node takes its turn.
const EventEvictionDeferred = "EvictionDeferred"

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

// deferred tells the operator that the node's escalation waits for its turn,
// in an Event on the node. Called once per turn taken, when the turn lies
// ahead: the retries of the wait take none and say nothing.
func (c *Controller) deferred(name string, now, turn time.Time) {
	if c.opts.DryRun {
		return
	}
	node, err := c.nodeLister.Get(name)
	if err != nil {
		return // gone: nobody to tell
	}
	action := "evicting its pods"
	if c.opts.Eviction.Mode == EvictionModeNoExecute {
		action = fmt.Sprintf("adding taint %s:NoExecute", c.opts.TaintKey)
	}
	c.recorder.Eventf(node, v1.EventTypeWarning, EventEvictionDeferred,
		"A required extension failed %s ago; %s waits for the node's turn of the cluster-wide eviction rate (eviction.nodesPerSecond %g: one node every %s), at %s, in %s",
		c.opts.Eviction.Timeout, action, evictionRate(c.opts.Eviction), c.evictionTurns.every, turn.UTC().Format(time.RFC3339), turn.Sub(now).Round(time.Second))
}

// nodesWaitingForTurn counts the nodes holding a turn of the eviction rate
// whose instant has not come (nodehealth_eviction_turn_waiting_nodes).
func (c *Controller) nodesWaitingForTurn() float64 {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	waiting := 0
	for _, st := range c.nodes {
		if st.escalationTurn.After(now) {
			waiting++
		}
	}
	return float64(waiting)
}
