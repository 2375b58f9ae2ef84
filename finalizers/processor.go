package finalizers

import (
	"context"
	"fmt"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/cascade-gc/cascade/gc"
)

const (
	// DefaultResyncPeriod is how often every owner being deleted with a GC finalizer is
	// re-checked, whatever events arrived.
	DefaultResyncPeriod = 30 * time.Second
	// DefaultPatchWorkers bounds the concurrent dependent patches of orphaning, across owners.
	DefaultPatchWorkers = 20
	// DefaultOrphanedCacheSize is the number of orphaned owners remembered (about 100 bytes
	// each). A reference to an orphaned owner that the graph learns of later is removed, never
	// a reason to delete; the window in which that happens is short, so the size only needs
	// to cover the owners orphaned during it.
	DefaultOrphanedCacheSize = 10000

	// queueName names the work queue in metrics and logs.
	queueName = "finalize_owner"
	// retryBase and retryMax bound the per-owner backoff, for errors and for owners waiting on
	// blocking dependents (whose departures also wake the owner through RecheckOwner).
	retryBase = 50 * time.Millisecond
	retryMax  = 10 * time.Second
	// waitForSync is how long an owner waits before checking again whether the graph synced.
	waitForSync = time.Second
	// maxOrphanRounds bounds how often one pass re-reads the dependents to orphan those the
	// graph learned of meanwhile. Later arrivals are covered by the orphaned record.
	maxOrphanRounds = 5
)

// Options configure a Processor. Zero values mean the defaults.
type Options struct {
	// ResyncPeriod is how often every owner being deleted with a GC finalizer is enqueued
	// again, and the longest an owner waits before its dependents are handed to the collector
	// again.
	ResyncPeriod time.Duration
	// PatchWorkers bounds the concurrent dependent patches of orphaning, across all owners.
	PatchWorkers int
	// OrphanedCacheSize bounds the record of owners whose dependents were orphaned.
	OrphanedCacheSize int
	// Metrics, when set, are updated.
	Metrics *Metrics
	// Clock is injected for tests.
	Clock clock.WithTicker
}

// Processor finishes the GC finalizers of owners being deleted: orphan (remove the owner's
// reference from every dependent, then the finalizer) and foregroundDeletion (remove the
// finalizer once no dependent blocks the owner; the collector deletes the dependents).
//
// Concurrency: owners come through one rate-limited work queue, which hands an owner to one
// worker at a time; dependents are patched by a fixed pool of patch workers shared by all
// owners. The queue, the orphaned record and the view are safe for concurrent use; progress is
// guarded by mu.
type Processor struct {
	view  gc.View
	opts  Options
	queue workqueue.TypedRateLimitingInterface[types.UID]
	// orphaned records the owners whose dependents were orphaned, from just before their
	// orphan finalizer is removed (see Orphaned).
	orphaned *lru.Cache[types.UID, struct{}]
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
	// kickedAt is the last time the owner's dependents were handed to the collector.
	kickedAt time.Time
}

// New builds a processor over view (the collector); nothing runs until Run, but Enqueue may
// be called at once.
func New(view gc.View, opts Options) *Processor {
	if opts.ResyncPeriod <= 0 {
		opts.ResyncPeriod = DefaultResyncPeriod
	}
	if opts.PatchWorkers <= 0 {
		opts.PatchWorkers = DefaultPatchWorkers
	}
	if opts.OrphanedCacheSize <= 0 {
		opts.OrphanedCacheSize = DefaultOrphanedCacheSize
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	orphaned, err := lru.New[types.UID, struct{}](opts.OrphanedCacheSize)
	if err != nil {
		// lru.New fails only for a size below one, excluded above.
		panic(fmt.Sprintf("orphaned owner record of size %d: %v", opts.OrphanedCacheSize, err))
	}
	return &Processor{
		view: view,
		opts: opts,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[types.UID](retryBase, retryMax),
			workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: queueName, Clock: opts.Clock}),
		orphaned: orphaned,
		jobs:     make(chan patchJob),
		progress: map[types.UID]*progress{},
	}
}

var _ gc.FinalizerHandler = (*Processor)(nil)

// Enqueue asks for the owner uid to be examined (the graph's AttemptOrphan, Foreground and
// RecheckOwner effects). It never blocks.
func (p *Processor) Enqueue(uid types.UID) { p.queue.Add(uid) }

