package finalizers

import (
	"context"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/klog/v2"

	"github.com/cascade-gc/cascade/client"
	"github.com/cascade-gc/cascade/graph"
)

// orphan removes owner's reference from every dependent the graph knows of, re-reading the
// dependents until no new one appears (bounded by maxOrphanRounds), then records the owner
// (Options.Records) and removes the orphan finalizer. Any failed patch or record fails the pass
// before the finalizer is touched, so the owner is retried and never finished with a dependent
// still referencing it. A dependent the graph learns of only after the owner is gone is the
// collector's: the graph remembers the owner was deleted while orphaning (and a new leader
// loads the record), and the reference is removed, never a reason to delete.
func (p *Processor) orphan(ctx context.Context, logger klog.Logger, owner client.Target, ref graph.Ref, pr *progress) error {
	for range maxOrphanRounds {
		todo, unresolved := PlanOrphan(p.view.Dependents(owner.UID), pr.patched, p.view.ResourceFor)
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
	if p.opts.Records != nil {
		// A dependent that gained its reference just before the deletion may reach the graph
		// after the owner is gone; this process remembers the owner, but a new leader would not.
		if err := p.opts.Records.Record(ctx, ref); err != nil {
			return fmt.Errorf("recording the orphaned owner: %w", err)
		}
	}
	removed, err := p.removeFinalizer(ctx, owner, metav1.FinalizerOrphanDependents)
	if err != nil {
		return fmt.Errorf("removing the orphan finalizer: %w", err)
	}
	if removed {
		logger.V(2).Info("Removed the orphan finalizer", "orphaned", len(pr.patched))
	}
	return nil
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
