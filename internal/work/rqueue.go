package work

import (
	"container/heap"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// rqueue is the rate-limited, delaying work queue under Queue, with client-go's workqueue
// semantics (an item is held once however often it is added; it is never given to two workers
// at once; added while processed, it is given out again once Done) and without client-go's
// per-queue goroutines and channels: client-go's queue runs two goroutines for its life (the
// delayed items' loop, with a 10 s heartbeat, and the unfinished-work gauges' loop, on a 500 ms
// ticker) and keeps a 1,000-entry channel, which a fleet pays four times per member (issue 41).
// Here delayed items wait in a heap under one timer armed for the earliest of them (no
// goroutine while it waits: clock.AfterFunc), and the unfinished-work gauges are computed when
// scraped (QueueMetrics).
type rqueue[T comparable] struct {
	clock   clock.WithDelayedExecution
	limiter workqueue.TypedRateLimiter[T]
	series  *queueSeries // nil: no metrics

	mu   sync.Mutex
	cond sync.Cond // on mu: an item is ready, or the queue shut down

	// ready are the items to give out, in order (from head on: popped items are cleared and
	// the slice compacted when half of it is spent).
	ready []T
	head  int
	// dirty are the items added and not yet given out (ready, or processed and added again),
	// with when each was added (for queue_duration_seconds).
	dirty map[T]time.Time
	// processing are the items given out and not yet Done, with when each was given out.
	processing map[T]time.Time
	// waiting are the items added with a delay, by when they are due; waitingAt indexes them.
	waiting   delayHeap[T]
	waitingAt map[T]*delayed[T]
	timer     clock.Timer // armed for timerAt, the earliest waiting item's time; nil: none
	timerAt   time.Time
	shutdown  bool
}

func newRQueue[T comparable](clk clock.WithDelayedExecution, limiter workqueue.TypedRateLimiter[T], series *queueSeries) *rqueue[T] {
	q := &rqueue[T]{
		clock: clk, limiter: limiter, series: series,
		dirty: map[T]time.Time{}, processing: map[T]time.Time{}, waitingAt: map[T]*delayed[T]{},
	}
	q.cond.L = &q.mu
	return q
}

// Add makes item ready, unless it already is (or is processed: it is then given out again
// once Done).
func (q *rqueue[T]) Add(item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addLocked(item, q.clock.Now())
}

func (q *rqueue[T]) addLocked(item T, now time.Time) {
	if q.shutdown {
		return
	}
	if _, ok := q.dirty[item]; ok {
		return
	}
	q.dirty[item] = now
	if q.series != nil {
		q.series.adds.Inc()
		q.series.depth.Inc()
	}
	if _, ok := q.processing[item]; ok {
		return
	}
	q.ready = append(q.ready, item)
	q.cond.Signal()
}

// Get waits for a ready item and gives it out; shutdown is true once the queue is shut down
// (items still ready then are not given out).
func (q *rqueue[T]) Get() (item T, shutdown bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.ready) == q.head && !q.shutdown {
		q.cond.Wait()
	}
	if q.shutdown {
		return item, true
	}
	item = q.ready[q.head]
	var zero T
	q.ready[q.head] = zero
	q.head++
	if q.head == len(q.ready) {
		// Drained: a burst's array (a member's initial lists) is not kept for an idle queue.
		if cap(q.ready) > 256 {
			q.ready = nil
		} else {
			q.ready = q.ready[:0]
		}
		q.head = 0
	} else if q.head > 64 && q.head*2 >= len(q.ready) {
		n := copy(q.ready, q.ready[q.head:])
		clear(q.ready[n:])
		q.ready, q.head = q.ready[:n], 0
	}
	now := q.clock.Now()
	if q.series != nil {
		q.series.depth.Dec()
		q.series.latency.Observe(now.Sub(q.dirty[item]).Seconds())
	}
	delete(q.dirty, item)
	q.processing[item] = now
	return item, false
}

