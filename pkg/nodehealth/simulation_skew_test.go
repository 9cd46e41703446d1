package nodehealth_test

import "time"

// skewStream is xored into the seed for skewFaults' stream: a stream of its
// own, so that a seed runs the schedule it ran before them until a node's
// clock first goes off.
const skewStream = 0x736b6577 // "skew"

// skewFaults sets a node's clock off by up to two hours either way, now and
// then: its extensions' heartbeats write renewTime by that clock from then
// on. docs/controller.md judges freshness by when the controller observed a
// change of renewTime, never by comparing it with its own clock, so the
// model is told nothing: the controller must come to the same decisions.
// A step back can make a renewal write the renewTime of an earlier one;
// neither the controller nor the model then sees a renewal.
func (s *simulation) skewFaults(now time.Time) {
	if s.krng == nil {
		return
	}
	if !s.krng.Chance(0.005) {
		return
	}
	n := s.nodes[s.krng.Intn(len(s.nodes))]
	n.skew = time.Duration(1+s.krng.Intn(7200)) * time.Second
	if s.krng.Chance(0.5) {
		n.skew = -n.skew
	}
	s.trace.Add("t=%s %s's clock is off by %s", s.at(), n.name, n.skew)
}

// renewTime is the instant a heartbeat on n writes as its renewTime.
func (n *simNode) renewTime(now time.Time) time.Time { return now.Add(n.skew) }
