package work

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// metricsNamespace prefixes every cascade metric (gc.MetricsNamespace; repeated here because
// gc imports this package).
const metricsNamespace = "cascade"

// Outcome tells the queue what to do with an item a worker processed.
type Outcome int

const (
	// Done: finished, or nothing to do: forget the item until it is added again.
	Done Outcome = iota
	// Retry: again after the item's backoff (a failure, or waiting for something to change).
	Retry
	// WaitForSync: again after SyncWait, without growing the backoff (an informer or the graph
	// has not synced yet).
	WaitForSync
)

func (o Outcome) String() string {
	switch o {
	case Done:
		return "Done"
	case Retry:
		return "Retry"
	case WaitForSync:
		return "WaitForSync"
	}
	return "Outcome(?)"
}

// SyncWait is how long an item waits before checking again whether what it needs has synced.
const SyncWait = time.Second

// Metrics are the worker kit's own metrics.
type Metrics struct {
	// Errors counts failed attempts on items (API errors), by queue.
	Errors *prometheus.CounterVec

	queues *tracked[progress] // every queue created with these metrics, for NewLiveness
}

// NewMetrics creates the metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace,
			Name:      "worker_errors_total",
			Help:      "Failed attempts on a queue item (API errors), by queue; each is retried with backoff, and each item's first failure is logged.",
		}, []string{"queue"}),
		queues: &tracked[progress]{},
	}
	reg.MustRegister(m.Errors)
	return m
}

// Scoped returns metrics that count into m's series but track queues of their own, for a
// liveness check of their own (a fleet member's: NewLiveness on m no longer sees its queues).
func (m *Metrics) Scoped() *Metrics {
	return &Metrics{Errors: m.Errors, queues: &tracked[progress]{}}
}

// MaxBackoff caps the per-item backoff of DefaultRateLimiter. client-go's controller default
// grows to 1,000 s: an item that failed a dozen times while something was broken (an API
// server restarting, a CRD briefly missing from discovery) would then wait minutes after the
// cause healed, with nothing else to wake it. The chaos suite saw a cluster converge only two
// minutes after its faults healed.
const MaxBackoff = 30 * time.Second

// DefaultRateLimiter is client-go's controller default (per-item exponential backoff from 5 ms,
// and 10 re-adds a second overall with a burst of 100) with the per-item backoff capped at
// MaxBackoff.
func DefaultRateLimiter[T comparable]() workqueue.TypedRateLimiter[T] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[T](5*time.Millisecond, MaxBackoff),
		&workqueue.TypedBucketRateLimiter[T]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// Options configure a Queue. Zero values mean the defaults (DefaultRateLimiter).
type Options[T comparable] struct {
	// RateLimiter is the per-item backoff of Retry.
	RateLimiter workqueue.TypedRateLimiter[T]
	// Clock is injected for tests (the delayed items' timer runs on it).
	Clock clock.WithDelayedExecution
	// Metrics count failures; nil: a set registered nowhere.
	Metrics *Metrics
	// Share, when set, is the pool whose slot each item takes while it is processed (a fleet's
	// shared workers, pool.go); nil: the queue's own workers bound it alone.
	Share *Share
}

// Func processes one item: its outcome, and the error when an attempt failed (with Retry).
type Func[T comparable] func(ctx context.Context, item T) (Outcome, error)

// Queue is a named rate-limited work queue of T served by Run's workers. Add may be called
// from any goroutine, before and during Run.
type Queue[T comparable] struct {
	name     string
	q        *rqueue[T]
	metrics  *Metrics
	qm       *QueueMetrics // nil: none installed
	share    *Share
	progress queueProgress

	mu      sync.Mutex
	failing map[T]struct{} // guarded by mu: items whose current run of failures was logged
}

// NewQueue returns an empty queue; name labels its metrics and logs.
func NewQueue[T comparable](name string, opts Options[T]) *Queue[T] {
	if opts.RateLimiter == nil {
		opts.RateLimiter = DefaultRateLimiter[T]()
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(prometheus.NewRegistry())
	}
	qm := installed.Load()
	var series *queueSeries
	if qm != nil {
		series = qm.series(name)
	}
	q := &Queue[T]{
		name:    name,
		q:       newRQueue(opts.Clock, opts.RateLimiter, series),
		metrics: opts.Metrics,
		qm:      qm,
		share:   opts.Share,
		failing: map[T]struct{}{},
	}
	return q
}