// Done ends the processing of item; if it was added meanwhile, it is ready again.
func (q *rqueue[T]) Done(item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	start, ok := q.processing[item]
	if !ok {
		return
	}
	delete(q.processing, item)
	if q.series != nil {
		q.series.work.Observe(q.clock.Since(start).Seconds())
	}
	if _, again := q.dirty[item]; again && !q.shutdown {
		q.ready = append(q.ready, item)
		q.cond.Signal()
	}
}

// Len is the number of ready items.
func (q *rqueue[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.ready) - q.head
}

// ShutDown gives no more items out: Get returns shutdown at once; waiting items are dropped.
func (q *rqueue[T]) ShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutdown {
		return
	}
	q.shutdown = true
	if q.timer != nil {
		q.timer.Stop()
		q.timer = nil
	}
	if q.series != nil {
		q.series.depth.Sub(float64(len(q.dirty)))
	}
	clear(q.ready)
	q.ready, q.head = nil, 0
	clear(q.dirty)
	q.waiting = nil
	clear(q.waitingAt)
	q.cond.Broadcast()
}

// AddAfter adds item once d has passed; an item already waiting keeps the earlier of its two
// times. Counted as a retry (client-go's workqueue_retries_total counts the same).
func (q *rqueue[T]) AddAfter(item T, d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutdown {
		return
	}
	if q.series != nil {
		q.series.retries.Inc()
	}
	now := q.clock.Now()
	if d <= 0 {
		q.addLocked(item, now)
		return
	}
	at := now.Add(d)
	if w, ok := q.waitingAt[item]; ok {
		if at.Before(w.at) {
			w.at = at
			heap.Fix(&q.waiting, w.index)
		}
	} else {
		w := &delayed[T]{item: item, at: at}
		heap.Push(&q.waiting, w)
		q.waitingAt[item] = w
	}
	q.armLocked(now)
}

// armLocked arms the timer for the earliest waiting item, unless it already is.
func (q *rqueue[T]) armLocked(now time.Time) {
	if len(q.waiting) == 0 {
		return
	}
	next := q.waiting[0].at
	if q.timer != nil && !next.Before(q.timerAt) {
		return
	}
	if q.timer != nil {
		q.timer.Stop()
	}
	q.timerAt = next
	// fire runs on a goroutine of its own: k8s.io/utils' fake clock calls the function while
	// it holds its own lock, which fire's Now and AfterFunc take again.
	q.timer = q.clock.AfterFunc(next.Sub(now), func() { go q.fire() })
}

// fire adds the waiting items that are due and arms the timer for the next.
func (q *rqueue[T]) fire() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutdown {
		return
	}
	now := q.clock.Now()
	q.timer = nil
	for len(q.waiting) > 0 && !q.waiting[0].at.After(now) {
		w := heap.Pop(&q.waiting).(*delayed[T])
		delete(q.waitingAt, w.item)
		q.addLocked(w.item, now)
	}
	if len(q.waiting) == 0 && cap(q.waiting) > 256 {
		q.waiting = nil
	}
	q.armLocked(now)
}

// AddRateLimited adds item after its rate limiter's delay.
func (q *rqueue[T]) AddRateLimited(item T) { q.AddAfter(item, q.limiter.When(item)) }

// Forget resets item's backoff.
func (q *rqueue[T]) Forget(item T) { q.limiter.Forget(item) }

// unfinished returns the seconds of work of the items being processed, and the longest of
// them (QueueMetrics' gauges, computed when scraped).
func (q *rqueue[T]) unfinished() (total, longest float64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	for _, start := range q.processing {
		s := now.Sub(start).Seconds()
		total += s
		longest = max(longest, s)
	}
	return total, longest
}

// delayed is an item waiting until at, at index in its heap.
type delayed[T comparable] struct {
	item  T
	at    time.Time
	index int
}

// delayHeap orders waiting items by time (container/heap).
type delayHeap[T comparable] []*delayed[T]

func (h delayHeap[T]) Len() int           { return len(h) }
func (h delayHeap[T]) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h delayHeap[T]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *delayHeap[T]) Push(x any) {
	d := x.(*delayed[T])
	d.index = len(*h)
	*h = append(*h, d)
}
func (h *delayHeap[T]) Pop() any {
	old := *h
	n := len(old)
	d := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return d
}
