package work

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

func newTestRQueue(clk *clocktesting.FakeClock, series *queueSeries) *rqueue[string] {
	return newRQueue[string](clk, workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute), series)
}

var realClock = clock.RealClock{}

// wantLen fails the test unless q holds want ready items; format says what is expected, with a
// %d for what it holds.
func wantLen(t *testing.T, q *rqueue[string], want int, format string) {
	t.Helper()
	if n := q.Len(); n != want {
		t.Fatalf(format, n)
	}
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestRQueueOnceAndNeverTwiceAtOnce: an item added twice is given out once; added again while
// a worker processes it, it is not given to another worker, and is ready again once Done.
func TestRQueueOnceAndNeverTwiceAtOnce(t *testing.T) {
	q := newTestRQueue(clocktesting.NewFakeClock(epoch), nil)
	q.Add("a")
	q.Add("a")
	q.Add("b")
	wantLen(t, q, 2, "Len = %d after adding a twice and b, want 2")
	a, _ := q.Get()
	if a != "a" {
		t.Fatalf("first item %q, want a (order kept)", a)
	}
	q.Add("a") // while processed
	wantLen(t, q, 1, "Len = %d with a processed and added again, want 1 (b only)")
	b, _ := q.Get()
	if b != "b" {
		t.Fatalf("second item %q, want b", b)
	}
	wantLen(t, q, 0, "Len = %d, want 0: a must not be given out while it is processed")
	q.Done("a")
	wantLen(t, q, 1, "Len = %d after a's Done, want 1 (a again)")
	if again, _ := q.Get(); again != "a" {
		t.Fatalf("got %q, want a again", again)
	}
	q.Done("a")
	q.Done("b")
	wantLen(t, q, 0, "Len = %d at the end, want 0")
}

// TestRQueueAddAfter: a delayed item is ready once the clock reaches its time, not before; an
// item added for later again keeps the earlier time; an item both delayed and added is given
// out once now, and once more when its delay ends.
func TestRQueueAddAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(epoch)
		q := newTestRQueue(clk, nil)
		defer q.ShutDown()
		q.AddAfter("late", 10*time.Second)
		q.AddAfter("early", 5*time.Second)
		q.AddAfter("late", 20*time.Second) // later: ignored
		q.AddAfter("early", 3*time.Second) // earlier: kept
		step := func(d time.Duration) {
			clk.Step(d)
			synctest.Wait() // the timer's goroutine has run
		}
		step(2 * time.Second)
		wantLen(t, q, 0, "%d ready at 2 s, want 0")
		step(time.Second)
		wantLen(t, q, 1, "%d ready at 3 s, want 1 (early)")
		if got, _ := q.Get(); got != "early" {
			t.Fatalf("got %q, want early", got)
		}
		q.Done("early")
		step(6 * time.Second)
		wantLen(t, q, 0, "%d ready at 9 s, want 0")
		step(time.Second)
		if got, _ := q.Get(); got != "late" {
			t.Fatalf("got %q at 10 s, want late", got)
		}
		q.Done("late")
		step(20 * time.Second)
		wantLen(t, q, 0, "%d ready at 30 s, want 0: the later AddAfter of late was to be ignored")
		q.AddAfter("x", time.Second)
		q.Add("x")
		if got, _ := q.Get(); got != "x" {
			t.Fatalf("got %q, want x at once", got)
		}
		q.Done("x")
		step(time.Second)
		wantLen(t, q, 1, "%d ready after x's delay, want 1")
	})
}

// TestRQueueShutDown: Get returns shutdown at once, also to a worker that waits; nothing is
// added afterwards, and a delayed item never comes.
func TestRQueueShutDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(epoch)
		q := newTestRQueue(clk, nil)
		q.AddAfter("later", time.Second)
		got := make(chan bool)
		go func() {
			_, shutdown := q.Get()
			got <- shutdown
		}()
		synctest.Wait()
		q.ShutDown()
		if !<-got {
			t.Fatal("a waiting Get returned an item after ShutDown")
		}
		q.Add("a")
		clk.Step(time.Minute)
		synctest.Wait()
		wantLen(t, q, 0, "Len = %d after ShutDown, want 0")
		if _, shutdown := q.Get(); !shutdown {
			t.Fatal("Get after ShutDown did not say so")
		}
	})
}

