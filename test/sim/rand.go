package sim

import (
	"math/rand/v2"
	"sync"
)

// Rand is a seeded PCG source: the only randomness a simulation may use, so
// that one seed replays one run. It is safe for concurrent use, but draws from
// several goroutines come in their scheduling order; give each deterministic
// consumer its own stream with Fork.
type Rand struct {
	mu   sync.Mutex
	r    *rand.Rand
	seed uint64
}

// NewRand returns a source seeded by seed.
func NewRand(seed uint64) *Rand {
	return &Rand{r: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)), seed: seed}
}

// Seed is the seed the source was made with.
func (r *Rand) Seed() uint64 { return r.seed }

// Uint64 draws a uniformly random uint64.
func (r *Rand) Uint64() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r.Uint64()
}

// Intn draws from [0, n); n must be > 0.
func (r *Rand) Intn(n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r.IntN(n)
}

// Float64 draws from [0, 1).
func (r *Rand) Float64() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r.Float64()
}

// Chance is true with probability p.
func (r *Rand) Chance(p float64) bool { return p > 0 && r.Float64() < p }

// Fork returns an independent stream drawn from r: what the fork's consumer
// draws no longer shifts what r's other consumers see.
func (r *Rand) Fork() *Rand { return NewRand(r.Uint64()) }

// Pick returns a random element of xs, which must not be empty.
func Pick[T any](r *Rand, xs []T) T { return xs[r.Intn(len(xs))] }

// Stream is a fault class's stream of its own, drawn from the seed and the
// class's salt, or nil when the seed does not draw the class (share is the
// share of seeds that do). A class with a stream of its own leaves every
// other draw of the seed as it was: the seeds kept before the class existed
// replay their runs, and switching the class off gives them back.
func Stream(seed, salt uint64, share float64) *Rand {
	r := NewRand(seed ^ salt)
	if !r.Chance(share) {
		return nil
	}
	return r
}
