package finalizers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/klog/v2"

	"github.com/cascade-gc/cascade/finalizers/orphanrecord"
	"github.com/cascade-gc/cascade/graph"
	"github.com/cascade-gc/cascade/internal/client"
)

const (
	// EventReasonRecordUnavailable is the reason of the Warning Event on an owner whose orphan
	// finalizer was removed without recording it.
	EventReasonRecordUnavailable = "OrphanRecordUnavailable"
	// RecordDegradedFull, RecordDegradedError and RecordDegradedLoad are the reasons of
	// cascade_orphan_record_degraded_total: the record is full, writing it kept failing, or
	// loading it kept failing (a leader then collects without it: gc.RecordLoadBound).
	RecordDegradedFull  = "full"
	RecordDegradedError = "error"
	RecordDegradedLoad  = "load"
	// recordRetryFor bounds how long a failing record write holds an owner's orphan finalizer
	// (the owner is retried with the queue's backoff meanwhile); gc.RecordLoadBound is the same
	// bound on a failing load.
	recordRetryFor = 20 * time.Second
)

// orphan removes owner's reference from every dependent the graph knows of, re-reading the
// dependents until no new one appears (bounded by maxOrphanRounds), then records the owner
// when its dependents may need it (Options.OrphanRecord; see record) and removes the orphan
// finalizer. Any failed patch fails the pass before the finalizer is touched, so the owner is
// retried and never finished with a dependent still referencing it; a record that cannot be
// written degrades instead, within a bounded time (record). A dependent the graph learns of
// only after the owner is gone is the collector's: the graph remembers the owner was deleted
// while orphaning (and a new leader loads the record), and the reference is removed, never a
// reason to delete.
func (p *Processor) orphan(ctx context.Context, logger klog.Logger, owner client.Target, ref graph.Ref, pr *progress) error {
	for range maxOrphanRounds {
		deps := p.view.Dependents(owner.UID)
		if len(deps) > 0 {
			pr.sawDependents = true
		}
		todo, unresolved := PlanOrphan(deps, pr.patched, p.view.ResourceFor)
		for _, d := range unresolved {
			// Its resource is no longer watched (a removed CRD takes its objects with it).
			logger.V(2).Info("Cannot orphan a dependent whose resource is not watched", "dependent", d.String())
		}
		if len(todo) == 0 {
			break
		}
		ok, err := p.patchAll(ctx, owner.UID, todo, pr)
		p.opts.Metrics.orphaned(ok)
		if err != nil {
			return err
		}
		logger.V(4).Info("Orphaned dependents", "count", ok)
	}
	var read *metav1.PartialObjectMetadata // the owner as record read it, if it did
	if p.opts.OrphanRecord != nil {
		var err error
		if read, err = p.record(ctx, logger, owner, ref, pr); err != nil {
			return err
		}
	}
	removed, err := p.removeFinalizerFrom(ctx, owner, metav1.FinalizerOrphanDependents, read)
	if err != nil {
		return fmt.Errorf("removing the orphan finalizer: %w", err)
	}
	if removed {
		logger.V(2).Info("Removed the orphan finalizer", "orphaned", len(pr.patched))
	}
	return nil
}

// record writes the owner to the orphan record before its finalizer goes, when recordNeeded
// says its dependents may need it. It returns an error (the pass fails and the owner is
// retried, finalizer kept) only while a failing write is being retried, for at most
// recordRetryFor since its first failure; a full record (orphanrecord.ErrFull) at once, and a
// write still failing after that, degrade: the finalizer goes without a record, and a Warning
// Event, a metric and a log line say that this owner's late dependents are less protected. It
// returns the owner's live metadata when it read it, for the finalizer's removal.
func (p *Processor) record(ctx context.Context, logger klog.Logger, owner client.Target, ref graph.Ref, pr *progress) (*metav1.PartialObjectMetadata, error) {
	need, read, err := p.recordNeeded(ctx, owner, pr)
	if err != nil {
		return nil, err
	}
	if !need {
		p.opts.Metrics.recordSkipped()
		logger.V(4).Info("Not recording the orphaned owner: no dependent of it seen, and it was not deleted within the record window of its creation", "window", p.opts.RecordWindow)
		return read, nil
	}
	err = p.opts.OrphanRecord.Record(ctx, ref)
	if err == nil {
		pr.recordFailedSince = time.Time{}
		return read, nil
	}
	if ctx.Err() != nil {
		return nil, err // shutting down: not the record's failure
	}
	reason := RecordDegradedError
	switch {
	case errors.Is(err, orphanrecord.ErrFull):
		reason = RecordDegradedFull
	case pr.recordDegraded:
		// Degraded on an earlier pass (the finalizer's removal failed since): no new wait.
	default:
		now := p.opts.Clock.Now()
		if pr.recordFailedSince.IsZero() {
			pr.recordFailedSince = now
		}
		if waited := now.Sub(pr.recordFailedSince); waited < recordRetryFor {
			return nil, fmt.Errorf("recording the orphaned owner (retried for %s more, then the finalizer goes without a record): %w", (recordRetryFor - waited).Round(time.Second), err)
		}
	}
	p.degradeRecord(logger, owner, pr, reason, err)
	return read, nil
}

