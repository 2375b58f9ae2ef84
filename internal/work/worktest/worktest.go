// Package worktest helps unit tests of packages that use work queues. It is for tests only.
package worktest

import (
	"context"

	"github.com/cascade-gc/cascade/internal/work"
)

// Drain takes every item waiting in q, marks each Done and returns them in queue order.
func Drain[T comparable](q *work.Queue[T]) []T {
	var out []T
	for q.Len() > 0 {
		q.ProcessNext(context.Background(), func(_ context.Context, item T) (work.Outcome, error) {
			out = append(out, item)
			return work.Done, nil
		})
	}
	return out
}
