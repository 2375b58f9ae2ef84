package gc

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-gc/cascade/graph"
)

// observedExcept lists the observed objects of one kind that are not in seen (a complete
// list's deletions).
func (c *Controller) observedExcept(apiVersion, kind string, seen *graph.UIDSet) []graph.Ref {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.g.ObservedOfExcept(apiVersion, kind, seen)
}

// apply feeds one event to the graph and dispatches its effects.
func (c *Controller) apply(ev graph.Event) {
	c.mu.Lock()
	eff := c.g.Apply(ev)
	c.latency.observe(ev, eff) // under the lock: it sees events in the graph's order
	c.mu.Unlock()
	if eff.IsZero() {
		return
	}
	if !c.opts.Companion { // no delete worker runs, and the in-tree collector says this itself
		for _, uid := range eff.AttemptDelete {
			c.deleteQueue.Add(uid)
		}
		for _, inv := range eff.InvalidNamespace {
			c.reportInvalidNamespace(inv)
		}
	}
	for _, ref := range eff.VerifyOwner {
		c.verifyQueue.Add(ref)
	}
	if c.opts.Finalizers != nil {
		for _, uids := range [][]types.UID{eff.AttemptOrphan, eff.Foreground, eff.RecheckOwner} {
			for _, uid := range uids {
				c.opts.Finalizers.Enqueue(uid)
			}
		}
	}
}
