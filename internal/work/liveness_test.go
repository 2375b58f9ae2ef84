package work

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestLiveness: the check fails only where work is due and nothing moves (issue 25.4): never
// for an idle queue, a queue whose workers do not run (a standby), or one that keeps finishing
// items, however slowly; it fails once items have been ready with no item finished for longer
// than After, names the queue, and recovers as soon as an item finishes.
func TestLiveness(t *testing.T) {
	const after = time.Minute
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 26, 11, 0, 0, 0, time.UTC))
	m := NewMetrics(prometheus.NewRegistry())
	live := m.NewLiveness(after, clk)
	q := NewQueue("attempt_to_delete", Options[string]{Metrics: m})
	NewQueue("verify_owner", Options[string]{Metrics: m}) // idle throughout
	step := func(d time.Duration) error {
		clk.Step(d)
		return live.Check()
	}

	// Idle, then items ready while no worker runs (a standby): never a failure.
	for range 5 {
		if err := step(30 * time.Second); err != nil {
			t.Fatalf("idle: %v", err)
		}
	}
	q.Add("a")
	q.Add("b")
	for range 5 {
		if err := step(30 * time.Second); err != nil {
			t.Fatalf("items ready, no worker running: %v", err)
		}
	}

	// Workers run, and every one is stuck on its item: the rest wait.
	release, stop := stuckWorker(q)
	for i := range 2 {
		if err := step(30 * time.Second); err != nil {
			t.Fatalf("stuck for %ds, within After: %v", 30*(i+1), err)
		}
	}
	err := step(31 * time.Second)
	if err == nil || !strings.Contains(err.Error(), "queue attempt_to_delete: 1 items ready") || strings.Contains(err.Error(), "verify_owner") {
		t.Fatalf("stuck for 91s with an item ready: %v; want the stall of attempt_to_delete alone", err)
	}

	// One item finishes: progress, the check passes again.
	release <- struct{}{}
	for q.finished() != 1 {
		time.Sleep(time.Millisecond)
	}
	if err := step(time.Second); err != nil {
		t.Fatalf("after an item finished: %v", err)
	}

	// Checks further apart than After start afresh: a long pause between probes is no stall.
	if err := step(10 * time.Minute); err != nil {
		t.Fatalf("first check after a long pause: %v", err)
	}
	close(release)
	stop()
}

// A queue is checked while it is served, and forgotten once it stops: a fleet's members come
// and go, and the liveness check must not hold every queue they ever had.
func TestLivenessForgetsStoppedQueues(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	live := m.NewLiveness(time.Minute, nil)
	for i := range 100 {
		ctx, cancel := context.WithCancel(context.Background())
		q := NewQueue(fmt.Sprintf("q%d", i), Options[string]{Metrics: m})
		done := make(chan struct{})
		go func() {
			q.Run(ctx, 1, func(context.Context, string) (Outcome, error) { return Done, nil })
			close(done)
		}()
		for !q.serving() {
			time.Sleep(time.Millisecond)
		}
		if err := live.Check(); err != nil {
			t.Fatal(err)
		}
		cancel()
		<-done
	}
	if err := live.Check(); err != nil {
		t.Fatal(err)
	}
	if n := len(m.queues.all()); n != 0 {
		t.Fatalf("%d queues tracked after every one stopped", n)
	}
	if n := len(live.seen); n != 0 {
		t.Fatalf("the liveness check remembers %d stopped queues", n)
	}
}

// TestLivenessLongItemIsProgress (issue 40.2): one item that keeps working for longer than
// After (an orphan owner with 10,000 dependents: a request answered every few milliseconds) is
// progress, not a stall, while its queue has other items ready; once its work stops moving, it
// is a stall. And a scoped Metrics' queues are its own check's, not the parent's.
func TestLivenessLongItemIsProgress(t *testing.T) {
	const after = time.Minute
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC))
	parent := NewMetrics(prometheus.NewRegistry())
	m := parent.Scoped()
	var answered atomic.Uint64
	live := m.NewLiveness(after, clk).WithProgress(answered.Load)
	whole := parent.NewLiveness(after, clk)
	q := NewQueue("attempt_to_orphan", Options[string]{Metrics: m})
	q.Add("owner-with-10000-dependents")
	q.Add("next")
	release, stop := stuckWorker(q)
	for i := range 10 { // 5 minutes of one item, its requests answered
		answered.Add(300)
		clk.Step(30 * time.Second)
		if err := live.Check(); err != nil {
			t.Fatalf("a long item still working, %ds in: %v", 30*(i+1), err)
		}
		if err := whole.Check(); err != nil {
			t.Fatalf("the parent's check sees a scoped queue: %v", err)
		}
	}
	var err error
	for range 3 { // its work stops moving
		clk.Step(30 * time.Second)
		err = live.Check()
	}
	if err == nil || !strings.Contains(err.Error(), "attempt_to_orphan") {
		t.Errorf("an item whose work stopped for 90s: %v, want a stall", err)
	}
	close(release)
	stop()
}

// stuckWorker runs q with one worker that holds the first item until release is sent to or
// closed, and returns once that worker has it and the next item waits, ready; stop ends the
// queue's run and waits for it.
func stuckWorker(q *Queue[string]) (release chan struct{}, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	release = make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		q.Run(ctx, 1, func(context.Context, string) (Outcome, error) {
			<-release
			return Done, nil
		})
	})
	for !q.serving() || q.Len() != 1 {
		time.Sleep(time.Millisecond) // the worker took the first item; the next waits, ready
	}
	return release, func() {
		cancel()
		wg.Wait()
	}
}