// recordNeeded reports whether the owner must be recorded: when this process saw a dependent
// of it (the graph listed one, whether or not it was patched now), when the owner was deleted
// less than RecordWindow after its creation (a controller's first dependent may still be in
// flight: a Job's pod, a Deployment's ReplicaSet), and whenever that is not known. The last
// question costs the owner's live metadata (both times are the API server's own, so no clock
// skew enters), which is returned for the finalizer's removal to start from, so the pass
// still reads the owner once.
func (p *Processor) recordNeeded(ctx context.Context, owner client.Target, pr *progress) (bool, *metav1.PartialObjectMetadata, error) {
	if pr.sawDependents || len(pr.patched) > 0 || p.opts.RecordWindow <= 0 {
		return true, nil, nil
	}
	live, err := p.opts.Client.Get(ctx, owner.GVR, owner.Namespace, owner.Name)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil, nil // gone: nothing left to remove; its age is unknown
	case err != nil:
		return false, nil, fmt.Errorf("reading the owner: %w", err)
	case live.UID != owner.UID, live.DeletionTimestamp == nil, live.CreationTimestamp.IsZero():
		return true, live, nil
	}
	return live.DeletionTimestamp.Sub(live.CreationTimestamp.Time) < p.opts.RecordWindow, live, nil
}

// degradeRecord says, once per owner, that its finalizer goes without a record.
func (p *Processor) degradeRecord(logger klog.Logger, owner client.Target, pr *progress, reason string, err error) {
	if pr.recordDegraded {
		return
	}
	pr.recordDegraded = true
	p.opts.Metrics.recordDegraded(reason)
	why := "the orphan record is full (it is pruned of entries older than --orphan-record-ttl)"
	if reason == RecordDegradedError {
		why = fmt.Sprintf("writing the orphan record kept failing for %s: %v", recordRetryFor, err)
	}
	logger.Info("Removing the orphan finalizer without recording the owner; protection of its late dependents across a failover is reduced", "reason", reason, "err", err)
	if p.opts.Events != nil {
		p.opts.Events.Eventf(ownerObject(owner, p.view), corev1.EventTypeWarning, EventReasonRecordUnavailable,
			"Orphaning without the orphan record: %s. Protection across a failover is reduced: a dependent that gained its reference just before this deletion and that cascade has not seen yet may be deleted if another cascade process takes over before it does", why)
	}
}

// patchJob asks a patch worker to remove owner's reference from dep; done receives the result.
type patchJob struct {
	owner types.UID
	dep   client.Target
	done  func(error)
}

// runPatcher serves patch jobs until ctx ends. Every job taken is answered.
func (p *Processor) runPatcher(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-p.jobs:
			j.done(client.RemoveOwnerRefs(ctx, p.opts.Client, j.dep, []types.UID{j.owner}))
		}
	}
}

// patchAll hands every dependent in todo to the patch workers and waits for all answers. The
// successes go into pr.patched; it returns their number and the failures.
func (p *Processor) patchAll(ctx context.Context, owner types.UID, todo []client.Target, pr *progress) (int, error) {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex // guards ok, errs and pr.patched while jobs run
		ok   int
		errs []error
	)
	for _, d := range todo {
		wg.Add(1)
		j := patchJob{owner: owner, dep: d, done: func(err error) {
			mu.Lock()
			if err == nil {
				pr.patched[d.UID] = struct{}{}
				ok++
			} else {
				errs = append(errs, fmt.Errorf("%s: %w", d, err))
			}
			mu.Unlock()
			wg.Done()
		}}
		select {
		case p.jobs <- j:
		case <-ctx.Done():
			wg.Done()
			wg.Wait()
			return ok, ctx.Err()
		}
	}
	wg.Wait()
	return ok, utilerrors.NewAggregate(errs)
}
