package work

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"
)

// logLines captures what a logger at default verbosity prints.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) ctx() context.Context {
	return klog.NewContext(context.Background(), funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, args)
	}, funcr.Options{Verbosity: 0}))
}

func fastQueue(name string, m *Metrics) *Queue[string] {
	return NewQueue(name, Options[string]{
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, time.Millisecond),
		Metrics:     m,
	})
}

// TestFailuresAreCountedAndLoggedOncePerItem: an item failing three times is counted three
// times, logged once at default verbosity when it first fails and once when it recovers; an
// item that never fails logs nothing.
func TestFailuresAreCountedAndLoggedOncePerItem(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	q := fastQueue("test_queue", m)
	var logs logLines
	ctx := logs.ctx()

	attempts := map[string]int{}
	process := func(_ context.Context, item string) (Outcome, error) {
		attempts[item]++
		if item == "bad" && attempts[item] <= 3 {
			return Retry, errors.New("the server is on fire")
		}
		return Done, nil
	}
	q.Add("bad")
	q.Add("good")
	for attempts["bad"] < 4 || attempts["good"] < 1 {
		if !q.ProcessNext(ctx, process) {
			t.Fatal("queue shut down")
		}
	}
	if got := testutil.ToFloat64(m.Errors.WithLabelValues("test_queue")); got != 3 {
		t.Errorf("errors counted = %v, want 3", got)
	}
	if attempts["good"] != 1 || attempts["bad"] != 4 {
		t.Errorf("attempts = %v, want good once, bad four times", attempts)
	}
	var failed, recovered int
	for _, l := range logs.lines {
		switch {
		case strings.Contains(l, "Work item failed;") && strings.Contains(l, `"item"="bad"`) && strings.Contains(l, "on fire"):
			failed++
		case strings.Contains(l, "succeeded after failing") && strings.Contains(l, `"item"="bad"`):
			recovered++
		default:
			t.Errorf("unexpected log line at default verbosity: %s", l)
		}
	}
	if failed != 1 || recovered != 1 {
		t.Errorf("logged %d failures and %d recoveries at default verbosity, want 1 and 1:\n%s", failed, recovered, strings.Join(logs.lines, "\n"))
	}
	if q.Len() != 0 {
		t.Errorf("queue holds %d items after Done, want 0", q.Len())
	}
}

// TestOutcomes: Retry without an error re-adds silently; WaitForSync re-adds after SyncWait
// without counting a failure; Done forgets.
func TestOutcomes(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	q := fastQueue("outcomes", m)
	var logs logLines
	ctx := logs.ctx()
	seen := 0
	outcomes := []Outcome{Retry, WaitForSync, Done}
	start := time.Now()
	for seen < len(outcomes) {
		if seen == 0 {
			q.Add("x")
		}
		q.ProcessNext(ctx, func(context.Context, string) (Outcome, error) {
			out := outcomes[seen]
			seen++
			return out, nil
		})
	}
	if waited := time.Since(start); waited < SyncWait {
		t.Errorf("WaitForSync re-added the item after %v, want at least %v", waited, SyncWait)
	}
	if got := testutil.ToFloat64(m.Errors.WithLabelValues("outcomes")); got != 0 {
		t.Errorf("errors counted = %v, want 0", got)
	}
	if len(logs.lines) != 0 {
		t.Errorf("logged %q, want nothing", logs.lines)
	}
}

// TestRunStopsWithContext: Run returns once ctx ends, after every worker finished its item.
func TestRunStopsWithContext(t *testing.T) {
	q := fastQueue("run", nil)
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	processed := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		q.Run(ctx, 3, func(context.Context, string) (Outcome, error) {
			mu.Lock()
			processed++
			mu.Unlock()
			return Done, nil
		})
	}()
	for _, item := range []string{"a", "b", "c", "d"} {
		q.Add(item)
	}
	deadline := time.After(10 * time.Second)
	for {
		mu.Lock()
		n := processed
		mu.Unlock()
		if n == 4 {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("processed %d of 4 items", n)
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after ctx ended")
	}
}

// TestAddAfter: an item added for later is processed once the queue's clock passed the delay,
// not before. The queue's goroutines run in a synctest bubble: synctest.Wait returns once they
// have handled the clock's step (they wait on the clock again), so "not before" is checked, not
// slept on.
func TestAddAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		q := NewQueue("later", Options[string]{Clock: clk})
		defer q.ShutDown()
		q.AddAfter("a", time.Minute)
		clk.Step(59 * time.Second)
		synctest.Wait()
		if n := q.Len(); n != 0 {
			t.Fatalf("%d items ready before the delay", n)
		}
		clk.Step(time.Second)
		synctest.Wait()
		if q.Len() == 0 {
			t.Fatal("the item never became ready after its delay")
		}
	})
}

// TestDefaultRateLimiterCapped: however often an item failed, its next try is at most
// MaxBackoff away (client-go's default grows to 1,000 s); the first retries stay fast.
func TestDefaultRateLimiterCapped(t *testing.T) {
	rl := DefaultRateLimiter[string]()
	if d := rl.When("x"); d > 10*time.Millisecond {
		t.Errorf("first retry after %v, want 5ms", d)
	}
	var last time.Duration
	for range 40 {
		last = rl.When("x")
	}
	if last != MaxBackoff {
		t.Errorf("after 41 failures: %v, want the cap %v", last, MaxBackoff)
	}
	rl.Forget("x")
	if d := rl.When("x"); d > 10*time.Millisecond {
		t.Errorf("after Forget: %v, want 5ms again", d)
	}
}