// TestRQueueNoGoroutines: queues with delayed items waiting hold no goroutine (client-go's
// holds two per queue for its life): what a fleet of a thousand members pays for four queues
// each.
func TestRQueueNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	var qs []*rqueue[string]
	for range 100 {
		q := newRQueue[string](realClock, workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute), nil)
		q.Add("now")
		q.AddAfter("later", time.Hour)
		qs = append(qs, q)
	}
	if after := runtime.NumGoroutine(); after > before+5 {
		t.Errorf("100 queues with an item each waiting an hour: %d goroutines more, want none", after-before)
	}
	for _, q := range qs {
		q.ShutDown()
	}
}

// TestRQueueRaceFree: many adders and workers at once (under -race in make test): an item is
// never processed by two workers at once, and every item added is processed after its last add.
func TestRQueueRaceFree(t *testing.T) {
	q := newRQueue[int](realClock, workqueue.NewTypedItemExponentialFailureRateLimiter[int](time.Microsecond, time.Millisecond), nil)
	const items, rounds = 20, 200
	var mu sync.Mutex
	busy := map[int]bool{}
	lastAdd, lastDone := map[int]int{}, map[int]int{}
	var workers sync.WaitGroup
	for range 4 {
		workers.Go(func() {
			for {
				item, shutdown := q.Get()
				if shutdown {
					return
				}
				mu.Lock()
				if busy[item] {
					t.Errorf("item %d given to two workers at once", item)
				}
				busy[item] = true
				seen := lastAdd[item]
				mu.Unlock()
				runtime.Gosched()
				mu.Lock()
				busy[item] = false
				lastDone[item] = max(lastDone[item], seen)
				mu.Unlock()
				q.Done(item)
			}
		})
	}
	var adders sync.WaitGroup
	for a := range 4 {
		adders.Go(func() {
			for r := 1; r <= rounds; r++ {
				for i := a; i < items; i += 4 {
					mu.Lock()
					lastAdd[i] = r
					mu.Unlock()
					if r%3 == 0 {
						q.AddRateLimited(i)
					} else {
						q.Add(i)
					}
				}
			}
		})
	}
	adders.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		doneAll := true
		for i := range items {
			if lastDone[i] != rounds {
				doneAll = false
			}
		}
		mu.Unlock()
		if doneAll {
			break
		}
		if time.Now().After(deadline) {
			mu.Lock()
			t.Errorf("items not processed after their last add: last add %v, last processed %v", lastAdd, lastDone)
			mu.Unlock()
			break
		}
		time.Sleep(time.Millisecond)
	}
	q.ShutDown()
	workers.Wait()
}

