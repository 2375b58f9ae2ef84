package gc

import (
	"context"
	"time"

	"k8s.io/klog/v2"

	"github.com/cascade-gc/cascade/graph"
)

// loadOrphanRecords hands the recorded orphaned owners to the graph, retrying until it works;
// false when ctx ended first.
func (c *Controller) loadOrphanRecords(ctx context.Context) bool {
	if c.opts.OrphanRecords == nil {
		return true
	}
	logger := klog.FromContext(ctx)
	backoff := time.Second
	for {
		refs, err := c.opts.OrphanRecords.Load(ctx)
		if err == nil {
			for _, r := range refs {
				c.apply(graph.Event{Type: graph.EventOrphanRecorded, Object: graph.Object{Ref: r}})
			}
			logger.Info("Loaded the orphan record", "owners", len(refs))
			return true
		}
		logger.Error(err, "Cannot load the orphan record; collecting nothing until it loads", "retryIn", backoff)
		select {
		case <-ctx.Done():
			return false
		case <-c.opts.Clock.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}
