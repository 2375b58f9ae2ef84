package finalizers

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/cascade-gc/cascade/gc"
	"github.com/cascade-gc/cascade/graph"
)

// foreground handles owner n being deleted in the foreground. The collector deletes the
// dependents (the graph handed them over when n entered foreground deletion); this waits until
// none blocks n (blockOwnerDeletion: true and still present, including one that is itself
// Terminating) and then removes the foregroundDeletion finalizer. Dependents that do not block
// are deleted but not waited for. While waiting, the owner is retried with backoff; the
// departure of a blocking dependent also wakes it (RecheckOwner).
func (p *Processor) foreground(ctx context.Context, logger klog.Logger, n graph.NodeView, res gc.Resource, pr *progress) outcome {
	blocking := p.view.BlockingDependents(n.UID)
	step := PlanForeground(blocking, pr.kickedAt, p.opts.Clock.Now(), p.opts.ResyncPeriod)
	pr.kickedAt = step.KickedAt
	if step.Kick {
		deps := p.view.Dependents(n.UID)
		for _, d := range deps {
			p.view.EnqueueAttemptToDelete(d.UID)
		}
		logger.V(2).Info("Still waiting for blocking dependents; handed every dependent to the collector again", "blocking", blocking, "dependents", len(deps))
	}
	if !step.RemoveFinalizer {
		logger.V(5).Info("Waiting for blocking dependents", "blocking", blocking)
		return backoff
	}
	removed, err := p.removeFinalizer(ctx, res, n.Namespace, n.Name, n.UID, metav1.FinalizerDeleteDependents)
	if err != nil {
		p.opts.Metrics.failed(metav1.FinalizerDeleteDependents)
		logger.V(2).Info("Removing the foregroundDeletion finalizer failed; will retry", "err", err)
		return backoff
	}
	if removed {
		logger.V(2).Info("Removed the foregroundDeletion finalizer: no dependent blocks the owner")
	}
	return done
}
