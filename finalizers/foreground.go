package finalizers

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/cascade-gc/cascade/client"
	"github.com/cascade-gc/cascade/work"
)

// foreground handles an owner being deleted in the foreground. The collector deletes the
// dependents (the graph handed them over when the owner entered foreground deletion, and the
// collector hands them over again every period); this waits until none blocks the owner
// (blockOwnerDeletion: true and still present, including one that is itself Terminating) and
// then removes the foregroundDeletion finalizer. Dependents that do not block are deleted but
// not waited for. While waiting, the owner is retried with backoff; the departure of a blocking
// dependent also wakes it (RecheckOwner).
func (p *Processor) foreground(ctx context.Context, logger klog.Logger, owner client.Target) (work.Outcome, error) {
	if blocking := p.view.BlockingDependents(owner.UID); blocking > 0 {
		logger.V(5).Info("Waiting for blocking dependents", "blocking", blocking)
		return work.Retry, nil
	}
	removed, err := p.removeFinalizer(ctx, owner, metav1.FinalizerDeleteDependents)
	if err != nil {
		p.opts.Metrics.failed(metav1.FinalizerDeleteDependents)
		return work.Retry, err
	}
	if removed {
		logger.V(2).Info("Removed the foregroundDeletion finalizer: no dependent blocks the owner")
	}
	return work.Done, nil
}
