package work

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// progress is what the liveness check reads of a queue.
type progress interface {
	Name() string
	Len() int
	finished() uint64
	serving() bool
}

// tracked holds the queues served now (Queue.Run), for the liveness check (a Metrics' queues)
// and the unfinished-work gauges (QueueMetrics'): a queue that stopped is dropped (a fleet's
// members come and go).
type tracked[T comparable] struct {
	mu     sync.Mutex
	queues []T
}

func (t *tracked[T]) add(q T) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.queues = append(t.queues, q)
}

func (t *tracked[T]) remove(q T) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if i := slices.Index(t.queues, q); i >= 0 {
		t.queues = slices.Delete(t.queues, i, i+1) // clears the freed slot: no stopped queue stays referenced
	}
}

func (t *tracked[T]) all() []T {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.queues)
}

// Liveness tells whether the workers still make progress: a queue whose workers run, with
// items ready and waiting, that has finished none for longer than After is stalled (every
// worker stuck on a request that never returns, a deadlock). An idle queue, a queue whose
// workers do not run (a standby waiting for the Lease), and items waiting out their backoff
// (not ready) never count: the check fails only where work is due and nothing moves.
//
// It samples the queues when asked (a probe every few seconds): a queue makes progress between
// two checks when it finished an item or had nothing ready. Checks further apart than After
// start afresh, so a long pause between probes is never taken for a stall.
type Liveness struct {
	queues *tracked[progress]
	after  time.Duration
	clock  clock.PassiveClock

	// progress, when set, counts work done inside items (a fleet member's answered requests):
	// a change since the last check is progress of every queue, so that one long item that
	// keeps working (an orphan owner with 10,000 dependents) is not taken for a stall.
	progress func() uint64

	mu       sync.Mutex
	seen     map[progress]sample // guarded by mu
	lastWork uint64              // guarded by mu: progress() at the last check
}

// WithProgress makes l take a change of p between two checks as progress of every queue
// (Liveness.progress).
func (l *Liveness) WithProgress(p func() uint64) *Liveness {
	l.progress = p
	return l
}

type sample struct {
	at, moved time.Time // the last check; the last one that saw progress
	finished  uint64
}

// NewLiveness checks the queues served with m (every queue cascade's packages make is given
// the one work.Metrics). clk nil: the real clock.
func (m *Metrics) NewLiveness(after time.Duration, clk clock.PassiveClock) *Liveness {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Liveness{queues: m.queues, after: after, clock: clk, seen: map[progress]sample{}}
}

// Check returns an error naming each stalled queue, or nil.
func (l *Liveness) Check() error {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	var stalled []string
	queues := l.queues.all()
	working := false
	if l.progress != nil {
		w := l.progress()
		working, l.lastWork = w != l.lastWork, w
	}
	for q := range l.seen { // queues that stopped
		if !slices.Contains(queues, q) {
			delete(l.seen, q)
		}
	}
	for _, q := range queues {
		s, known := l.seen[q]
		done, ready := q.finished(), q.Len()
		if !known || now.Sub(s.at) > l.after || !q.serving() || ready == 0 || done != s.finished || working {
			s.moved = now
		}
		s.at, s.finished = now, done
		l.seen[q] = s
		if idle := now.Sub(s.moved); idle > l.after {
			stalled = append(stalled, fmt.Sprintf("queue %s: %d items ready, none finished for %s", q.Name(), ready, idle.Round(time.Second)))
		}
	}
	if len(stalled) > 0 {
		return fmt.Errorf("workers stalled: %s", strings.Join(stalled, "; "))
	}
	return nil
}

// queueProgress is a Queue's count of finished items and whether its workers run.
type queueProgress struct {
	done    atomic.Uint64
	workers atomic.Int32
}
