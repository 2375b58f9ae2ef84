package framework

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Parallel calls f(0), ..., f(n-1) on workers goroutines (at least one) and waits for every
// call. Each index is called once; a failing call does not stop the others. It returns the
// first error seen, with the number of other failures.
func Parallel(n, workers int, f func(i int) error) error {
	var (
		next   atomic.Int64
		mu     sync.Mutex
		first  error
		failed int
		wg     sync.WaitGroup
	)
	for range max(1, min(workers, n)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					failed++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if failed > 1 {
		return fmt.Errorf("%w (and %d more failures)", first, failed-1)
	}
	return first
}
