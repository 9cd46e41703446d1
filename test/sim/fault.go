package sim

import (
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// FaultKind is how a faulted write fails.
type FaultKind int

const (
	// NoFault: the write is served.
	NoFault FaultKind = iota
	// Conflict refuses the write with 409, as a concurrent writer would.
	Conflict
	// ServerError refuses the write with 500.
	ServerError
	// Timeout refuses the write with 504: it was not applied.
	Timeout
	// LostAnswer applies the write, then answers 504 as Timeout does: the
	// caller cannot tell the two apart, as with a real server.
	LostAnswer
)

func (k FaultKind) String() string {
	return [...]string{"none", "conflict", "server-error", "timeout", "lost-answer"}[k]
}

// Fault makes writes fail. Empty strings match anything.
type Fault struct {
	Verb        string // create, update, patch, delete (an eviction is a create) or list
	Resource    string // e.g. nodes
	Subresource string // e.g. status, eviction
	Name        string
	Kind        FaultKind
	// Count is how many matching writes fail: 0 is one, negative is every
	// one until ClearFaults.
	Count int
}

// Inject queues f; a write is failed by the first queued fault it matches.
func (a *API) Inject(f Fault) {
	if f.Count == 0 {
		f.Count = 1
	}
	a.mu.Lock()
	a.faults = append(a.faults, &f)
	a.mu.Unlock()
}

// ClearFaults drops the queued faults and the fault rate.
func (a *API) ClearFaults() {
	a.mu.Lock()
	a.faults, a.faultRate = nil, 0
	a.mu.Unlock()
}

// ClearEndlessFaults drops the queued faults injected with a negative Count
// (an outage, ended by the caller), keeping those still counting down.
func (a *API) ClearEndlessFaults() {
	a.mu.Lock()
	a.faults = slices.DeleteFunc(a.faults, func(f *Fault) bool { return f.Count < 0 })
	a.mu.Unlock()
}

// SetFaultRate makes each write fail with probability p, of a kind drawn
// evenly from the four. The draw hashes the seed with the write's verb,
// resource, object and how many such writes came before, rather than
// drawing from a shared stream: which writes fail then does not depend on
// how goroutines writing different objects interleave.
func (a *API) SetFaultRate(p float64) {
	a.mu.Lock()
	a.faultRate = p
	a.mu.Unlock()
}

// faultFor is the fault due to this write, counting it. a.mu is held.
func (a *API) faultFor(verb string, gvr schema.GroupVersionResource, sub, ns, name string) FaultKind {
	if k := a.queuedFault(verb, gvr, sub, name); k != NoFault {
		return k
	}
	if a.faultRate <= 0 {
		return NoFault
	}
	h := a.count(fmt.Sprintf("fault/%s/%s/%s/%s/%s", verb, gvr, sub, ns, name))
	if float64(h>>11)/(1<<53) >= a.faultRate {
		return NoFault
	}
	return FaultKind(1 + h%4)
}

// queuedFault is the first queued fault the request matches, counting it.
// An endless fault (an outage) comes before every counted one, whenever it
// was queued: a server that is down applies no write, so a fault queued for
// the next write (an answer lost after the write was applied) waits for the
// first write after the outage (seed 6795418138671613995: a taint applied
// in the middle of an outage that refused every other write). a.mu is held.
func (a *API) queuedFault(verb string, gvr schema.GroupVersionResource, sub, name string) FaultKind {
	match := func(f *Fault) bool {
		m := func(want, got string) bool { return want == "" || want == got }
		return m(f.Verb, verb) && m(f.Resource, gvr.Resource) && m(f.Subresource, sub) && m(f.Name, name)
	}
	for _, f := range a.faults {
		if f.Count < 0 && match(f) {
			return f.Kind
		}
	}
	for i, f := range a.faults {
		if match(f) {
			if f.Count > 0 {
				if f.Count--; f.Count == 0 {
					a.faults = append(a.faults[:i:i], a.faults[i+1:]...)
				}
			}
			return f.Kind
		}
	}
	return NoFault
}

// refusal is the error a fault answers before the write, if any.
func (k FaultKind) refusal(gvr schema.GroupVersionResource, name string) error {
	switch k {
	case Conflict:
		return apierrors.NewConflict(gvr.GroupResource(), name, errors.New("sim: injected conflict"))
	case ServerError:
		return apierrors.NewInternalError(errors.New("sim: injected server error"))
	case Timeout:
		return errTimeout()
	}
	return nil
}

func errTimeout() error {
	return apierrors.NewTimeoutError("request did not complete within requested timeout - context deadline exceeded", 0)
}
