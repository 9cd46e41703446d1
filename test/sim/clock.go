package sim

import (
	"time"

	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
)

// Epoch is when every simulation starts, so that timestamps in traces do not
// depend on the wall clock.
var Epoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// Clock is the simulated time the components are built with (it is a
// clock.WithTicker, checked below): nothing moves it but the driver, one tick at a time.
type Clock struct {
	*testingclock.FakeClock
	tick time.Duration
}

// NewClock returns a clock at Epoch that Tick advances by tick.
func NewClock(tick time.Duration) *Clock {
	return &Clock{FakeClock: testingclock.NewFakeClock(Epoch), tick: tick}
}

// Forward advances the clock by n ticks, one Step each, so that timers due at
// different ticks fire in their order. Firing only sends on the timers'
// channels: a driver that wants the components to act on each tick before the
// next calls Forward(1) and then API.Settle. (Tick is FakeClock's, from
// clock.WithTicker.)
func (c *Clock) Forward(n int) {
	for range n {
		c.Step(c.tick)
	}
}

// Elapsed is the simulated time since Epoch.
func (c *Clock) Elapsed() time.Duration { return c.Since(Epoch) }

var _ clock.WithTicker = &Clock{}
