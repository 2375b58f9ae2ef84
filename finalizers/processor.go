package finalizers

import (
	"context"
	"errors"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/cascade-gc/cascade/gc"
	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/internal/client"
	"github.com/cascade-gc/cascade/internal/work"
)

const (
	// DefaultResyncPeriod is how often every owner being deleted with a GC finalizer is
	// re-checked, whatever events arrived.
	DefaultResyncPeriod = 30 * time.Second
	// DefaultPatchWorkers bounds the concurrent dependent patches of orphaning, across owners.
	DefaultPatchWorkers = 20

	// queueName names the work queue in metrics and logs.
	queueName = "finalize_owner"
	// retryBase and retryMax bound the per-owner backoff, for errors and for owners waiting on
	// blocking dependents (whose departures also wake the owner through RecheckOwner).
	retryBase = 50 * time.Millisecond
	retryMax  = 10 * time.Second
	// DefaultCatchUpWait is Options.CatchUpWait's default: a watch that failed is retried with a
	// backoff of up to 30 s and then lists again, so 2 minutes covers an API server that was
	// away for a minute (a member's, restarted or answering errors) and its resources' relists;
	// past that, a resource that stays broken holds no deletion longer.
	DefaultCatchUpWait = 2 * time.Minute
	// maxOrphanRounds bounds how often one pass re-reads the dependents to orphan those the
	// graph learned of meanwhile. Later arrivals are covered by the graph, which remembers that
	// the owner was deleted while orphaning (graph.OwnerOrphaned).
	maxOrphanRounds = 5
)

// Options configure a Processor. Zero values mean the defaults.
type Options struct {
	// Client makes the processor's writes (dependent patches, finalizer removal). Required.
	Client client.Interface
	// View is the collector's graph the processor reads. Required.
	View gc.View
	// Workers is the number of owner workers; 1 when zero.
	Workers int
	// Slots, when set, is the processor's share of a pool of workers shared with other
	// processors (a fleet's members, work.Pool): each owner examined takes a slot. Nil: its
	// Workers alone bound it.
	Slots *work.Share
	// ResyncPeriod is how often every owner being deleted with a GC finalizer is enqueued
	// again.
	ResyncPeriod time.Duration
	// PatchWorkers bounds the concurrent dependent patches of orphaning, across all owners.
	PatchWorkers int
	// Metrics are updated; nil: a set registered nowhere.
	Metrics *Metrics
	// WorkMetrics count the workers' failed attempts; nil: a set registered nowhere.
	WorkMetrics *work.Metrics
	// StuckAfter is how long an owner waits on its GC finalizer before a Warning Event names
	// what holds it (and again at most every StuckAfter).
	StuckAfter time.Duration
	// Events, when set, emits Warning Events on owners (a foreground owner blocked by a
	// dependent of an unsynced resource).
	Events record.EventRecorder
	// OrphanRecord, when set, records owners before their orphan finalizer is removed
	// (orphanrecord.Store), so that a process that did not see the owner being deleted
	// (a new leader, a restart) still treats references to it as orphaned. Only owners whose
	// dependents may need it are recorded (a dependent was seen, or the owner was young: see
	// RecordWindow). A full record, or a write failing for longer than a bound, degrades:
	// the finalizer is removed anyway, with a Warning Event and
	// cascade_orphan_record_degraded_total.
	OrphanRecord OrphanRecord
	// RecordWindow: an owner deleted less than this after its creation is recorded even when
	// no dependent of it was seen (its first dependent may be in flight). Zero: every owner
	// deleted with the orphan policy is recorded. cascade passes the record's TTL.
	RecordWindow time.Duration
	// Companion is --mode=companion: kube-controller-manager's collector finishes the GC
	// finalizers. The processor only diagnoses: it follows every owner being deleted with one,
	// reports it stuck (the DeletionStuck Event, cascade_oldest_waiting_owner_seconds) and
	// writes nothing: no dependent patched, no finalizer removed, nothing recorded.
	Companion bool
	// CatchUpWait bounds how long a foreground owner with no known blocking dependent waits for
	// resources whose view is catching up (gc.View.CatchingUp: a watch ended and is not open
	// again) before its finalizer goes anyway; zero: DefaultCatchUpWait. cascade passes the
	// longer of that and --sync-timeout.
	CatchUpWait time.Duration
	// Clock is injected for tests.
	Clock clock.WithTickerAndDelayedExecution
}

