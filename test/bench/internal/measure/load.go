package measure

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of ds;
// 0 for none.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(float64(len(s))*p/100+0.999999) - 1
	rank = max(0, min(rank, len(s)-1))
	return s[rank]
}

// Parallel runs fn(0..n-1) on workers goroutines and returns the first
// error; after an error or ctx's end it starts no more calls.
func Parallel(ctx context.Context, n, workers int, fn func(i int) error) error {
	idx := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range idx {
				if err := fn(i); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	func() {
		defer close(idx)
		for i := range n {
			select {
			case idx <- i:
			case <-ctx.Done():
				return
			case err := <-errs:
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return ctx.Err()
	}
}
