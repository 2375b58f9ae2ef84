package gc

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-gc/cascade/graph"
)

// runForegroundResync hands the dependents of every owner being deleted in the foreground to
// the delete workers every ForegroundResyncPeriod. The graph asks once, when an owner enters
// foreground deletion; this makes that level-driven, so nothing depends on one effect having
// led anywhere. Deciding on a dependent that needs nothing costs no API call.
func (c *Controller) runForegroundResync(ctx context.Context) {
	t := time.NewTicker(c.opts.ForegroundResyncPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.resyncForeground()
		}
	}
}

func (c *Controller) resyncForeground() {
	var deps []types.UID
	c.mu.RLock()
	for _, uid := range c.g.DeletingOwners() {
		if n, ok := c.g.Node(uid); ok && n.Finalizers.Has(graph.FinalizerForeground) {
			for _, d := range c.g.Dependents(uid) {
				deps = append(deps, d.UID)
			}
		}
	}
	c.mu.RUnlock()
	for _, uid := range deps {
		c.deleteQueue.Add(uid)
	}
}