// OrphanRecord records an owner deleted with the orphan policy (orphanrecord.Store). An error
// wrapping orphanrecord.ErrFull means the owner cannot be recorded until entries are pruned.
type OrphanRecord interface {
	Record(ctx context.Context, owner graph.Ref) error
}

// Processor finishes the GC finalizers of owners being deleted: orphan (remove the owner's
// reference from every dependent, then the finalizer) and foregroundDeletion (remove the
// finalizer once no dependent blocks the owner; the collector deletes the dependents).
//
// Data flows one way: the collector hands owners over (Enqueue) and the processor reads the
// collector's graph (gc.View); it writes to the API server through package internal/client and never
// calls back into the collector.
//
// Concurrency: owners come through one rate-limited work queue, which hands an owner to one
// worker at a time; dependents are patched by a fixed pool of patch workers shared by all
// owners. The queue and the view are safe for concurrent use; progress is guarded by mu.
type Processor struct {
	opts  Options
	queue *work.Queue[types.UID]
	// view is the collector's graph (Options.View).
	view gc.View
	// jobs feeds the patch workers; unbuffered, so a job sent is a job taken.
	jobs chan patchJob

	mu       sync.Mutex
	progress map[types.UID]*progress // guarded by mu
}

// progress is what the processor remembers about one owner while it is being deleted. Only
// the worker that holds the owner (the queue hands it to one at a time) touches the fields.
type progress struct {
	// patched holds the dependents whose reference to the owner was removed, so a second pass
	// (a dependent appeared, the patch events have not arrived yet) patches only new ones.
	patched map[types.UID]struct{}
	// reported holds the unsynced resources already reported as blocking this owner.
	reported map[string]struct{}
	// since is when this process first found the owner waiting; stuckReported when its last
	// stuck-deletion Event went out.
	since, stuckReported time.Time
	// finishedUnsyncedReported: the Warning about finishing with unsynced resources went out.
	finishedUnsyncedReported bool
	// sawDependents: the graph listed a dependent of the owner during its orphaning.
	sawDependents bool
	// recordFailedSince is when recording the owner first failed (zero: it did not);
	// recordDegraded: its finalizer was allowed to go without a record (and that was said).
	recordFailedSince time.Time
	recordDegraded    bool
}

