package gc

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/policy"
)

// RecordLoadBound bounds how long a failing load of the orphan record holds back the decisions
// that depend on it, from the first failure: the bound a failing record write holds an owner's
// orphan finalizer (finalizers' recordRetryFor). After it, they go on without the record
// (Options.OrphanRecordDegraded), and the load is retried all the same.
const RecordLoadBound = 20 * time.Second

// recordGate holds back the decisions that the orphan record could change until it loaded, or
// until its load has failed for RecordLoadBound. Only one kind of decision depends on it: a
// dependent collected because its owners are absent (needsRecord). An absent owner the record names was deleted with the
// orphan policy by another process, and references to it are removed instead. Everything else
// (owner verification, the foreground, reference removals, the finalizers' work) never waits.
type recordGate struct {
	open chan struct{} // closed once the record loaded or the load degraded
	// held are the dependents whose decision waited, re-enqueued when the gate opens.
	held map[types.UID]struct{} // guarded by the controller's heldMu
}

// needsRecord reports whether decision d, on a dependent with input in, may differ once the
// orphan record is in the graph: a collection (now, or a collect: After rule's delayed one) with
// an owner verified absent, which may be a recorded orphan whose reference goes instead. A
// dependent whose owners all wait for it in the foreground is collected whatever the record
// says (they exist, so the record names none of them).
func needsRecord(in policy.Input, d policy.Decision) bool {
	if d.Action != policy.Delete && d.Action != policy.RecordOrphanedAt {
		return false
	}
	for _, o := range in.Owners {
		if o.State == policy.Dangling {
			return true
		}
	}
	return false
}

// recordLoaded reports whether the decisions that depend on the orphan record may be taken.
func (c *Controller) recordLoaded() bool {
	select {
	case <-c.record.open:
		return true
	default:
		return false
	}
}

// holdForRecord keeps dependent uid until the orphan record's gate opens; false when it is open
// already (the caller goes on).
func (c *Controller) holdForRecord(uid types.UID) bool {
	c.heldMu.Lock()
	defer c.heldMu.Unlock()
	if c.recordLoaded() {
		return false
	}
	c.record.held[uid] = struct{}{}
	return true
}

// openRecordGate opens the gate and hands the dependents it held back to the delete queue.
func (c *Controller) openRecordGate() {
	c.heldMu.Lock()
	defer c.heldMu.Unlock()
	if c.recordLoaded() {
		return
	}
	close(c.record.open)
	for uid := range c.record.held {
		c.deleteQueue.Add(uid)
	}
	c.record.held = nil
}

// loadOrphanRecords hands the recorded orphaned owners to the graph, retrying until it works or
// ctx ends. The gate opens when it loads, or when it has failed for RecordLoadBound: then
// Options.OrphanRecordDegraded is told once and the load goes on being retried, its owners
// handed to the graph whenever it works (late, but still protecting what is left to decide).
func (c *Controller) loadOrphanRecords(ctx context.Context) {
	if c.opts.OrphanRecords == nil {
		return // the gate is open from the start (New)
	}
	logger := klog.FromContext(ctx)
	backoff := time.Second
	var failingSince time.Time
	for {
		refs, err := c.opts.OrphanRecords.Load(ctx)
		if err == nil {
			for _, r := range refs {
				c.apply(graph.Event{Type: graph.EventOrphanRecorded, Object: graph.Object{Ref: r}})
			}
			logger.Info("Loaded the orphan record", "owners", len(refs))
			c.openRecordGate()
			return
		}
		now := c.opts.Clock.Now()
		if failingSince.IsZero() {
			failingSince = now
		}
		switch {
		case c.recordLoaded():
			logger.Error(err, "Cannot load the orphan record; collecting without it", "retryIn", backoff)
		case now.Sub(failingSince) >= RecordLoadBound:
			logger.Error(err, "Cannot load the orphan record: collecting without it from now on. A dependent that gained its reference just before its owner's orphan deletion by another process may be collected", "failingFor", now.Sub(failingSince).Round(time.Second))
			c.openRecordGate()
			if c.opts.OrphanRecordDegraded != nil {
				c.opts.OrphanRecordDegraded(ctx, err)
			}
		default:
			logger.Error(err, "Cannot load the orphan record; dependents of absent owners wait for it", "retryIn", backoff, "degradeIn", (RecordLoadBound - now.Sub(failingSince)).Round(time.Second))
		}
		wait := backoff
		if !c.recordLoaded() {
			wait = min(wait, RecordLoadBound-now.Sub(failingSince))
		}
		select {
		case <-ctx.Done():
			return
		case <-c.opts.Clock.After(wait):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}