// TestQueueMetricsUnfinishedWhenScraped: the unfinished-work gauges are computed when
// scraped, summed over the served queues of one name (a fleet's members), the longest their
// maximum; a queue no longer served counts no more. Depth, adds, retries and the two
// histograms count as client-go's queue counts them.
func TestQueueMetricsUnfinishedWhenScraped(t *testing.T) {
	reg := prometheus.NewRegistry()
	qm := NewQueueMetrics(reg)
	clk := clocktesting.NewFakeClock(epoch)
	a, b := newTestRQueue(clk, qm.series("attempt_to_delete")), newTestRQueue(clk, qm.series("attempt_to_delete"))
	sa, sb := &namedSource{"attempt_to_delete", a}, &namedSource{"attempt_to_delete", b}
	qm.serve(sa)
	qm.serve(sb)
	a.Add("x")
	a.Add("x")
	a.AddAfter("y", 0)
	b.Add("z")
	if got := testutil.ToFloat64(qm.depth.WithLabelValues("attempt_to_delete")); got != 3 {
		t.Errorf("depth = %v, want 3", got)
	}
	if got := testutil.ToFloat64(qm.adds.WithLabelValues("attempt_to_delete")); got != 3 {
		t.Errorf("adds = %v, want 3 (the second add of x is the same item)", got)
	}
	if got := testutil.ToFloat64(qm.retries.WithLabelValues("attempt_to_delete")); got != 1 {
		t.Errorf("retries = %v, want 1 (AddAfter)", got)
	}
	_, _ = a.Get()
	clk.Step(2 * time.Second)
	_, _ = b.Get()
	clk.Step(3 * time.Second)
	want := `
# HELP cascade_workqueue_longest_running_processor_seconds Seconds the longest running item has been processed.
# TYPE cascade_workqueue_longest_running_processor_seconds gauge
cascade_workqueue_longest_running_processor_seconds{name="attempt_to_delete"} 5
# HELP cascade_workqueue_unfinished_work_seconds Seconds of work in progress not yet observed by work_duration_seconds.
# TYPE cascade_workqueue_unfinished_work_seconds gauge
cascade_workqueue_unfinished_work_seconds{name="attempt_to_delete"} 8
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "cascade_workqueue_unfinished_work_seconds", "cascade_workqueue_longest_running_processor_seconds"); err != nil {
		t.Error(err)
	}
	if got := testutil.ToFloat64(qm.depth.WithLabelValues("attempt_to_delete")); got != 1 {
		t.Errorf("depth = %v after two Gets, want 1", got)
	}
	a.Done("x")
	qm.stopServing(sb)
	b.ShutDown()
	want = `
# HELP cascade_workqueue_longest_running_processor_seconds Seconds the longest running item has been processed.
# TYPE cascade_workqueue_longest_running_processor_seconds gauge
cascade_workqueue_longest_running_processor_seconds{name="attempt_to_delete"} 0
# HELP cascade_workqueue_unfinished_work_seconds Seconds of work in progress not yet observed by work_duration_seconds.
# TYPE cascade_workqueue_unfinished_work_seconds gauge
cascade_workqueue_unfinished_work_seconds{name="attempt_to_delete"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "cascade_workqueue_unfinished_work_seconds", "cascade_workqueue_longest_running_processor_seconds"); err != nil {
		t.Error(err)
	}
	if got := testutil.ToFloat64(qm.depth.WithLabelValues("attempt_to_delete")); got != 1 {
		t.Errorf("depth = %v, want 1 (y, still ready in a)", got)
	}
	qm.stopServing(sa)
	a.ShutDown()
	if got := testutil.ToFloat64(qm.depth.WithLabelValues("attempt_to_delete")); got != 0 {
		t.Errorf("depth = %v after both queues shut down, want 0 (a stopped member's items count no more)", got)
	}
	if n, err := testutil.GatherAndCount(reg, "cascade_workqueue_unfinished_work_seconds"); err != nil || n != 0 {
		t.Errorf("unfinished-work series with no queue served: %d (%v), want 0", n, err)
	}
	if got := testutil.CollectAndCount(qm.work); got != 1 {
		t.Errorf("work duration series = %d, want 1", got)
	}
}

// TestQueueServedForMetrics: a Queue counts in the unfinished-work gauges while Run serves
// it, with the installed QueueMetrics.
func TestQueueServedForMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	qm := NewQueueMetrics(reg)
	SetQueueMetrics(qm)
	defer SetQueueMetrics(nil)
	q := NewQueue("served", Options[string]{})
	ctx, cancel := context.WithCancel(context.Background())
	inside := make(chan struct{})
	release := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		q.Run(ctx, 1, func(context.Context, string) (Outcome, error) {
			close(inside)
			<-release
			return Done, nil
		})
	}()
	q.Add("a")
	<-inside
	if n, err := testutil.GatherAndCount(reg, "cascade_workqueue_longest_running_processor_seconds"); err != nil || n != 1 {
		t.Errorf("longest-running series while an item is processed: %d (%v), want 1", n, err)
	}
	close(release)
	cancel()
	<-done
	if n, err := testutil.GatherAndCount(reg, "cascade_workqueue_longest_running_processor_seconds"); err != nil || n != 0 {
		t.Errorf("longest-running series after Run returned: %d (%v), want 0", n, err)
	}
}

type namedSource struct {
	name string
	q    *rqueue[string]
}

func (s *namedSource) Name() string                         { return s.name }
func (s *namedSource) unfinished() (total, longest float64) { return s.q.unfinished() }