// New builds a processor; nothing runs until Run, but Enqueue may be called at once.
func New(opts Options) *Processor {
	if opts.ResyncPeriod <= 0 {
		opts.ResyncPeriod = DefaultResyncPeriod
	}
	if opts.PatchWorkers <= 0 {
		opts.PatchWorkers = DefaultPatchWorkers
	}
	if opts.CatchUpWait <= 0 {
		opts.CatchUpWait = DefaultCatchUpWait
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.StuckAfter <= 0 {
		opts.StuckAfter = DefaultStuckAfter
	}
	if opts.Workers <= 0 {
		opts.Workers = 1
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(prometheus.NewRegistry())
	}
	return &Processor{
		opts: opts,
		view: opts.View,
		queue: work.NewQueue(queueName, work.Options[types.UID]{
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[types.UID](retryBase, retryMax),
			Clock:       opts.Clock,
			Metrics:     opts.WorkMetrics,
			Share:       opts.Slots,
		}),
		jobs:     make(chan patchJob),
		progress: map[types.UID]*progress{},
	}
}

var _ gc.OwnerQueue = (*Processor)(nil)

// Enqueue asks for the owner uid to be examined (the graph's AttemptOrphan, Foreground and
// RecheckOwner effects). It never blocks.
func (p *Processor) Enqueue(uid types.UID) { p.queue.Add(uid) }

// Run starts Options.Workers owner workers, the patch workers and the resync loop, and returns
// when ctx ends and all have stopped. As in sample-controller, it returns an error only when it
// cannot start.
func (p *Processor) Run(ctx context.Context) error {
	defer utilruntime.HandleCrashWithContext(ctx)
	switch {
	case p.view == nil:
		return errors.New("finalizers: no view of the graph")
	case p.opts.Client == nil:
		return errors.New("finalizers: no API client")
	}
	workers := p.opts.Workers
	logger := klog.FromContext(ctx)
	logger.Info("Starting finalizer processor", "workers", workers, "patchWorkers", p.opts.PatchWorkers, "resyncPeriod", p.opts.ResyncPeriod)
	var wg sync.WaitGroup
	for range p.opts.PatchWorkers {
		wg.Go(func() { p.runPatcher(ctx) })
	}
	wg.Go(func() { p.runResync(ctx) })
	p.queue.Run(ctx, workers, p.process)
	wg.Wait()
	logger.Info("Finalizer processor stopped")
	return nil
}

// runResync enqueues every owner being deleted with a GC finalizer once the graph has synced
// and then every ResyncPeriod, so a lost or unhandled event never leaves an owner Terminating.
func (p *Processor) runResync(ctx context.Context) {
	for !p.view.Synced() {
		select {
		case <-ctx.Done():
			return
		case <-p.opts.Clock.After(100 * time.Millisecond):
		}
	}
	t := p.opts.Clock.NewTicker(p.opts.ResyncPeriod)
	defer t.Stop()
	for {
		p.resync()
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// resync is one level-driven round: enqueue every deleting owner, forget the progress of the
// others.
func (p *Processor) resync() {
	owners := p.view.DeletingOwners()
	live := make(map[types.UID]struct{}, len(owners))
	for _, uid := range owners {
		live[uid] = struct{}{}
		p.queue.Add(uid)
	}
	p.mu.Lock()
	for uid := range p.progress {
		if _, ok := live[uid]; !ok {
			delete(p.progress, uid)
		}
	}
	p.mu.Unlock()
	p.updateOldestWaiting(owners)
}

// process examines one owner from the graph's view and does what its GC finalizers need.
func (p *Processor) process(ctx context.Context, uid types.UID) (work.Outcome, error) {
	logger := klog.FromContext(ctx).WithValues("owner", uid)
	n, found := p.view.Node(uid)
	todo := PlanOwner(n, found)
	if todo.None() {
		p.forget(uid)
		return work.Done, nil
	}
	// Before the graph has synced, an owner's dependents may not be in it yet: orphaning would
	// miss some and BlockingDependents could be 0 for the wrong reason.
	if !p.view.Synced() {
		return work.WaitForSync, nil
	}
	logger = logger.WithValues("object", n.Ref.String())
	res, ok := p.view.ResourceFor(n.APIVersion, n.Kind)
	if !ok {
		logger.V(2).Info("The owner's resource is no longer watched; leaving its finalizers")
		p.forget(uid)
		return work.Done, nil
	}
	owner := client.Target{GVR: res.GVR, Namespace: n.Namespace, Name: n.Name, UID: uid}
	if !res.Namespaced {
		owner.Namespace = ""
	}
	if p.opts.Companion {
		return p.diagnose(ctx, logger, owner, todo), nil
	}
	if todo.Orphan {
		pr := p.progressOf(uid)
		if err := p.orphan(ctx, logger, owner, n.Ref, pr); err != nil {
			p.opts.Metrics.failed(metav1.FinalizerOrphanDependents)
			p.reportStuck(ctx, logger, owner, pr, metav1.FinalizerOrphanDependents)
			return work.Retry, fmt.Errorf("orphaning: %w", err)
		}
	}
	if todo.Foreground {
		return p.foreground(ctx, logger, owner, p.progressOf(uid))
	}
	return work.Done, nil
}

func (p *Processor) progressOf(uid types.UID) *progress {
	p.mu.Lock()
	defer p.mu.Unlock()
	pr, ok := p.progress[uid]
	if !ok {
		pr = &progress{patched: map[types.UID]struct{}{}, reported: map[string]struct{}{}, since: p.opts.Clock.Now()}
		p.progress[uid] = pr
	}
	return pr
}

func (p *Processor) forget(uid types.UID) {
	p.mu.Lock()
	delete(p.progress, uid)
	p.mu.Unlock()
}

// removeFinalizer removes finalizer from owner (client.RemoveFinalizer) and counts it.
func (p *Processor) removeFinalizer(ctx context.Context, owner client.Target, finalizer string) (bool, error) {
	return p.removeFinalizerFrom(ctx, owner, finalizer, nil)
}

// removeFinalizerFrom is removeFinalizer starting from read, the owner as just read (nil: read
// it).
func (p *Processor) removeFinalizerFrom(ctx context.Context, owner client.Target, finalizer string, read *metav1.PartialObjectMetadata) (bool, error) {
	removed, err := client.RemoveFinalizerFrom(ctx, p.opts.Client, owner, finalizer, read)
	if removed {
		p.opts.Metrics.removed(finalizer)
	}
	return removed, err
}
