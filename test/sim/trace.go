package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
)

// Trace is the record of a run, one line a step. Two runs of one seed must
// give the same trace; its Hash is what a determinism check compares.
type Trace struct {
	mu    sync.Mutex
	lines []string
}

// Add appends one line.
func (t *Trace) Add(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	t.mu.Lock()
	t.lines = append(t.lines, line)
	t.mu.Unlock()
}

// Len is the number of lines.
func (t *Trace) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.lines)
}

// String is the trace, a line a step.
func (t *Trace) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}

// Hash is the hex sha256 of String.
func (t *Trace) Hash() string {
	sum := sha256.Sum256([]byte(t.String()))
	return hex.EncodeToString(sum[:])
}

// Tail is the last n lines, for a failure message.
func (t *Trace) Tail(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines[max(0, len(t.lines)-n):], "\n")
}