// Orphaned reports whether the dependents of owner uid were orphaned by this process: its
// orphan finalizer was removed, or is about to be, after every dependent the graph knew of had
// its reference removed. A dependent the graph learns of later must lose its reference to the
// owner, never be deleted because of it. The record lives in memory (see the package
// documentation for what a restart loses).
func (p *Processor) Orphaned(uid types.UID) bool {
	_, ok := p.orphaned.Get(uid)
	return ok
}

// Run starts workers owner workers, the patch workers and the resync loop, and returns when
// ctx ends and all have stopped.
func (p *Processor) Run(ctx context.Context, workers int) {
	if workers < 1 {
		workers = 1
	}
	logger := klog.FromContext(ctx)
	logger.Info("Starting finalizer processor", "workers", workers, "patchWorkers", p.opts.PatchWorkers, "resyncPeriod", p.opts.ResyncPeriod)
	var wg sync.WaitGroup
	for range p.opts.PatchWorkers {
		wg.Go(func() { p.runPatcher(ctx) })
	}
	for range workers {
		wg.Go(func() { p.runWorker(ctx) })
	}
	wg.Go(func() { p.runResync(ctx) })
	<-ctx.Done()
	p.queue.ShutDown()
	wg.Wait()
	logger.Info("Finalizer processor stopped")
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
}

// outcome tells a worker what to do with its owner.
type outcome int

const (
	done     outcome = iota // finished (or nothing to do): forget it
	backoff                 // again after the per-owner backoff
	waitSync                // again after waitForSync, without backoff
)

func (p *Processor) runWorker(ctx context.Context) {
	for {
		uid, shutdown := p.queue.Get()
		if shutdown {
			return
		}
		switch p.process(ctx, uid) {
		case done:
			p.queue.Forget(uid)
		case backoff:
			p.queue.AddRateLimited(uid)
		case waitSync:
			p.queue.Forget(uid)
			p.queue.AddAfter(uid, waitForSync)
		}
		p.queue.Done(uid)
	}
}

// process examines one owner from the graph's view and does what its GC finalizers need.
func (p *Processor) process(ctx context.Context, uid types.UID) outcome {
	logger := klog.FromContext(ctx).WithValues("owner", uid)
	n, found := p.view.Node(uid)
	work := PlanOwner(n, found)
	if work.None() {
		p.forget(uid)
		return done
	}
	// Before the graph has synced, an owner's dependents may not be in it yet: orphaning would
	// miss some and BlockingDependents could be 0 for the wrong reason.
	if !p.view.Synced() {
		return waitSync
	}
	logger = logger.WithValues("object", n.Ref.String())
	res, ok := p.view.ResourceFor(n.APIVersion, n.Kind)
	if !ok {
		logger.V(2).Info("The owner's resource is no longer watched; leaving its finalizers")
		p.forget(uid)
		return done
	}
	pr := p.progressOf(uid)
	if work.Orphan {
		if err := p.orphan(ctx, logger, n, res, pr); err != nil {
			p.opts.Metrics.failed(metav1.FinalizerOrphanDependents)
			logger.V(2).Info("Orphaning failed; will retry", "err", err)
			return backoff
		}
	}
	if work.Foreground {
		return p.foreground(ctx, logger, n, res, pr)
	}
	return done
}

func (p *Processor) progressOf(uid types.UID) *progress {
	p.mu.Lock()
	defer p.mu.Unlock()
	pr, ok := p.progress[uid]
	if !ok {
		pr = &progress{patched: map[types.UID]struct{}{}}
		p.progress[uid] = pr
	}
	return pr
}

func (p *Processor) forget(uid types.UID) {
	p.mu.Lock()
	delete(p.progress, uid)
	p.mu.Unlock()
}

// removeFinalizer removes finalizer from the owner n of resource res: GET the live object; if
// it is gone, replaced, not being deleted or without the finalizer, there is nothing to do;
// else a JSON merge patch at the live resourceVersion that keeps every other finalizer,
// retried on conflict. It reports whether this call removed it.
func (p *Processor) removeFinalizer(ctx context.Context, res gc.Resource, ns, name string, uid types.UID, finalizer string) (bool, error) {
	client := p.view.Client()
	if !res.Namespaced {
		ns = ""
	}
	removed := false
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		live, err := client.Get(ctx, res.GVR, ns, name)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		patch, ok := PlanFinalizerRemoval(live, uid, finalizer)
		if !ok {
			return nil
		}
		_, err = client.Patch(ctx, res.GVR, ns, name, types.MergePatchType, patch)
		if apierrors.IsNotFound(err) {
			return nil
		}
		removed = err == nil
		return err
	})
	if removed {
		p.opts.Metrics.removed(finalizer)
	}
	return removed, err
}
