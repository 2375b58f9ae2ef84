package framework

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
)

func TestParallelCallsEachIndexOnce(t *testing.T) {
	for _, tc := range []struct{ n, workers int }{{0, 4}, {1, 4}, {10, 1}, {100, 8}, {5, 0}, {3, 50}} {
		t.Run(fmt.Sprintf("n=%d,workers=%d", tc.n, tc.workers), func(t *testing.T) {
			calls := make([]atomic.Int32, tc.n)
			var running, most atomic.Int32
			err := Parallel(tc.n, tc.workers, func(i int) error {
				r := running.Add(1)
				for {
					m := most.Load()
					if r <= m || most.CompareAndSwap(m, r) {
						break
					}
				}
				calls[i].Add(1)
				running.Add(-1)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for i := range calls {
				if c := calls[i].Load(); c != 1 {
					t.Errorf("f(%d) called %d times", i, c)
				}
			}
			if limit := int32(max(1, tc.workers)); most.Load() > limit {
				t.Errorf("%d calls at once, want at most %d", most.Load(), limit)
			}
		})
	}
}

func TestParallelReportsFailuresAndGoesOn(t *testing.T) {
	var calls atomic.Int32
	boom := errors.New("boom")
	err := Parallel(20, 4, func(i int) error {
		calls.Add(1)
		if i%5 == 0 {
			return fmt.Errorf("item %d: %w", i, boom)
		}
		return nil
	})
	if calls.Load() != 20 {
		t.Errorf("%d calls, want 20: a failure must not stop the others", calls.Load())
	}
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "and 3 more failures") {
		t.Errorf("err = %v, want the first failure and 3 more", err)
	}
	if err := Parallel(3, 2, func(i int) error {
		if i == 1 {
			return boom
		}
		return nil
	}); !errors.Is(err, boom) || err.Error() != boom.Error() {
		t.Errorf("one failure: err = %v, want it as returned", err)
	}
}
