package gc

import (
	"context"
	"runtime/debug"
	"time"

	"k8s.io/klog/v2"

	"github.com/cascade-gc/cascade/graph"
)

// Synced reports whether the graph counts as synced (/readyz): the first discovery round
// completed and its monitors delivered their initial lists, or SyncTimeout passed (see
// Unsynced for those that did not). From then on the graph reflects the cluster, but for the
// unsynced resources.
func (c *Controller) Synced() bool { return c.synced.Load() }

// Unsynced returns the watched resources whose view is not complete (initial list missing, or
// listing or watching failing since the last complete list), sorted by name.
func (c *Controller) Unsynced() []Unsynced { return c.monitors.unsynced() }

// CatchingUp returns the resources that synced once and whose watch ended after since and is
// not open again (relisting after an expired watch, reconnecting after an API server restart, or
// failing): objects written there meanwhile may be missing from the graph, or old in it.
func (c *Controller) CatchingUp(since time.Time) []Resource { return c.monitors.catchingUp(since) }

// watchInitialSync marks the graph synced (Synced) once the first discovery round is done and
// its monitors delivered their initial lists, or SyncTimeout after it started, and logs the
// resources it proceeds without.
func (c *Controller) watchInitialSync(ctx context.Context) {
	logger := klog.FromContext(ctx)
	start := time.Now()
	for {
		all := c.discovered.Load() && c.monitors.allSynced()
		if all || (c.discovered.Load() && time.Since(start) >= c.opts.SyncTimeout) {
			c.synced.Store(true)
			c.mu.RLock()
			st := c.g.Stats()
			c.mu.RUnlock()
			logger.Info("Dependency graph synced", "duration", time.Since(start).Round(time.Millisecond), "nodes", st.Nodes, "virtual", st.Virtual)
			if !all {
				for _, u := range c.monitors.unsynced() {
					logger.Error(nil, "Resource not synced; proceeding without it: decisions that need it wait, and it is retried with backoff",
						"resource", GVRString(u.Resource.GVR), "syncTimeout", c.opts.SyncTimeout, "lastError", u.Err)
				}
			}
			// The initial lists were decoded in full and are garbage now; the graph keeps a
			// fraction of them. Hand the peak back to the OS once instead of holding it.
			debug.FreeOSMemory()
			c.opts.Metrics.GraphSyncSeconds.Set(time.Since(start).Seconds())
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Resources returns a copy of the watched resource set.
func (c *Controller) Resources() ResourceSet {
	c.resMu.RLock()
	defer c.resMu.RUnlock()
	out := make(ResourceSet, len(c.resources))
	for k, v := range c.resources {
		out[k] = v
	}
	return out
}

// syncResources runs one discovery round and starts and stops monitors to match. A failed
// group keeps the resources it had, so a broken aggregated API never removes what is already
// watched nor stops collection elsewhere.
func (c *Controller) syncResources(ctx context.Context) {
	logger := klog.FromContext(ctx)
	if c.opts.AfterDiscovery != nil {
		defer c.opts.AfterDiscovery(ctx)
	}
	// A server that refused watch-lists may serve them now (upgraded, its feature gate on):
	// each resource listed in pages tries again at its next list.
	c.monitors.retryWatchLists()
	res, err := DiscoverDeletable(ctx, c.opts.Discovery, c.ignored())
	failed := map[string]struct{}{}
	for gv := range res.FailedGroups {
		failed[gv.Group] = struct{}{}
	}
	if err != nil {
		failed[""] = struct{}{}
	}
	c.failedGroups.Store(&failed)
	if err != nil {
		c.opts.Metrics.DiscoveryErrors.WithLabelValues("all").Inc()
		logger.Error(err, "Discovery failed; keeping the resources already watched")
		return
	}
	old := c.Resources()
	next := res.Resources
	for gv, gerr := range res.FailedGroups {
		c.opts.Metrics.DiscoveryErrors.WithLabelValues(c.groupVersionLabel(gv.String())).Inc()
		logger.Error(gerr, "Failed to discover API group; keeping its resources and collecting the others", "groupVersion", gv.String())
		for gvr, r := range old {
			if gvr.Group == gv.Group {
				next[gvr] = r
			}
		}
	}
	c.keepUnfinished(ctx, old, next, res.Ignored)
	added, removed := old.Diff(next)
	// The REST mapper is refreshed every round, as in-tree: a kind can change scope or gain a
	// version without the set of deletable resources changing (and a mapping error for an
	// owner kind is retried against fresh discovery).
	if c.opts.Mapper != nil {
		c.opts.Mapper.Reset()
		c.mappings.clear()
	}
	for _, gvr := range removed {
		c.monitors.stop(gvr, c.opts.Clock.Now())
		if c.opts.Member == "" {
			c.opts.Metrics.ResourceWatched.DeleteLabelValues(gvr.Group, gvr.Version, gvr.Resource)
		}
		logger.Info("Stopped watching resource", "resource", GVRString(gvr))
	}
	for _, gvr := range added {
		r := next[gvr]
		if c.opts.Metadata != nil {
			if err := c.monitors.start(ctx, r); err != nil {
				logger.Error(err, "Cannot watch resource", "resource", GVRString(gvr))
				delete(next, gvr)
				continue
			}
		}
		if c.opts.Member == "" { // a fleet's members share the series: see memberGroupVersion
			c.opts.Metrics.ResourceWatched.WithLabelValues(gvr.Group, gvr.Version, gvr.Resource).Set(1)
		}
		logger.V(2).Info("Watching resource", "resource", GVRString(gvr), "kind", r.Kind, "namespaced", r.Namespaced)
	}
	// The objects of resources stopped now or in an earlier round (ghosts.go).
	c.unwatchStopped(ctx)
	c.resMu.Lock()
	c.resources = next
	c.resMu.Unlock()
	// Give back what churn left behind (namespaces, kinds and nodes that went): O(nodes), once
	// per round, under the write lock.
	c.mu.Lock()
	st := c.g.Compact()
	c.mu.Unlock()
	if st.FreedNamespaces > 0 || st.FreedKinds > 0 {
		logger.V(2).Info("Compacted the dependency graph", "freedNamespaces", st.FreedNamespaces, "freedKinds", st.FreedKinds, "namespaces", st.Namespaces, "kinds", st.Kinds, "nodeSlots", st.NodeSlots)
	}
	if len(added) > 0 || len(removed) > 0 {
		logger.Info("Deletable resources discovered", "count", len(next), "added", len(added), "removed", len(removed))
	}
	c.discovered.Store(true)
}

// keepUnfinished keeps watching, in next, each resource of old that is still served but now
// ignored (the policy's ignoredResources gained it) while cascade has work left on its objects:
// stamps of the policy's defaultPropagation to lift (the stamping pass lifts them, the rule being
// gone) and GC finalizers to finish (the finalizers' processor finishes them). What it stopped
// watching it could no longer finish: a stamped orphan or foregroundDeletion finalizer would hold
// the object's deletion for ever in collector mode (issue 32.2). Once none is left, the next round
// stops the watch. The count is logged every round it holds a watch.
func (c *Controller) keepUnfinished(ctx context.Context, old, next, ignored ResourceSet) {
	var kinds []graph.KindKey
	held := map[graph.KindKey]Resource{}
	for gvr, r := range old {
		if _, still := next[gvr]; still {
			continue
		}
		if _, served := ignored[gvr]; !served {
			continue
		}
		k := graph.KindKey{APIVersion: gvr.GroupVersion().String(), Kind: r.Kind}
		kinds = append(kinds, k)
		held[k] = r
	}
	if len(kinds) == 0 {
		return
	}
	c.mu.RLock()
	left := c.g.Unfinished(kinds)
	c.mu.RUnlock()
	for k, n := range left {
		r := held[k]
		next[r.GVR] = r
		klog.FromContext(ctx).Info("Keeping the watch of an ignored resource until cascade's stamps on its objects are lifted and their GC finalizers finished", "resource", GVRString(r.GVR), "objects", n)
	}
}

// memberGroupVersion is the group_version under which a fleet member's failed API groups are
// counted. A fleet's members share the process's series, and what a member serves is its
// tenant's choice: per-resource and per-group series of members would be as many as the
// members' APIs, and one member's round would delete another's. So a member sets no
// cascade_resource_watched, and its failed groups are counted under this one value (the log
// names them); the fleet's own series are per member (internal/fleet).
const memberGroupVersion = "fleet-member"

// groupVersionLabel is discovery_errors_total's group_version for gv: gv's own for the single
// cluster, memberGroupVersion for a fleet member.
func (c *Controller) groupVersionLabel(gv string) string {
	if c.opts.Member != "" {
		return memberGroupVersion
	}
	return gv
}
