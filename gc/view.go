package gc

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cascade-gc/cascade/graph"
)

// View is the read access other packages (finalizers) get to the controller's graph. It is
// read-only: nothing flows back into the controller through it. Every method is safe for
// concurrent use; results are copies.
type View interface {
	// Node returns the graph's node of uid.
	Node(uid types.UID) (graph.NodeView, bool)
	// Owners returns the owner references of uid with the graph's verdict on each.
	Owners(uid types.UID) []graph.OwnerView
	// Dependents returns the objects that reference uid as an owner.
	Dependents(uid types.UID) []graph.Ref
	// BlockingDependents counts the dependents of uid that still exist and reference it with
	// blockOwnerDeletion=true.
	BlockingDependents(uid types.UID) int
	// DeletingOwners returns every observed object being deleted with a GC finalizer.
	DeletingOwners() []types.UID
	// ResourceFor returns the watched resource of an observed object's apiVersion and kind.
	ResourceFor(apiVersion, kind string) (Resource, bool)
	// Synced reports whether the graph reflects the cluster (the initial lists are in, or the
	// sync timeout passed: see UnsyncedKind).
	Synced() bool
	// UnsyncedKind returns the watched resource of apiVersion/kind and whether its view is
	// incomplete (initial list missing, or listing or watching it failing).
	UnsyncedKind(apiVersion, kind string) (Resource, bool)
	// Unsynced returns every watched resource whose view is incomplete.
	Unsynced() []Unsynced
	// CatchingUp returns the resources that synced once and have had no open watch since a
	// moment after since: their view may lag behind what was written there.
	CatchingUp(since time.Time) []Resource
}

// Stampable is an observed object as Controller.Stampable reports it.
type Stampable struct {
	graph.StampView
	Resource Resource
}

// Stampable returns the observed objects of the watched resources in want, and every observed
// object carrying a default-propagation stamp, with the resource of each: what the
// default-propagation pass (package finalizers/stamp) looks at. It scans the whole graph.
func (c *Controller) Stampable(want func(schema.GroupResource) bool) []Stampable {
	kinds := map[graph.KindKey]bool{}
	byKind := map[graph.KindKey]Resource{}
	for _, r := range c.monitors.watched() {
		k := graph.KindKey{APIVersion: r.GVR.GroupVersion().String(), Kind: r.Kind}
		byKind[k] = r
		kinds[k] = want(r.GVR.GroupResource())
	}
	c.mu.RLock()
	objs := c.g.Stampable(kinds)
	c.mu.RUnlock()
	out := make([]Stampable, 0, len(objs))
	for _, o := range objs {
		if r, ok := byKind[graph.KindKey{APIVersion: o.APIVersion, Kind: o.Kind}]; ok {
			out = append(out, Stampable{StampView: o, Resource: r})
		}
	}
	return out
}

var _ View = (*Controller)(nil)

func (c *Controller) Node(uid types.UID) (graph.NodeView, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.g.Node(uid)
}

func (c *Controller) Owners(uid types.UID) []graph.OwnerView {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.g.Owners(uid)
}

func (c *Controller) Dependents(uid types.UID) []graph.Ref {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.g.Dependents(uid)
}

func (c *Controller) BlockingDependents(uid types.UID) int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.g.BlockingDependents(uid)
}

func (c *Controller) DeletingOwners() []types.UID {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.g.DeletingOwners()
}

func (c *Controller) ResourceFor(apiVersion, kind string) (Resource, bool) {
	return c.monitors.resourceFor(apiVersion, kind)
}

func (c *Controller) UnsyncedKind(apiVersion, kind string) (Resource, bool) {
	return c.monitors.kindUnsynced(apiVersion, kind)
}

// view returns the graph's node and owners of uid under the read lock.
func (c *Controller) view(uid types.UID) (graph.NodeView, []graph.OwnerView, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n, ok := c.g.Node(uid)
	if !ok {
		return n, nil, false
	}
	return n, c.g.Owners(uid), true
}

// GraphStats returns the graph's counts (for metrics and tests).
func (c *Controller) GraphStats() graph.Stats {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.g.Stats()
}

// DeleteQueueDepth is the number of dependents waiting in the delete queue (fleet mode's
// per-member series).
func (c *Controller) DeleteQueueDepth() int { return c.deleteQueue.Len() }