// Name is the queue's name.
func (q *Queue[T]) Name() string { return q.name }

// Add asks for item to be processed. It never blocks.
func (q *Queue[T]) Add(item T) { q.q.Add(item) }

// AddAfter asks for item to be processed once d has passed (on the queue's clock), for a worker
// that knows when to look again: it then returns Done. If the item is added meanwhile, it is
// processed then too. It never blocks.
func (q *Queue[T]) AddAfter(item T, d time.Duration) { q.q.AddAfter(item, d) }

// Len is the number of items waiting.
func (q *Queue[T]) Len() int { return q.q.Len() }

func (q *Queue[T]) finished() uint64 { return q.progress.done.Load() }
func (q *Queue[T]) unfinished() (total, longest float64) {
	return q.q.unfinished()
}
func (q *Queue[T]) serving() bool { return q.progress.workers.Load() > 0 }

// ShutDown stops the queue: workers return once their current item is finished.
func (q *Queue[T]) ShutDown() { q.q.ShutDown() }

// Run serves the queue with workers goroutines calling process until ctx ends, then shuts the
// queue down and returns once every worker has finished its item. The calling goroutine is
// one of the workers (a fleet runs four queues per member: a goroutine each saved).
func (q *Queue[T]) Run(ctx context.Context, workers int, process Func[T]) {
	q.metrics.queues.add(q) // for the liveness check while it is served
	defer q.metrics.queues.remove(q)
	if q.qm != nil { // for the unfinished-work gauges while it is served
		q.qm.serve(q)
		defer q.qm.stopServing(q)
	}
	stop := context.AfterFunc(ctx, q.q.ShutDown)
	defer stop()
	work := func() {
		q.progress.workers.Add(1)
		defer q.progress.workers.Add(-1)
		for q.ProcessNext(ctx, process) {
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(work)
	}
	if workers > 0 {
		work()
	}
	wg.Wait()
	<-ctx.Done() // shut down early (ShutDown): Run still returns with ctx
	q.q.ShutDown()
}

// ProcessNext takes one item (blocking until there is one), processes it and files its
// outcome. It returns false once the queue is shut down.
func (q *Queue[T]) ProcessNext(ctx context.Context, process Func[T]) bool {
	item, shutdown := q.q.Get()
	if shutdown {
		return false
	}
	defer q.q.Done(item)
	if q.share != nil {
		if !q.share.Acquire(ctx) {
			return false // stopping: the queue shuts down with ctx (Run)
		}
		s := &slot{share: q.share, held: true}
		defer s.release()
		ctx = withSlot(ctx, s) // its waits lend the slot back (Waiting)
	}
	defer q.progress.done.Add(1)
	out, err := process(ctx, item)
	q.report(ctx, item, out, err)
	switch out {
	case Retry:
		q.q.AddRateLimited(item)
	case WaitForSync:
		q.q.Forget(item)
		q.q.AddAfter(item, SyncWait)
	default:
		q.q.Forget(item)
	}
	return true
}

// report counts a failure and logs it at default verbosity once per item; an item that
// succeeds after failing is logged once too.
func (q *Queue[T]) report(ctx context.Context, item T, out Outcome, err error) {
	logger := klog.FromContext(ctx)
	q.mu.Lock()
	_, wasFailing := q.failing[item]
	switch {
	case err != nil:
		q.failing[item] = struct{}{}
	case out != Retry:
		delete(q.failing, item)
	}
	q.mu.Unlock()
	switch {
	case err != nil:
		q.metrics.Errors.WithLabelValues(q.name).Inc()
		if !wasFailing {
			logger.Error(err, "Work item failed; retrying with backoff (further failures of this item log at V(4))", "queue", q.name, "item", item)
		} else {
			logger.V(4).Info("Work item failed again; retrying with backoff", "queue", q.name, "item", item, "err", err)
		}
	case wasFailing && out != Retry:
		logger.Info("Work item succeeded after failing", "queue", q.name, "item", item, "outcome", out.String())
	}
}
