package measure

import (
	"context"
	"fmt"
	"strings"
	"time"

	"nodehealth.io/nodehealth/test/framework"
)

// pollInterval is how often WaitUntil checks its condition.
const pollInterval = 100 * time.Millisecond

// WaitUntil polls cond until it holds, timeout passes or ctx ends. When p is
// not nil, p exiting ends the wait too, with the last lines of its log: the
// component under measurement died, and nothing after that is a result.
func WaitUntil(ctx context.Context, timeout time.Duration, p *framework.Process, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if p != nil {
			if exited, err := p.Exited(); exited {
				return fmt.Errorf("%s exited (%v); last lines of %s:\n%s", p.Name, err, p.LogPath, p.LogTail(20))
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollInterval):
		}
	}
	return nil
}

// Columns writes the head of a markdown table with one column per run (its
// heading from heading) to b, and returns the function that writes a row: its
// name, then cell of each run.
func Columns[T any](b *strings.Builder, runs []T, heading func(T) string) (row func(name string, cell func(T) string)) {
	b.WriteString("| |")
	for _, r := range runs {
		fmt.Fprintf(b, " %s |", heading(r))
	}
	b.WriteString("\n|---|")
	for range runs {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	return func(name string, cell func(T) string) {
		fmt.Fprintf(b, "| %s |", name)
		for _, r := range runs {
			fmt.Fprintf(b, " %s |", cell(r))
		}
		b.WriteString("\n")
	}
}
